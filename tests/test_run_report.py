"""`cooper report RUN_DIR`: a training run's totals from hand-made records, a rule-mode run
without reward-model metrics, which report a folder gets, the demo's summary, and the report of
a real tiny `cooper train` run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from conftest import run_cli
from cooper.errors import UserError
from cooper.report.run_report import build_run_report, read_config, report_folder
from cooper.report.run_totals import (
    definitions,
    headline,
    read_metrics,
    run_totals,
    summary_sentences,
)

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models

RUN_PLOTS = {"training_reward.png", "hacking.png", "rm_update.png", "step_time.png",
             "validation.png"}

# 8 Cooper steps, numbers chosen to be checked by hand (see test_totals_by_hand)
VERIFIED = [0.2, 0.4, 0.4, 0.5, 0.5, 0.6, 0.6, 0.8]
AGREEMENT = [0.5, 0.6, 0.6, 0.7, 0.7, 0.8, 0.8, 0.875]
TOP_WRONG = {1: 0.5, 2: 0.5, 3: 0.0, 5: 0.25, 6: 0.0, 8: 0.25}  # steps 4, 7: no correct group
PAIRS_ROLLOUT = [2, 1, 0, 3, 2, 2, 1, 0]
ASSISTANT = [1, 1, 2, 0, 1, 0, 1, 2]
FALLBACK = [0, 1, 0, 0, 0, 0, 1, 0]
POSITIVES = [2, 2, 2, 1, 2, 1, 2, 2]
DROPPED = [0, 0, 0, 0, 0, 0, 0, 1]
UPDATED = [1, 1, 1, 1, 0, 1, 1, 1]  # step 5: skipped (a non-finite loss)
STEP_SECONDS = [2.0, 2.0, 2.0, 2.0, 4.0, 4.0, 4.0, 4.0]


def cooper_rows() -> list[dict]:
    rows: list[dict] = [{"step": 0, "val/accuracy": 0.25, "val/samples": 8}]
    for i in range(8):
        step = i + 1
        row = {"step": step, "loss": 0.01, "reward": 0.5, "reward/rm_mean": 0.5,
               "reward/rule_mean": VERIFIED[i], "hacking/gap": 0.5 - VERIFIED[i],
               "rm/agreement": AGREEMENT[i], "rm/group_auroc": 0.6,
               "rm/pairs": PAIRS_ROLLOUT[i] + ASSISTANT[i] + FALLBACK[i],
               "rm/pairs_rollout": PAIRS_ROLLOUT[i], "rm/pairs_assistant": ASSISTANT[i] + FALLBACK[i],
               "rm/valid_negatives": ASSISTANT[i], "rm/fallback_negatives": FALLBACK[i],
               "rm/positives": POSITIVES[i], "rm/dropped_pairs": DROPPED[i],
               "rm/updated": UPDATED[i], "rm/loss": 0.69 - 0.01 * i,
               "rm/pair_acc_before": 0.5 + 0.05 * i, "perf/generation": 1.0,
               "perf/verify": 0.1, "perf/rm_score": 0.2, "perf/policy_update": 0.5,
               "perf/negatives": 0.1, "perf/negatives_total": 0.4, "perf/rm_update": 0.1,
               "perf/step": STEP_SECONDS[i]}
        if step in TOP_WRONG:
            row["hacking/top_wrong"] = TOP_WRONG[step]
        if step in (4, 8):
            row["val/accuracy"] = {4: 0.375, 8: 0.5}[step]
        rows.append(row)
    return rows


def rule_rows(steps: int = 4) -> list[dict]:
    """rule mode without a reward model: the verifier pays and nothing else scores."""
    rows: list[dict] = [{"step": 0, "val/accuracy": 0.5}]
    rows += [{"step": s, "loss": 0.0, "reward": 0.25 * s, "reward/rule_mean": 0.25 * s,
              "perf/generation": 1.0, "perf/verify": 0.1, "perf/policy_update": 0.5,
              "perf/step": 1.8} for s in range(1, steps + 1)]
    return rows


def run_folder(folder: Path, rows: list[dict], mode: str | None, tail: str = "") -> Path:
    """A `cooper train` output folder with these records (and config.yaml when mode is set)."""
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)
    if mode is not None:
        (folder / "config.yaml").write_text(yaml.safe_dump(
            {"seed": 0, "max_steps": 8, "reward": {"mode": mode, "model": "rm-dir"},
             "rm_update": {"negatives": "both", "loss": "bradley_terry", "lr": 1e-5}}))
    return folder


def test_totals_by_hand(tmp_path):
    # a run killed mid-write leaves a cut-off last line: left out, not an error
    folder = run_folder(tmp_path / "run", cooper_rows(), "cooper", tail='{"step": 9, "lo')
    t = run_totals(read_metrics(folder / "metrics.jsonl"), "cooper")
    assert t.steps == 8 and t.paid_key == "reward/rm_mean"
    # 2+1+0+3+2+2+1+0 = 11 rollout, 1+1+2+0+1+0+1+2 = 8 assistant, 2 fallback: 21 pairs
    assert (t.pairs, t.negatives_rollout, t.negatives_assistant, t.negatives_fallback) == (
        21, 11, 8, 2)
    assert (t.positives, t.dropped, t.rm_updates) == (14, 1, 7)
    assert (t.agreement_first, t.agreement_last) == (0.5, 0.875)
    # a quarter of 8 steps = 2: (0.2 + 0.4) / 2 and (0.6 + 0.8) / 2
    assert t.verified_first_quarter == pytest.approx(0.3)
    assert t.verified_last_quarter == pytest.approx(0.7)
    assert (t.paid_first_quarter, t.paid_last_quarter) == (0.5, 0.5)
    # gap = 0.5 - verified; steps 5..8: 0, -0.1, -0.1, -0.3 -> -0.5 / 4
    assert t.gap_second_half == pytest.approx(-0.125)
    # top-wrong logged on 6 steps; the second half of them (steps 5, 6, 8): 0.5 / 3
    assert t.top_wrong_second_half == pytest.approx(0.5 / 3)
    assert (t.val_first, t.val_last) == (0.25, 0.5)  # step 0 and step 8
    assert t.step_seconds == pytest.approx(3.0)
    assert t.steps_with_pairs == 8  # every step had a rollout or an assistant negative
    emptier = cooper_rows()
    for r in emptier[3:5]:  # steps 3 and 4 made no pair
        r["rm/pairs"] = 0
    assert run_totals(emptier, "cooper").steps_with_pairs == 6
    assert headline(t) == ("8 steps; 21 pairs on 8 steps (negatives: 11 rollout, 8 assistant, "
                           "2 fallback); RM updated on 7 of 8 steps; agreement 0.50 -> 0.88 (first -> last "
                           "step); verified 0.30 -> 0.70 (first -> last quarter)")
    text = " ".join(summary_sentences(t))
    assert ("21 (positive, negative) pairs made in total, on 8 of 8 steps; negatives by source: "
            "11 from the policy's own wrong rollouts, 8 written by the assistant, 2 by the rule-based "
            "fallback. 1 of 14 positives got no pair.") in text
    assert "The reward model was updated on 7 of 8 steps." in text
    assert "a step without pairs, or whose update had a non-finite loss, has no reward-model " \
           "update" in definitions()
    assert "sign of reward hacking" not in text  # the reward paid stayed while accuracy rose
    assert "0.500 of the rollouts at the first step and 0.875 at the last" in text
    assert "from 0.300 over the first quarter of the steps to 0.700 over the last quarter" in text
    assert "hacking/gap (reward model minus verifier) averaged -0.125" in text


FIRST_SCREEN = 40
"""lines of report.md a reader sees before scrolling: the run's result table must be in them"""


def test_report_of_a_cooper_run_leads_with_its_result(tmp_path):
    paths = build_run_report(run_folder(tmp_path / "run", cooper_rows(), "cooper"))
    assert paths.folder == tmp_path / "run" / "report"
    md = paths.markdown.read_text()
    assert md.startswith("# Training run: run\n\n## Result\n\n| figure | value |\n")
    order = ["## Result", "## How to read this", "## Totals", "## Curves", "## Settings"]
    assert [md.index(h) for h in order] == sorted(md.index(h) for h in order)
    result = md[:md.index("## How to read this")]
    for row in ("| verified accuracy (reward/rule_mean), first -> last quarter | 0.300 -> 0.700 |",
                "| reward paid (reward/rm_mean), first -> last quarter | 0.500 -> 0.500 |",
                "| held-out accuracy (val/accuracy), first -> last validation | 0.250 -> 0.500 |",
                "| hacking/gap, second half | -0.125 |", "| hacking/top_wrong, second half | 0.167 |",
                "| agreement with the verifier (rm/agreement), first -> last step | 0.500 -> 0.875 |",
                "| pairs made | 21 on 8 of 8 steps |", "| reward-model updates | 7 of 8 steps |"):
        assert row in result, row
    lines = md.splitlines()
    assert lines.index("| reward-model updates | 7 of 8 steps |") < FIRST_SCREEN
    assert [f"- {x}" for x in summary_sentences(run_totals(cooper_rows(), "cooper"))] == [
        line for line in result.splitlines() if line.startswith("- ")]
    assert definitions() in md
    assert "| pairs | 21 |" in md and "| negatives: fallback | 2 |" in md
    assert "| reward-model updates | 7 |" in md and "| gap, second half | -0.125 |" in md
    assert "| reward mode (reward.mode) | cooper |" in md
    assert {p.name for p in paths.plots} == RUN_PLOTS
    for p in paths.plots:
        assert p.is_file() and f"]({p.name})" in md
    assert "Not drawn" not in md
    html = paths.html.read_text()
    assert html.count("data:image/png;base64,") == len(RUN_PLOTS)
    assert "<title>Training run: run</title>" in html


def test_every_figure_of_the_old_run_layout_is_kept(tmp_path):
    """Moved, not dropped: the summary sentences, every total with its definition, the curves
    and the settings are all still in the report, as the old layout (summary first) printed
    them, but for the explanations that moved to How to read this."""
    from cooper.report.document import md_table
    from cooper.report.run_report import settings_table, totals_table

    folder = run_folder(tmp_path / "run", cooper_rows(), "cooper")
    paths = build_run_report(folder)
    md = paths.markdown.read_text()
    t = run_totals(cooper_rows(), "cooper")
    table, not_logged = totals_table(t)
    assert md_table(table) in md and not not_logged
    assert md_table(settings_table(read_config(folder), folder, True)) in md
    for p in paths.plots:
        assert f"![{p.stem}]({p.name})" in md
    lines = md.splitlines()
    old = ["- 8 training steps logged; the policy was paid by Cooper's reward model, updated "
           "online (reward/rm_mean).",
           "- 21 (positive, negative) pairs made in total, on 8 of 8 steps; negatives by source: "
           "11 from the policy's own wrong rollouts, 8 written by the assistant, 2 by the "
           "rule-based fallback. 1 of 14 positives got no pair.",
           "- The reward model agreed with the verifier (rm/agreement) on 0.500 of the rollouts "
           "at the first step and 0.875 at the last.",
           "- Verified accuracy of the rollouts (reward/rule_mean) went from 0.300 over the first "
           "quarter of the steps to 0.700 over the last quarter; the paid reward (reward/rm_mean) "
           "from 0.500 to 0.500.",
           "- Over the second half of the steps, hacking/gap (reward model minus verifier) "
           "averaged -0.125 and hacking/top_wrong (groups whose top-scored rollout is wrong) "
           "0.167.",
           "- Held-out accuracy (val/accuracy) was 0.250 at the first validation and 0.500 at "
           "the last.",
           "| positives without a pair | 1 | sum of rm/dropped_pairs |",
           "| seconds per step | 3.0 | perf/step, mean over the steps |"]
    assert [line for line in old if line not in lines] == []
    # the old updates sentence, its figure kept and its explanation moved to the definitions
    assert "- The reward model was updated on 7 of 8 steps." in lines
    assert "a step without pairs, or whose update had a non-finite loss, has no reward-model " \
           "update" in md[md.index("## How to read this"):md.index("## Totals")]


def test_the_summary_says_when_the_reward_paid_rose_as_accuracy_fell(tmp_path):
    rows = cooper_rows()
    for r in rows[1:]:  # paid 0.3 -> 0.9 while verified 0.8 -> 0.2
        r["reward/rm_mean"] = 0.3 + 0.6 * (r["step"] - 1) / 7
        r["reward/rule_mean"] = 0.8 - 0.6 * (r["step"] - 1) / 7
    t = run_totals(rows, "cooper")
    assert t.paid_last_quarter > t.paid_first_quarter
    assert t.verified_last_quarter < t.verified_first_quarter
    sentences = summary_sentences(t)
    cue = ("The reward paid rose while verified accuracy fell: the policy was paid more for "
           "fewer right answers, the sign of reward hacking.")
    assert sentences[2] == cue  # right after the two trends it rests on
    assert cue not in summary_sentences(run_totals(rows, "rule"))  # the verifier paid
    assert f"- {cue}" in build_run_report(run_folder(tmp_path / "run", rows, "cooper")
                                         ).markdown.read_text()


def test_rule_mode_run_without_reward_model_metrics(tmp_path):
    folder = run_folder(tmp_path / "rule", rule_rows(), "rule")
    t = run_totals(read_metrics(folder / "metrics.jsonl"), "rule")
    assert t.steps == 4 and t.paid_key == "reward/rule_mean"
    assert t.pairs is None and t.rm_updates is None and t.agreement_first is None
    assert t.gap_second_half is None and t.top_wrong_second_half is None
    # a quarter of 4 steps = 1: step 1 (0.25) and step 4 (1.0)
    assert (t.verified_first_quarter, t.verified_last_quarter) == (0.25, 1.0)
    text = " ".join(summary_sentences(t))
    assert "paid by the rule-based verifier (reward/rule_mean)" in text
    assert "No reward-model pairs were made" in text
    assert "rm/agreement was not logged" in text and "hacking/gap and hacking/top_wrong were not" in text
    assert headline(t) == "4 steps; verified 0.25 -> 1.00 (first -> last quarter)"
    paths = build_run_report(folder)
    md = paths.markdown.read_text()
    # the first table holds what the run logged: the verifier paid, so one reward line
    assert md.split("## Result\n\n")[1].split("\n\n")[0] == (
        "| figure | value |\n|---|---|\n| training steps | 4 |\n"
        "| verified accuracy (reward/rule_mean, the reward paid), first -> last quarter | "
        "0.250 -> 1.000 |\n"
        "| held-out accuracy (val/accuracy), first -> last validation | 0.500 -> 0.500 |")
    assert {p.name for p in paths.plots} == {"training_reward.png", "step_time.png",
                                             "validation.png"}
    assert "Not drawn, because this run logged none of their metrics: the hacking signals" in md
    # totals it did not log are left out of the table, with a sentence naming them
    assert "| pairs |" not in md and "| verified, last quarter | 1.000 |" in md
    assert ("Left out, because this run did not log their metrics: pairs, negatives: rollout, "
            "negatives: assistant, negatives: fallback, positives without a pair, reward-model "
            "updates, agreement, first step, agreement, last step, gap, second half, top-wrong, "
            "second half.") in md
    assert "(rm_update." not in md  # the update's settings do not apply to this run


def test_runs_without_config_or_steps_still_report(tmp_path):
    # no config.yaml: the mode is unknown, TRL's `reward` stands for the reward paid
    paths = build_run_report(run_folder(tmp_path / "bare", rule_rows(2), None))
    md = paths.markdown.read_text()
    assert "No readable config.yaml" in md and "| reward paid, last quarter | 0.500 |" in md
    # a run that has only validated before its first step
    paths = build_run_report(run_folder(tmp_path / "new", [{"step": 0, "val/accuracy": 0.1}],
                                        "cooper"))
    md = paths.markdown.read_text()
    assert "No training step logged yet" in md
    assert [p.name for p in paths.plots] == ["validation.png"]
    # an empty metrics.jsonl (the run just started)
    assert "No training step logged yet" in build_run_report(
        run_folder(tmp_path / "empty", [], "cooper")).markdown.read_text()


def test_a_bad_line_inside_metrics_is_a_clear_error(tmp_path):
    folder = run_folder(tmp_path / "bad", rule_rows(2), "rule")
    lines = (folder / "metrics.jsonl").read_text().splitlines()
    (folder / "metrics.jsonl").write_text("\n".join([lines[0], "oops", *lines[1:]]) + "\n")
    with pytest.raises(UserError, match="line 2 is not JSON"):
        build_run_report(folder)


def test_cli_dispatches_on_the_folder(tmp_path):
    from test_report import synthetic_experiment

    experiment = synthetic_experiment(tmp_path / "exp", steps=4, seeds=(0,), arms=("rule", "rm"))
    run_cli("report", experiment)
    assert "## Verdict" in (experiment / "report" / "report.md").read_text()
    # an experiment's arm folder is a training run folder
    arm = experiment / "seed-0" / "arms" / "rm"
    proc = run_cli("report", arm, "--out", tmp_path / "arm-report")
    assert f"report: {tmp_path / 'arm-report' / 'report.html'}" in proc.stdout
    assert "## Result" in (tmp_path / "arm-report" / "report.md").read_text()
    neither = tmp_path / "neither"
    neither.mkdir()
    proc = run_cli("report", neither, check=False)
    assert proc.returncode == 2
    assert ("is neither an experiment folder (no experiment.yaml" in proc.stderr
            and "nor a training run folder (no metrics.jsonl" in proc.stderr), proc.stderr
    with pytest.raises(UserError, match="is not a folder"):
        report_folder(tmp_path / "missing")
    assert "training run" in run_cli("report", "--help").stdout


def test_demo_summary_uses_the_run_totals_and_writes_the_report(tmp_path):
    from cooper.config.demo import DemoSettings
    from cooper.experiment.demo_summary import DemoSummary

    folder = run_folder(tmp_path / "demo" / "cooper", cooper_rows(), "cooper")
    summary = DemoSummary(DemoSettings(out=str(tmp_path / "demo")))
    summary.add_cooper_run(folder, "cooper", 12.0)
    summary.write(tmp_path / "demo" / "summary.json")
    saved = json.loads((tmp_path / "demo" / "summary.json").read_text())
    run = saved["figures"]["cooper_run"]
    assert (run["pairs"], run["negatives_rollout"], run["negatives_assistant"],
            run["negatives_fallback"], run["rm_updates"]) == (21, 11, 8, 2, 7)
    assert (run["agreement_first"], run["agreement_last"]) == (0.5, 0.875)
    report = folder / "report" / "report.html"
    assert saved["figures"]["cooper_report"] == str(report) and report.is_file()
    assert [s["name"] for s in saved["stages"]] == ["Cooper RL", "Cooper report"]
    table, text = summary.table(), summary.text()
    # the Cooper row: steps, the verifier's share of rollouts right (mean of VERIFIED's 8 steps),
    # pairs, and the updates (step 5 skipped)
    (row,) = [line for line in table.splitlines() if line.startswith("Cooper RL")]
    assert " ".join(row.split()) == ("Cooper RL 12 s 8 steps, rollouts 50% right, 21 pairs, "
                                     "RM updated on 7 of 8"), row
    assert max(len(x) for x in table.splitlines()) <= 100, table  # fits a terminal
    # the whole sentence and where the report went, below the table
    flat = " ".join(text.split())
    assert ("21 pairs on 8 steps (negatives: 11 rollout, 8 assistant, 2 fallback); "
            "RM updated on 7 of 8") in flat
    assert f"Cooper report: {report}" in text


def test_report_of_a_real_tiny_training_run(tmp_path):
    """`cooper train` (Cooper, 2 steps on the tiny testbed models), then `cooper report`."""
    from cooper.experiment.testbed import tiny_arith_models
    from test_train_smoke import tiny_args

    out = tmp_path / "cooper"
    run_cli(*tiny_args(tiny_arith_models(), out, "cooper", "rollout.prompts_per_step=4"))
    proc = run_cli("report", out)
    assert str(out / "report" / "report.html") in proc.stdout
    rows = read_metrics(out / "metrics.jsonl")
    steps = [r for r in rows if r["step"] >= 1 and "reward/rule_mean" in r]
    md = (out / "report" / "report.md").read_text()
    assert "2 training steps logged; the policy was paid by Cooper's reward model" in md
    pairs = sum(r["rm/pairs"] for r in steps)
    assert f"| pairs | {pairs:.0f} |" in md
    assert f"| reward-model updates | {sum(r['rm/updated'] == 1 for r in steps)} |" in md
    assert {p.name for p in (out / "report").glob("*.png")} == RUN_PLOTS
    assert math.isfinite(run_totals(rows, "cooper").agreement_last)
