"""The demo's verdict lines: read from its measured figures, each able to say no."""

from __future__ import annotations

from cooper.experiment.demo_summary import verdicts


def _figures(rate=0.0, worst=0.0, steps=6, with_pairs=5, updates=5, first=0.8, last=0.9,
             real=0.9):
    return {"suite_false_positive_rate": rate, "suite_worst_kind": "opener",
            "suite_worst_kind_rate": worst, "real_balanced_accuracy": real, "real_n": 118,
            "cooper_run": {"steps": steps, "steps_with_pairs": with_pairs, "pairs": 9,
                           "rm_updates": updates, "agreement_first": first,
                           "agreement_last": last}}


def test_a_working_run_reads_as_such():
    suite, cooper, agree = verdicts(_figures())
    assert suite.startswith("reward model: trusted") and "paid 0.0% of" in suite
    assert "right on 90.0% of 118 held-out real completions" in suite
    assert cooper.startswith("Cooper: working") and "pairs on 5 of 6 steps (9 in all)" in cooper
    assert "updated on 5 of 6" in cooper
    assert "agrees with the verifier: 0.80" in agree and "0.90 of the last" in agree


def test_each_verdict_says_no_when_its_figure_misses_the_bar():
    suite, _, _ = verdicts(_figures(rate=0.03, worst=0.04))
    assert "NOT trusted" in suite and "paid 3.0% of" in suite
    suite, _, _ = verdicts(_figures(rate=0.018, worst=0.2))  # overall under 2%, one kind not
    assert "NOT trusted" in suite and "20.0% of its worst kind, opener" in suite
    suite, _, _ = verdicts(_figures(real=0.84))  # the suite passed, real completions did not
    assert "NOT trusted" in suite and "right on 84.0% of 118" in suite
    suite, _, _ = verdicts(_figures(real=0.85))  # the bar itself passes
    assert suite.startswith("reward model: trusted")
    _, cooper, _ = verdicts(_figures(with_pairs=2))  # pairs on fewer than half the steps
    assert "NOT working" in cooper
    _, cooper, _ = verdicts(_figures(updates=0))  # pairs, but the reward model never moved
    assert "NOT working" in cooper
    _, _, agree = verdicts(_figures(first=0.69))
    assert "does NOT agree" in agree


def test_missing_figures_leave_their_line_out():
    assert verdicts({}) == []
    # a task without shipped real completions: the suite decides, and the line says what is missing
    (line,) = verdicts({"suite_false_positive_rate": 0.01})
    assert line.startswith("reward model: trusted") and "not measured" in line


def test_the_reward_model_before_and_after_cooper_is_a_result_line():
    after = {"suite_false_positive_rate": 0.01, "suite_worst_kind": "units",
             "suite_worst_kind_rate": 0.05, "suite_kind_rates": {"opener": 0.025, "units": 0.05},
             "real_balanced_accuracy": 0.8}
    lines = verdicts({**_figures(rate=0.03, worst=0.1), "after_cooper": after})
    assert len(lines) == 4
    line = lines[3]
    assert line.startswith("reward model before -> after Cooper's 5 updates")
    assert "3.0% -> 1.0% false positives (opener 10.0% -> 2.5%; worst kind after: units 5.0%)" in line
    assert "real completions 0.900 -> 0.800" in line  # worse is said as plainly as better
    assert "NOT" not in line and "trusted" not in line  # no bar on it
    from cooper.experiment.demo_summary import before_after

    one = before_after(_figures(rate=0.03, worst=0.1), after, 1)
    assert one.startswith("reward model before -> after Cooper's 1 update: ")


def test_a_printed_verdict_keeps_every_word_whole():
    """The demo prints each verdict wrapped to 100 columns; a wrap at "held-out"'s hyphen
    printed "held-" and "out" on two lines (seen with 64.4% and 118 completions)."""
    from cooper.experiment.demo_summary import SUMMARY_WIDTH, verdict_lines

    verdict = ("reward model: NOT trusted: it paid 24.3% of the robustness suite's wrong "
               "completions (bar 2%) and 80.0% of its worst kind, long_padding (bar 5% for every "
               "kind); it was right on 64.4% of 118 held-out real completions, half of them "
               "correct (bar 85%)")
    printed = verdict_lines(verdict)
    assert max(len(line) for line in printed.splitlines()) <= SUMMARY_WIDTH
    assert " ".join(printed.split()) == verdict


def test_the_demo_refuses_a_trunk_of_no_layers():
    import pytest

    from cooper.config.demo import DemoSettings
    from cooper.errors import UserError

    assert DemoSettings(rm_trunk=4).rm_trunk == 4 and DemoSettings(rm_trunk=None).rm_trunk is None
    with pytest.raises(UserError, match="rm_trunk must be >= 1"):
        DemoSettings(rm_trunk=0)


def test_the_demo_precision_auto_follows_the_cpu_and_names_are_kept(monkeypatch):
    import pytest

    from cooper.config.demo import DemoSettings
    from cooper.errors import UserError
    from cooper.experiment import demo

    monkeypatch.setattr(demo, "cpu_bfloat16", lambda: True)
    assert demo.compute_dtype("auto") == "bfloat16"
    monkeypatch.setattr(demo, "cpu_bfloat16", lambda: False)
    assert demo.compute_dtype("auto") == "float32"  # emulated bfloat16 is slower than float32
    assert demo.compute_dtype("bfloat16") == "bfloat16"  # a name is taken as asked
    with pytest.raises(UserError, match="dtype must be one of auto, float32, bfloat16"):
        DemoSettings(dtype="float16")


def test_cooper_works_only_with_pairs_and_an_update_on_five_steps_of_six():
    from cooper.experiment.demo_summary import steps_needed

    assert [steps_needed(n) for n in (1, 2, 3, 6, 12)] == [1, 2, 3, 5, 10]
    _, cooper, _ = verdicts(_figures(with_pairs=5, updates=5))
    assert cooper.startswith("Cooper: working") and "(bar: both on 5 of 6)" in cooper
    _, cooper, _ = verdicts(_figures(with_pairs=4, updates=4))  # "half the steps" no longer passes
    assert cooper.startswith("Cooper: NOT working")
    _, cooper, _ = verdicts(_figures(with_pairs=6, updates=4))  # pairs, but updates skipped
    assert cooper.startswith("Cooper: NOT working")


def _step(step, right, pairs, acc, loss, agreement=0.8, wrong=None):
    return {"step": step, "right": right, "pairs": pairs, "updated": 1.0 if pairs else 0.0,
            "pair_acc_before": acc, "rm_loss": loss, "score_wrong": wrong,
            "agreement": agreement}


def test_the_reward_model_on_the_policys_new_pairs_is_pooled_by_half_and_has_no_bar():
    from cooper.experiment.demo_summary import on_new_pairs

    steps = [_step(1, 0.4, 4, 0.5, 0.8), _step(2, 0.3, 0, None, None),
             _step(3, 0.5, 6, 1.0, 0.2), _step(4, 0.4, 5, 0.8, 0.5), _step(5, 0.4, 5, 1.0, 0.1),
             _step(6, 0.3, 0, None, None)]
    line = on_new_pairs(steps)
    # steps 1-3: (4 * 0.5 + 6 * 1.0) / 10 = 80%, loss (4 * 0.8 + 6 * 0.2) / 10 = 0.44
    assert "ranked 80% of 10 pairs right in steps 1-3 and 90% of 10 in steps 4-6" in line
    assert line.endswith("pairwise loss 0.44 -> 0.30") and "(no bar)" in line
    assert "NOT" not in line
    # with the score of the wrong rollouts: the mean over each half's steps that logged it
    wrong = (0.4, 0.2, None, 0.1, 0.2, 0.3)
    paid = [{**st, "score_wrong": w} for st, w in zip(steps, wrong, strict=True)]
    assert on_new_pairs(paid).endswith("it paid the wrong rollouts 0.30 -> 0.20 on average")
    lines = verdicts({**_figures(), "cooper_steps": steps})
    assert lines[3] == line
    # a half without pairs says nothing rather than a figure of nothing
    assert on_new_pairs([_step(1, 0.0, 0, None, None), _step(2, 0.4, 4, 1.0, 0.1)]) is None
    assert on_new_pairs([_step(1, 0.4, 4, 1.0, 0.1)]) is None


def test_the_step_table_has_a_column_a_step_and_fits_the_summary():
    from cooper.experiment.demo_summary import SUMMARY_WIDTH, cooper_steps, steps_table

    rows = [{"step": 0, "val/accuracy": 0.1},  # validation before training: not a step
            {"step": 1, "reward/rule_mean": 0.375, "rm/pairs": 4, "rm/updated": 1,
             "rm/pair_acc_before": 0.75, "rm/loss": 0.5, "rm/agreement": 0.8125},
            {"step": 2, "reward/rule_mean": 0.0, "rm/pairs": 0, "rm/updated": 0,
             "rm/agreement": 1.0}]
    steps = cooper_steps(rows)
    assert [st["step"] for st in steps] == [1, 2] and steps[1]["pair_acc_before"] is None
    table = steps_table(steps).splitlines()
    assert table[0].split() == ["Cooper", "step", "1", "2"]
    assert table[1].split()[-2:] == ["0.38", "0.00"] and table[2].split()[-2:] == ["4", "0"]
    assert table[3].split()[-2:] == ["yes", "no"] and table[4].split()[-2:] == ["0.75", "-"]
    assert table[6].split()[-2:] == ["-", "-"]  # no rm/score_wrong logged
    many = steps_table([{**steps[0], "step": i} for i in range(1, 26)])
    assert max(len(x) for x in many.splitlines()) <= SUMMARY_WIDTH
    assert many.count("Cooper step") == 3  # 10 steps a block


def test_the_reward_models_epochs_follow_the_precision_unless_set(monkeypatch):
    from cooper.config.demo import RM_RECIPES, DemoSettings
    from cooper.experiment.demo import rm_recipe

    assert rm_recipe(DemoSettings(), "bfloat16") == RM_RECIPES["bfloat16"] == (4, 2e-4)
    assert rm_recipe(DemoSettings(), "float32") == RM_RECIPES["float32"] == (4, 2e-4)
    assert rm_recipe(DemoSettings(rm_epochs=2, rm_lr=3e-4), "float32") == (2, 3e-4)
    # the two shipped recipes are the same, so tell them apart to see each precision reads its own
    monkeypatch.setitem(RM_RECIPES, "float32", (3, 1e-4))
    assert rm_recipe(DemoSettings(), "float32") == (3, 1e-4)
    assert rm_recipe(DemoSettings(), "bfloat16") == (4, 2e-4)
    assert rm_recipe(DemoSettings(rm_epochs=5), "float32") == (5, 1e-4)  # the unset one: recipe's
    assert rm_recipe(DemoSettings(rm_lr=1e-3), "bfloat16") == (4, 1e-3)
