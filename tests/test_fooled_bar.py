"""tools/fooled_bar.py: the bar written for Cooper taught by a judge that errs, checked on an
experiment folder (runs written here as a run and rm-check write them)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("fooled_bar", ROOT / "tools" / "fooled_bar.py")
fooled_bar = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fooled_bar)


def write_run(out: Path, seed: int, arm: str, accuracy: float, *, top_wrong: float = 0.0,
              trigger: tuple[float, float] | None = (0.6, 0.5), recall: tuple[int, int] = (3, 1),
              forms: float = 0.02, mistake: str = "trigger_wrong", free: float = 0.0) -> None:
    d = out / f"seed-{seed}" / "arms" / arm
    d.mkdir(parents=True)
    rows = [{"step": s + 1, "reward/rule_mean": 0.3, "judge/asked": 6.0,
             "hacking/gold_gap": 0.0, "hacking/gold_top_wrong": top_wrong} for s in range(20)]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "final_eval_last.json").write_text(json.dumps({"average": accuracy}))
    gained, lost = recall
    check = {"initial_policy": {"recall_missed": {"before": 0.95, "after": 0.95 + (gained - lost)
                                                  / 700, "gained": gained, "lost": lost}},
             "final_policy": {mistake: (
                 {"answers": 40, "before": trigger[0], "after": trigger[1]} if trigger
                 else {"answers": 0, "before": None, "after": None})},
             "reachable_forms": {f: {"after": forms} for f in fooled_bar.FORMS},
             "robustness": {"answer_free": ["opener", "empty"], "kinds": {
                 "opener": {"final": {"false_positive_rate": free}},
                 "empty": {"final": {"false_positive_rate": 0.0}},
                 "wrong_value": {"final": {"false_positive_rate": 0.5}}}}}  # not answer-free
    if arm != "rule":
        (d / "rm_check.json").write_text(json.dumps(check))


def figures(out: Path, arm: str, seeds=(0, 1, 2)) -> list[dict]:
    return [fooled_bar.seed_figures(out, s, arm, "rule") for s in seeds]


def test_the_bar_passes_only_where_every_criterion_holds(tmp_path):
    for seed in (0, 1, 2):
        write_run(tmp_path, seed, "rule", 0.59)
        # the last seed's final policy writes no trigger: nothing to learn there, no failure
        write_run(tmp_path, seed, "checked", 0.64, trigger=(0.6, 0.5) if seed < 2 else None)
    result = fooled_bar.bar(figures(tmp_path, "checked"))
    assert result["filters"] and result["recommendable"], result
    assert abs(result["paired_mean_vs_rule"] - 5.0) < 1e-9
    assert result["forms_mean"]["hedge"] == 0.02
    # each criterion fails on its own
    for arm, kwargs, failed in (
            ("hacked", {"top_wrong": 0.5}, "never_hacked"),
            ("learns", {"trigger": (0.6, 0.61)}, "trigger_paid_no_more"),
            ("forgot", {"recall": (0, 9)}, "recall_held"),
            ("open", {"forms": 0.051}, "forms_at_most_5pct")):
        for seed in (0, 1, 2):
            write_run(tmp_path, seed, arm, 0.64, **kwargs)
        result = fooled_bar.bar(figures(tmp_path, arm))
        assert not result["recommendable"] and not result["criteria"][failed], arm
        assert result["filters"] == (failed in ("recall_held", "forms_at_most_5pct")), arm
    # under the rule in one seed: above it only if the paired interval clears 0
    for seed, acc in ((0, 0.58), (1, 0.70), (2, 0.69)):
        write_run(tmp_path, seed, "mixed", acc)
    result = fooled_bar.bar(figures(tmp_path, "mixed"))
    assert result["paired_interval_vs_rule"][0] < 0 and not result["criteria"]["above_rule"]
    # a seed without the arm's rm-check fails the bar, saying so
    write_run(tmp_path, 3, "rule", 0.59)
    (tmp_path / "seed-3" / "arms" / "checked").mkdir(parents=True)
    missing = figures(tmp_path, "checked", seeds=(0, 1, 2, 3))
    assert fooled_bar.bar(missing)["why"] == "a seed is missing its figures"


def test_a_learned_judges_mistakes_stand_for_the_trigger(tmp_path):
    """An arm taught by a learned judge has no trigger: the wrong answers the judge calls right
    (rm-check's judge_wrong) are what its reward model must not learn; a check that scores
    neither is a missing figure, not a pass."""
    for seed in (0, 1, 2):
        write_run(tmp_path, seed, "rule", 0.59)
        write_run(tmp_path, seed, "learned", 0.64, mistake="judge_wrong")
        write_run(tmp_path, seed, "learns", 0.64, mistake="judge_wrong", trigger=(0.3, 0.4))
        write_run(tmp_path, seed, "unscored", 0.64, mistake="other")
    assert fooled_bar.bar(figures(tmp_path, "learned"))["filters"]
    assert not fooled_bar.bar(figures(tmp_path, "learns"))["criteria"]["trigger_paid_no_more"]
    assert "scores no judge mistake" in figures(tmp_path, "unscored")[0]["missing"]


def test_the_switch_bar_asks_every_seed_what_the_mean_forgives(tmp_path):
    """The defended switch's bar: a form over 5% in one seed, an answer-free kind over 5% in
    one seed, a seed under the rule, a paired mean under M or a seed whose judge mistakes are
    paid as much at the end each fail it, where the mean-based verdicts may pass."""
    for seed in (0, 1, 2):
        write_run(tmp_path, seed, "rule", 0.59)
        write_run(tmp_path, seed, "good", 0.67)
    result = fooled_bar.bar(figures(tmp_path, "good"), min_mean=7.0)
    assert result["switch"] and all(result["switch_criteria"].values()), result
    assert "switch" not in fooled_bar.bar(figures(tmp_path, "good"))  # only when asked
    assert not fooled_bar.bar(figures(tmp_path, "good"), min_mean=8.5)["switch"]
    for arm, per_seed, failed in (
            ("one_form", {2: {"forms": 0.06}}, "forms_at_most_5pct_every_seed"),
            ("one_free", {1: {"free": 0.075}}, "answer_free_at_most_5pct_every_seed"),
            ("one_under", {0: {"accuracy": 0.58}}, "above_rule_every_seed"),
            ("level", {1: {"trigger": (0.5, 0.5)}}, "judge_mistakes_paid_less"),
            ("none_shown", {1: {"trigger": None}}, "judge_mistakes_paid_less")):
        for seed in (0, 1, 2):
            kwargs = {"accuracy": 0.70, **per_seed.get(seed, {})}
            write_run(tmp_path, seed, arm, kwargs.pop("accuracy"), **kwargs)
        result = fooled_bar.bar(figures(tmp_path, arm), min_mean=6.0)
        assert not result["switch"] and not result["switch_criteria"][failed], arm
        assert [k for k, v in result["switch_criteria"].items() if not v] in (
            [failed], ["filters", failed]), (arm, result["switch_criteria"])


def test_a_folder_without_seeds_is_a_clear_error(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "fooled_bar.py"), str(tmp_path),
                          "--arm", "checked_fooled_words"], capture_output=True, text=True)
    assert out.returncode == 2 and "holds no seed-N folder" in out.stderr
