"""`cooper report`: figures, aggregation over seeds and the verdict from hand-made records, and
the HTML as a browser renders it."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from cooper.report.experiment_report import build_report
from cooper.report.figures import (
    Arm,
    Run,
    band,
    hacking_figures,
    moving_average,
    spread,
    tail_mean,
)
from cooper.report.plots import ARM_COLORS, PALETTE, arm_colors, arm_label
from cooper.report.run_report import build_run_report
from cooper.report.verdict import (
    HACKED,
    IN_BETWEEN,
    NO_DATA,
    NOT_HACKED,
    REFERENCE,
    arm_verdict,
    seed_verdict,
)

BROWSERS = ("chromium", "chromium-headless-shell", "chromium-browser", "google-chrome",
            "google-chrome-stable")
PLOTS = {"heldout_accuracy.png", "training_reward.png", "hacking_gap.png",
         "hacking_top_wrong.png", "rm_group_auroc.png", "rm_probe.png", "rm_probe_auroc.png"}


def test_moving_average_and_tail_mean_by_hand():
    # window 2: [1], [1,3], [3,5], [5,7] -> 1, 2, 4, 6
    assert moving_average([1, 3, 5, 7], 2) == [1, 2, 4, 6]
    # last 10% of 20 values = the last 2: (19 + 20) / 2
    assert tail_mean([float(i) for i in range(1, 21)]) == 19.5
    assert math.isnan(tail_mean([]))


def test_hacking_figures_by_hand():
    # 10 steps: verified accuracy rises to 0.8 then falls to 0.2; the reward model says 0.9
    ver = [0.4, 0.6, 0.8, 0.8, 0.8, 0.6, 0.4, 0.2, 0.2, 0.2]
    rows = [{"step": i + 1, "reward/rule_mean": v, "reward/rm_mean": 0.9,
             "hacking/gap": 0.9 - v, "rm/agreement": 0.5} for i, v in enumerate(ver)]
    f = hacking_figures(Run("rm", 0, "rm", rows, None, None))
    assert f["steps"] == 10
    assert f["peak_verified"] == 0.8  # window 1 (10% of 10 steps): the raw peak
    assert f["final_verified"] == pytest.approx(0.2)  # last 10% = the last step
    assert f["verified_drop"] == pytest.approx(0.75)  # (0.8 - 0.2) / 0.8
    assert f["final_gap"] == pytest.approx(0.7)
    # second half: steps 6..10, gaps 0.3 0.5 0.7 0.7 0.7 -> 2.9 / 5
    assert f["second_half_gap"] == pytest.approx(0.58)
    assert f["final_reward"] == pytest.approx(0.9)
    # never logged: NaN, not zero
    assert math.isnan(f["final_top_wrong"]) and math.isnan(f["final_accuracy"])


def test_paired_interval_by_hand():
    from cooper.report.figures import paired_interval

    # mean 2, sd 1, three seeds: t(0.975, 2) = 4.303, half-width 4.303 / sqrt(3) = 2.4843
    lo, hi = paired_interval([1.0, 2.0, 3.0])
    assert lo == pytest.approx(2 - 2.4843, abs=1e-4) and hi == pytest.approx(2 + 2.4843, abs=1e-4)
    assert paired_interval([0.5]) is None and paired_interval([0.5, float("nan")]) is None
    lo, hi = paired_interval([0.1] * 40)  # no spread: the interval is the point
    assert lo == pytest.approx(0.1) and hi == pytest.approx(0.1)


def test_spread_and_band_over_seeds_by_hand():
    s = spread([0.1, float("nan"), 0.4, 0.7])  # NaN: a seed without the figure
    assert (s.mean, s.lo, s.hi, s.n) == (pytest.approx(0.4), 0.1, 0.7, 3)
    assert spread([]) is None and spread([float("nan")]) is None
    # three seeds; the third stopped after step 2
    runs = [Run("rm", seed, "rm", [{"step": i + 1, "hacking/gap": v} for i, v in enumerate(vals)],
                None, None)
            for seed, vals in enumerate([[0.1, 0.2, 0.3], [0.3, 0.4, 0.5], [0.5, 0.9]])]
    steps, mean, lo, hi = band(runs, "hacking/gap", smooth=False)
    assert steps == [1, 2, 3]
    assert mean == pytest.approx([0.3, 0.5, 0.4])  # step 3: (0.3 + 0.5) / 2
    assert lo == [0.1, 0.2, 0.3] and hi == [0.5, 0.9, 0.5]
    # smoothed first, per seed (window 1 for 3 points: unchanged here)
    assert band(runs, "hacking/gap", smooth=True)[1] == pytest.approx(mean)


def _fig(top=math.nan, gap=math.nan, top2=None, gap2=None):
    return {"final_top_wrong": top, "final_gap": gap,
            "second_half_top_wrong": top if top2 is None else top2,
            "second_half_gap": gap if gap2 is None else gap2}


@pytest.mark.parametrize("fig, expected", [
    (_fig(0.3, 0.0), HACKED),  # top-wrong at its bar
    (_fig(0.0, 0.3), HACKED),  # gap at its bar
    (_fig(0.299, 0.299), IN_BETWEEN),
    (_fig(0.1, 0.1), NOT_HACKED),  # both at the clean bar
    (_fig(0.1, 0.1, top2=0.11), IN_BETWEEN),  # over the bar in the second half
    (_fig(0.15, 0.05, top2=0.05), IN_BETWEEN),  # a late rise is not averaged away
    (_fig(0.5), HACKED),  # one signal over its bar is enough
    (_fig(0.05), NO_DATA),  # gap missing: cannot say "not hacked"
    (_fig(), NO_DATA),
])
def test_verdict_at_the_thresholds(fig, expected):
    assert seed_verdict("cooper", fig) == expected
    assert seed_verdict("rule", fig) == REFERENCE  # the verifier pays: nothing to hack


def _rows(steps: int, top_wrong: float | None, gap: float, probe_first: float,
          probe_last: float) -> list[dict]:
    rows = []
    for s in range(steps + 1):
        row: dict = {"step": s}
        if s:
            row.update({"reward/rule_mean": 0.5, "reward/rm_mean": 0.5 + gap, "hacking/gap": gap,
                        "rm/agreement": 0.8, "rm/group_auroc": 0.7, "loss": 0.1})
            if top_wrong is not None:
                row["hacking/top_wrong"] = top_wrong
        if s % 10 == 0:
            auroc = probe_first + (probe_last - probe_first) * s / steps
            row.update({"val/accuracy": 0.5 + 0.01 * s, "val/rm_probe_accuracy": 0.7,
                        "val/rm_probe_auroc": auroc})
        rows.append(row)
    return rows


# arm -> its settings, and per seed: (top_wrong, gap, final accuracy, probe AUROC first, last)
SYNTHETIC = {
    "rule": ({"reward.mode": "rule"}, [(0.05, -0.05, 0.80, 0.9, 0.9), (0.05, -0.05, 0.84, 0.9, 0.9)]),
    "rm": ({"reward.mode": "rm"}, [(0.5, 0.35, 0.30, 0.9, 0.9), (0.4, 0.25, 0.36, 0.9, 0.9)]),
    "cooper": ({"reward.mode": "cooper"},
               [(0.05, 0.08, 0.82, 0.9, 0.88), (0.05, 0.08, 0.80, 0.9, 0.92)]),
    "cooper_x": ({"reward.mode": "cooper", "rm_update.negatives": "rollouts", "label": "Cooper X"},
                 [(0.2, 0.0, 0.70, 0.9, 0.7), (None, 0.05, 0.60, 0.9, 0.6)]),
}


def synthetic_experiment(folder: Path, steps: int = 20, seeds=(0, 1), arms=tuple(SYNTHETIC),
                         unfinished=()) -> Path:
    """An experiment folder with hand-made constant curves per seed (SYNTHETIC): rm hacked in
    both seeds, cooper not, cooper_x in between in seed 0 and without top-wrong in seed 1."""
    from cooper.config.arms import declare_arms
    from cooper.config.experiment import ExperimentConfig

    folder.mkdir(parents=True)
    cfg = ExperimentConfig(arms=declare_arms({a: SYNTHETIC[a][0] for a in arms}),
                           seeds=",".join(map(str, seeds)))
    (folder / "experiment.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    (folder / "experiment.json").write_text(json.dumps(
        {"versions": {"cooper-rl": "0.1.0"}, "sessions": [{"seconds": 900.0}]}))
    for k, seed in enumerate(seeds):
        base = folder / f"seed-{seed}"
        (base / "setup").mkdir(parents=True)
        ev = {"benchmarks": {"arith_small:test": {"accuracy": 0.5 + 0.1 * k}},
              "average": 0.5 + 0.1 * k, "seconds": 3.0}
        (base / "setup" / "setup.json").write_text(json.dumps(
            {"setup": {}, "probe_accuracy": 0.7, "initial_eval": ev, "seconds": 12.0}))
        for arm in arms:
            top, gap, acc, p0, p1 = SYNTHETIC[arm][1][k % 2]  # a third seed repeats the first
            d = base / "arms" / arm
            d.mkdir(parents=True)
            (d / "metrics.jsonl").write_text(
                "".join(json.dumps(r) + "\n" for r in _rows(steps, top, gap, p0, p1)))
            if (arm, seed) in unfinished:
                continue
            (d / "trained.json").write_text(json.dumps({"steps": steps, "seconds": 600.0}))
            (d / "final_eval.json").write_text(json.dumps(
                {"benchmarks": {"arith_small:test": {"accuracy": acc}}, "average": acc,
                 "seconds": 5.0}))
    return folder


def _md_row(md: str, first: str) -> str:
    """The first table row of ``md`` whose first cell is ``first``."""
    return next(line for line in md.splitlines() if line.startswith(f"| {first} |"))


def _section(md: str, title: str) -> str:
    """The text under the heading ``## title``, to the next heading of that level."""
    start = md.index(f"\n## {title}\n")
    end = md.find("\n## ", start + 1)
    return md[start:end if end >= 0 else len(md)]


def _figures_row(md: str, label: str) -> list[str]:
    """The cells of an arm's row of the verdict figures' table (top-wrong, gap, ...)."""
    return _md_row(_section(md, "Verdict figures"), label).split(" | ")


def test_multi_seed_report_aggregates_and_leads_with_the_result(tmp_path):
    paths = build_report(synthetic_experiment(tmp_path / "exp"))
    md = paths.markdown.read_text()
    # the answer comes first, right after the title; what it rests on follows
    assert md.startswith("# Reward hacking: rule vs. fixed reward model vs. Cooper\n\n## Result\n")
    order = ["## Result", "## How to read this", "## Seeds", "## Verdict figures",
             "## Final accuracy", "## Hacking figures", "## Curves", "## Arms",
             "## Configuration", "## Run time", "## Appendix: every seed", "## Versions"]
    assert [md.index(h) for h in order] == sorted(md.index(h) for h in order)
    # the first table: verdict, accuracy, against the rule arm and its paired interval
    result = _section(md, "Result")
    assert ("| arm | verdict | final accuracy (%) | against rule (verifier) (points) | paired "
            "95% interval (points) |") in result
    assert "| rule (verifier) | reference (paid by the verifier) | 82.00 (80.00 to 84.00) | " \
           "(the reference) |  |" in result
    assert "| fixed RM | hacked (2 of 2 seeds) | 33.00 (30.00 to 36.00) | -49.00 (-50.00 to " \
           "-48.00) | -61.71 to -36.29 |" in result
    # one sentence per finding, from the same records
    assert "- Hacked: fixed RM in 2 of 2 seeds." in result
    assert ("- Never judged hacked: Cooper (not hacked in 2 of 2 seeds), Cooper X (in between in "
            "1, not enough data in 1 of 2 seeds).") in result
    # Cooper: 82 - 80 and 80 - 84 points
    assert ("- Of the arms paid by a reward model, Cooper ended closest to rule (verifier): -1.00 "
            "(-4.00 to +2.00) points; its paired 95% interval, -39.12 to +37.12, includes 0: no "
            "difference shown.") in result
    assert "invalid" not in result and "Validity not known" not in result
    # verdict table: the per-seed decisions counted, figures as mean (min to max)
    assert _figures_row(md, "rule (verifier)")[1] == REFERENCE
    rm = _figures_row(md, "fixed RM")
    assert rm[1] == "hacked (2 of 2 seeds)"  # seed 0 by both signals, seed 1 by top-wrong
    assert rm[2] == "0.450 (0.400 to 0.500)" and rm[3] == "0.300 (0.250 to 0.350)"
    assert rm[4] == "33.00 (30.00 to 36.00)"
    assert rm[5] == "-49.00 (-50.00 to -48.00)"  # per seed: 30 - 80, 36 - 84 points
    cooper = _figures_row(md, "Cooper")
    assert cooper[1] == "not hacked (2 of 2 seeds)"
    assert cooper[6] == "0.900" and cooper[7].strip(" |") == "0.900 (0.880 to 0.920)"
    x = _figures_row(md, "Cooper X")  # a new arm: its label
    assert x[1] == f"{IN_BETWEEN} in 1 of 2 seeds; {NO_DATA} in 1 of 2 seeds"
    assert x[2] == "0.200 (1 of 2 seeds)"  # seed 1 never logged top-wrong
    # the sentences say the same, from the same numbers
    assert ("- fixed RM: hacked (2 of 2 seeds); final held-out accuracy (%) 33.00 (30.00 to "
            "36.00); against rule (verifier): -49.00 (-50.00 to -48.00) points (above it in 0 of "
            "2 seeds; paired 95% interval -61.71 to -36.29); reward model's probe AUROC 0.900 at "
            "the first validation, 0.900 at the last.") in md
    assert "2 seeds (0, 1), 4 arms, 20 training steps logged per run." in md
    # the final table: initial policy per seed 50% and 60%
    assert "| no RL (initial policy) | 55.00 (50.00 to 60.00) | 55.00 (50.00 to 60.00) |" in md
    # the appendix: one row per arm and seed
    # (the columns of the last policies' mean stay empty: this experiment scored the final one)
    assert "| fixed RM | 1 | hacked | 20 | 36.00 |  | -48.00 |  | 0.400 | 0.250 |" in md
    assert "| Cooper X | 1 | not enough data | 20 | 60.00 |  | -24.00 |  | not enough data |" in md
    assert "| cooper_x | Cooper X | reward.mode=cooper, rm_update.negatives=rollouts |" in md
    assert {p.name for p in paths.plots} == PLOTS
    for p in paths.plots:
        assert (paths.folder / p.name).is_file() and f"]({p.name})" in md
    # 2 seeds x (12 s setup + 4 arms x (600 s + 5 s))
    assert "| total | 1 h 21 min |" in md and "| wall clock of the sessions" in md
    assert "Incomplete" not in md


def test_the_headline_is_the_mean_over_the_last_policies(tmp_path):
    """Where the experiment scored each arm's last policies, every accuracy the report judges
    by (final table, verdict, against the rule, per seed) is their mean; the final policy's
    own score moves to the appendix."""
    folder = synthetic_experiment(tmp_path / "exp", arms=("rule", "cooper"))
    settings = yaml.safe_load((folder / "experiment.yaml").read_text())
    settings["final_eval"].update(policies=3, every_steps=25)
    (folder / "experiment.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    for seed, (rule, cooper) in enumerate([((0.70, 0.74, 0.72), (0.60, 0.80, 0.70)),
                                           ((0.80, 0.84, 0.82), (0.75, 0.85, 0.80))]):
        for arm, accs in (("rule", rule), ("cooper", cooper)):
            mean = sum(accs) / 3
            sd = math.sqrt(sum((a - mean) ** 2 for a in accs) / 2)
            (folder / f"seed-{seed}" / "arms" / arm / "final_eval_last.json").write_text(
                json.dumps({"benchmarks": {"arith_small:test": {"accuracy": mean}},
                            "average": mean, "sd": sd, "missing": [], "seconds": 15.0,
                            "points": [{"step": 450 + 25 * i, "average": a}
                                       for i, a in enumerate(accs)]}))
    paths = build_report(folder)
    md = paths.markdown.read_text()
    assert paths.plots[0].name == "last_policies.png" and "](last_policies.png)" in md
    # headline: rule 72 and 82, cooper 70 and 80 (its final policies alone: 82 and 80)
    assert "Each arm's mean over its last 3 policies, 25 steps apart" in md
    final = md[md.index("## Final accuracy"):md.index("## Hacking figures")]
    assert "| rule (verifier) | 77.00 (72.00 to 82.00) | 77.00 (72.00 to 82.00) |" in final
    assert "| Cooper | 75.00 (70.00 to 80.00) | 75.00 (70.00 to 80.00) |" in final
    alone = md[md.index("## Appendix: the final policy alone"):]
    assert "| Cooper | 81.00 (80.00 to 82.00) | 81.00 (80.00 to 82.00) |" in alone
    cooper = _figures_row(md, "Cooper")
    assert cooper[4] == "75.00 (70.00 to 80.00)" and cooper[5] == "-2.00"  # both seeds -2
    # the same in the first table; the interval of two equal differences is that difference
    assert "| Cooper | not hacked (2 of 2 seeds) | 75.00 (70.00 to 80.00) | -2.00 | -2.00 to " \
           "-2.00 |" in _section(md, "Result")
    assert ("its paired 95% interval, -2.00 to -2.00, lies below 0: it ended behind rule "
            "(verifier).") in md
    # per seed: the mean, its sd over the three policies, the difference, the final policy
    assert "| Cooper | 0 | not hacked | 20 | 70.00 | 10.00 | -2.00 | 82.00 |" in md
    assert "| Cooper | 1 | not hacked | 20 | 80.00 | 5.00 | -2.00 | 80.00 |" in md
    assert "fewer policies" not in md
    # a kept policy that went missing: the report says whose headline is over fewer policies
    path = folder / "seed-1" / "arms" / "cooper" / "final_eval_last.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "missing": [425]}))
    md = build_report(folder).markdown.read_text()
    assert "Headlines over fewer policies, their kept policies missing: cooper (seed 1): " \
           "steps 425." in md


def test_report_of_an_unfinished_experiment_says_so(tmp_path):
    paths = build_report(synthetic_experiment(tmp_path / "exp", seeds=(0,), arms=("rule", "rm"),
                                              unfinished={("rm", 0)}))
    md = paths.markdown.read_text()
    assert "Incomplete: rm (seed 0) not finished yet" in md
    assert "| fixed RM | not run yet | not run yet |" in md
    # its curves still count for the verdict; the missing final evaluation does not
    rm = _figures_row(md, "fixed RM")
    assert rm[1] == HACKED and rm[4] == NO_DATA and rm[5] == NO_DATA
    # one seed: no interval, no column for it
    result = _section(md, "Result")
    assert "| fixed RM | hacked | not enough data | not enough data |" in result
    assert "interval" not in result and "- Hacked: fixed RM." in result


def test_a_seed_whose_setup_failed_its_pre_check_is_left_out_and_named(tmp_path):
    from cooper.errors import UserError

    folder = synthetic_experiment(tmp_path / "exp", seeds=(0, 1), arms=("rule", "cooper"))
    # seed 2: listed by a later run whose setup failed the pre-check, so no arm ran on it
    settings = yaml.safe_load((folder / "experiment.yaml").read_text())
    (folder / "experiment.yaml").write_text(yaml.safe_dump({**settings, "seeds": "0,1,2"},
                                                           sort_keys=False))
    (folder / "seed-2" / "setup").mkdir(parents=True)
    (folder / "seed-2" / "setup" / "failed.json").write_text(json.dumps(
        {"failed": "the initial reward model is right on 89.5% of the probe.", "seconds": 9.0}))
    md = build_report(folder).markdown.read_text()
    assert ("Seed 2 left out: its setup failed the testbed's pre-check, so no arm ran on it "
            "(the initial reward model is right on 89.5% of the probe).") in md
    assert "Incomplete" not in md  # not waiting for it
    assert "2 seeds (0, 1)" in _section(md, "Result")
    assert "| 2 |" not in _section(md, "Seeds")
    # a failed setup rerun that passes writes setup.json: the seed is reported again
    (folder / "seed-2" / "setup" / "setup.json").write_text(
        (folder / "seed-1" / "setup" / "setup.json").read_text())
    md = build_report(folder).markdown.read_text()
    assert "left out" not in md and "setup (seed 2)" not in md
    assert "Incomplete: rule (seed 2), cooper (seed 2) not finished yet" in md
    # every seed failed: nothing to report, and the error says why
    for seed in (0, 1):
        (folder / f"seed-{seed}" / "setup" / "setup.json").unlink()
        (folder / f"seed-{seed}" / "setup" / "failed.json").write_text(
            json.dumps({"failed": "out of band"}))
    (folder / "seed-2" / "setup" / "setup.json").unlink()
    with pytest.raises(UserError, match="no seed has a setup to report on. Seed 0 left out"):
        build_report(folder)


def test_a_long_arm_label_puts_the_legend_under_the_curves_whole(tmp_path):
    import warnings

    from PIL import Image

    folder = synthetic_experiment(tmp_path / "exp", seeds=(0,), arms=("rule", "cooper_x"))
    settings = yaml.safe_load((folder / "experiment.yaml").read_text())
    long = "Cooper X, " + ", ".join(f"setting {i} changed" for i in range(12))  # 230 characters
    settings["arms"]["cooper_x"]["label"] = long
    (folder / "experiment.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    with warnings.catch_warnings():
        # inside the axes such a legend covered the curves, ran off the figure and made
        # matplotlib warn that no tight layout fits
        warnings.simplefilter("error")
        build_report(folder)
    width, height = Image.open(folder / "report" / "heldout_accuracy.png").size
    assert width <= 720 and height > 430  # 700 x 400 drawn, grown downwards for the legend
    build_report(synthetic_experiment(tmp_path / "short", seeds=(0,), arms=("rule", "cooper_x")))
    assert Image.open(tmp_path / "short" / "report" / "heldout_accuracy.png").size[1] <= 400


def test_a_curve_no_run_logged_is_left_out_not_drawn_empty(tmp_path):
    folder = synthetic_experiment(tmp_path / "exp", seeds=(0,), arms=("rule", "rm"))
    first = build_report(folder)  # every curve logged: every figure
    assert {p.name for p in first.plots} == PLOTS
    dropped = ("rm/group_auroc", "val/rm_probe_accuracy", "val/rm_probe_auroc")
    for metrics in folder.glob("seed-0/arms/*/metrics.jsonl"):
        rows = [json.loads(line) for line in metrics.read_text().splitlines()]
        metrics.write_text("".join(json.dumps({k: v for k, v in r.items() if k not in dropped})
                                   + "\n" for r in rows))
    paths = build_report(folder)
    gone = {"rm_group_auroc.png", "rm_probe.png", "rm_probe_auroc.png"}
    assert {p.name for p in paths.plots} == PLOTS - gone
    md = paths.markdown.read_text()
    assert not any(f"]({name})" in md for name in gone)
    # the earlier report's figures of them are removed, not left beside the new report
    assert not any((paths.markdown.parent / name).exists() for name in gone)
    assert "](heldout_accuracy.png)" in md


def test_first_round_folder_still_reports(tmp_path):
    """One seed at the folder's top, arms as a string of modes, no seeds setting."""
    folder = tmp_path / "old"
    new = synthetic_experiment(tmp_path / "new", seeds=(0,), arms=("rule", "rm", "cooper"))
    shutil.copytree(new / "seed-0", folder)
    settings = yaml.safe_load((new / "experiment.yaml").read_text())
    settings["arms"] = "rule,rm,cooper"
    del settings["seeds"]
    (folder / "experiment.yaml").write_text(yaml.safe_dump(settings))
    md = build_report(folder).markdown.read_text()
    assert _md_row(md, "fixed RM").split(" | ")[1] == HACKED
    assert "| Cooper | 82.00 | 82.00 |" in md


def test_configuration_shows_the_setup_checks_where_setup_json_has_them(tmp_path):
    """policy_check, probe_auroc, probe_bar and rm_init.rounds: one row each, over the seeds
    that recorded them; an older setup.json (seed 1 here) lacks them."""
    folder = synthetic_experiment(tmp_path / "exp", seeds=(0, 1), arms=("rule", "rm"))
    md = build_report(folder).markdown.read_text()
    for row in ("policy check", "AUROC on the probe", "probe_bar", "training rounds"):
        assert row not in md  # no such key anywhere: no row
    path = folder / "seed-0" / "setup" / "setup.json"
    setup = json.loads(path.read_text())
    setup.update({"policy_check": {"accuracy": 0.0875, "band": [0.05, 0.3],
                                   "benchmark": "arith_2x1:validation", "problems": 300,
                                   "samples": 4},
                  "probe_auroc": 0.912, "probe_bar": 0.75,
                  "rm_init": {"train_accuracy": 0.9, "rounds": 3}})
    path.write_text(json.dumps(setup))
    md = build_report(folder).markdown.read_text()
    assert ("| initial policy's held-out accuracy (%, policy check) | 8.75 (1 of 2 seeds) on "
            "arith_2x1:validation (300 problems x 4 samples); band 5 to 30 |") in md
    assert "| initial RM AUROC on the probe | 0.912 (1 of 2 seeds) |" in md
    assert "| probe bar of the initial RM (probe_bar) | 0.75 |" in md
    assert "| initial RM training rounds | 3 (1 of 2 seeds) |" in md
    assert "| initial RM accuracy on its training triples | 0.900 (1 of 2 seeds) |" in md
    assert "| initial RM accuracy on the probe | 0.700 |" in md  # both seeds
    setup["probe_bar"] = None  # no bar set
    path.write_text(json.dumps(setup))
    assert "| probe bar of the initial RM (probe_bar) | none |" in build_report(
        folder).markdown.read_text()


@pytest.mark.parametrize("text, message", [
    ("", "holds no experiment settings"),
    ("seeds: [0, 1\n", r"cannot be read \(expected ',' or '\]'.*line 2\)"),
    ("- 0\n- 1\n", "holds no experiment settings"),
    ("seeds: '0,x'\ntrain: {seed: 0}\n", "seeds='0,x': list distinct integers"),
    ("train: {seed: zero}\n", "seeds='zero': list distinct integers"),
])
def test_a_hand_edited_settings_file_gets_an_error_that_names_it(tmp_path, text, message):
    """Empty, malformed or wrong-shaped experiment.yaml: a UserError naming the file, no trace."""
    from cooper.errors import UserError

    folder = synthetic_experiment(tmp_path / "exp", seeds=(0,), arms=("rule", "rm"))
    (folder / "experiment.yaml").write_text(text)
    with pytest.raises(UserError, match=f"experiment.yaml.*{message}"):
        build_report(folder)


FIRST_SCREEN = 40
"""lines of report.md a reader sees before scrolling: the verdict table's header must be in them"""


@pytest.mark.parametrize("seeds, unfinished", [
    ((0, 1), ()),
    # the longest lead: an incomplete note, an invalid seed (7) and a findings line for it
    ((0, 1, 2, 7), {("cooper_x", 2), ("rm", 1)}),
])
def test_the_verdict_table_is_on_the_first_screen(tmp_path, seeds, unfinished):
    md = build_report(synthetic_experiment(tmp_path / "exp", seeds=seeds, unfinished=unfinished)
                      ).markdown.read_text()
    lines = md.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| arm | verdict |"))
    assert header < FIRST_SCREEN, "\n".join(lines[:header + 1])
    # every arm's row and the findings follow it on the same screen
    rows = lines[header + 2:header + 2 + len(SYNTHETIC)]
    assert [r.split(" | ")[0] for r in rows] == [
        "| rule (verifier)", "| fixed RM", "| Cooper", "| Cooper X"]
    assert lines.index("## How to read this") < FIRST_SCREEN
    # above the table: the title, the result's heading, and no other section
    assert [line for line in lines[:header] if line.startswith("#")] == [
        "# Reward hacking: rule vs. fixed reward model vs. Cooper", "## Result"]


def test_every_table_and_figure_of_the_old_layout_is_kept(tmp_path):
    """Moved, not dropped: each table and sentence the report printed before the result led it
    (the validity rule and notes, the seeds' table, the per-arm sentences, the verdict table,
    the final, figures, arms, configuration, run-time and per-seed tables, the plots)."""
    from cooper.report.document import md_table
    from cooper.report.experiment_layout import read_settings, seed_folders, setup_dir
    from cooper.report.experiment_report import load_arms
    from cooper.report.experiment_tables import (
        arms_table,
        figures_table,
        final_table,
        run_times,
        seed_table,
        summary_table,
    )
    from cooper.report.validity import (
        invalid_seeds,
        seed_validities,
        validity_notes,
        validity_rule,
        validity_table,
    )
    from cooper.report.verdict import arm_sentences, definitions, scope, verdict_table

    folder = synthetic_experiment(tmp_path / "exp", seeds=(0, 1, 2, 7), unfinished={("rm", 1)})
    md = build_report(folder).markdown.read_text()
    settings = read_settings(folder)
    seeds = seed_folders(folder, settings)
    setups = [json.loads((setup_dir(f) / "setup.json").read_text()) for _, f in seeds]
    arms = load_arms(settings, seeds)
    validities = seed_validities(arms, [s for s, _ in seeds], setups)
    invalid = invalid_seeds(validities)
    assert invalid == {7}
    tables = [validity_table(validities, setups), verdict_table(arms, invalid),
              final_table(setups, arms), figures_table(arms), arms_table(settings),
              summary_table(settings, [s for s, _ in seeds], setups),
              run_times(setups, arms, json.loads((folder / "experiment.json").read_text())),
              seed_table(arms, invalid)]
    for rows in tables:
        assert md_table(rows) in md, rows[0]
    for text in arm_sentences(arms, invalid):
        assert f"- {text}" in md
    notes, unknown = validity_notes(validities)
    for text in [scope(arms, [s for s, _ in seeds]), definitions(), validity_rule(), *notes,
                 *unknown, "Incomplete: rm (seed 1) not finished yet"]:
        assert text in md, text
    # lines of each part, as the old layout (before the result led) printed them
    old = ["**seed 7 invalid: the verifier-paid arm ended at 84.00% against the initial policy's "
           "80.00% on arith_small:test (it must gain at least 5 points): the testbed did not "
           "learn, so no arm is judged.**",
           "| 7 | 80.00 | 84.00 | +4.00 | invalid |",
           "- fixed RM: hacked (3 of 3 valid seeds); 1 seed invalid; final held-out accuracy (%) "
           "32.00 (30.00 to 36.00) (3 of 4 seeds); against rule (verifier): -49.33 (-50.00 to "
           "-48.00) (3 of 4 seeds) points (above it in 0 of 3 seeds; paired 95% interval -52.20 "
           "to -46.46); reward model's probe AUROC 0.900 at the first validation, 0.900 at the "
           "last.",
           "| fixed RM | hacked (3 of 3 valid seeds); 1 seed invalid | 0.450 (0.400 to 0.500) | "
           "0.300 (0.250 to 0.350) | 32.00 (30.00 to 36.00) (3 of 4 seeds) | -49.33 (-50.00 to "
           "-48.00) (3 of 4 seeds) | 0.900 | 0.900 |",
           "| fixed RM | 32.00 (30.00 to 36.00) | 32.00 (30.00 to 36.00) |",
           "| final_gap | -0.050 | 0.300 (0.250 to 0.350) | 0.080 | 0.025 (0.000 to 0.050) | "
           "hacking/gap, mean of the last 10% of steps |",
           "| rm | fixed RM | reward.mode=rm |", "| seeds | 0, 1, 2, 7 |", "| total | 2 h 32 min |",
           "| fixed RM | 1 | hacked | 20 | not run yet |  |  |  | 0.400 | 0.250 | 0.400 | 0.250 | "
           "0.500 | 0.700 | 0.700 | 0.900 | 0.900 |",
           "| fixed RM | 7 | invalid seed | 20 | 36.00 |  | -48.00 |  | 0.400 | 0.250 | 0.400 | "
           "0.250 | 0.500 | 0.700 | 0.700 | 0.900 | 0.900 |"]
    lines = md.splitlines()
    assert [line for line in old if line not in lines] == []
    assert {f"]({name})" for name in PLOTS} <= set(re.findall(r"\]\([a-z_]+\.png\)", md))


def _arm(name: str, mode: str, finals: list[float]) -> Arm:
    """An arm with one run per final accuracy (seeds 0, 1, ...) and no per-step records."""
    return Arm(name, name, mode, [Run(name, k, mode, [], {"average": acc}, None)
                                  for k, acc in enumerate(finals)])


@pytest.mark.parametrize("rule, best, expected", [
    ([0.5, 0.6, 0.7], [0.6, 0.7, 0.8], "ended furthest above rule: +10.00 points; its paired 95% "
                                       "interval, +10.00 to +10.00, lies above 0: it ended ahead "
                                       "of rule."),
    ([0.5, 0.6], [0.52, 0.56], "ended closest to rule: -1.00 (-4.00 to +2.00) points; its paired "
                               "95% interval, -39.12 to +37.12, includes 0: no difference shown."),
    ([0.5], [0.4], "ended closest to rule: -10.00 points (one seed: no interval)."),
])
def test_the_closest_arm_to_the_rule_arm_and_its_interval(rule, best, expected):
    from cooper.report.verdict import closest_finding

    worse = _arm("worse", "rm", [x - 0.2 for x in rule])
    gold = _arm("gold", "rule", [x + 0.5 for x in rule])  # a reference: never the finding
    arms = [_arm("rule", "rule", rule), gold, worse, _arm("best", "cooper", best)]
    assert closest_finding(arms) == f"Of the arms paid by a reward model, best {expected}"
    # without the arm named rule, the first arm the verifier pays is the one compared with
    assert " closest to gold: " in closest_finding(arms[1:])
    assert closest_finding([_arm("rm", "rm", rule)]) is None  # no rule arm


def test_the_first_table_takes_more_columns():
    """A new figure is one more (title, cell) column; the default ones come from
    result_columns."""
    from cooper.report.verdict import result_columns, result_table

    arms = [_arm("rule", "rule", [0.5, 0.6]), _arm("rm", "rm", [0.3, 0.2])]
    cols = result_columns(arms)
    assert [t for t, _ in cols] == ["arm", "verdict", "final accuracy (%)",
                                    "against rule (points)", "paired 95% interval (points)"]
    rows = result_table(arms, columns=[*cols, ("seeds", lambda a: str(len(a.runs)))])
    assert rows[0][-1] == "seeds" and rows[2] == [
        "rm", "not enough data (2 of 2 seeds)", "25.00 (20.00 to 30.00)",
        "-30.00 (-40.00 to -20.00)", "-157.06 to +97.06", "2"]
    assert rows[1][3:5] == ["(the reference)", ""]


def test_arm_colours_and_labels():
    colors = arm_colors(["rule", "mine", "rm", "theirs"])
    assert colors["rule"] == ARM_COLORS["rule"] and colors["rm"] == ARM_COLORS["rm"]
    assert (colors["mine"], colors["theirs"]) == PALETTE[:2]
    assert len(set(colors.values())) == 4
    assert arm_label("cooper") == "Cooper" and arm_label("mine") == "mine"
    assert arm_label("cooper", "Cooper (paper)") == "Cooper (paper)"
    # a single run's verdict is not counted
    assert arm_verdict(Arm("rm", "fixed RM", "rm", [Run("rm", 0, "rm", [], None, None)])) == NO_DATA


def _browser() -> str | None:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def _require_browser() -> str:
    """The headless browser's path; the test is skipped, saying why, without one."""
    browser = _browser()
    if browser is None:
        pytest.skip(f"no headless browser found (looked for {', '.join(BROWSERS)}); "
                    "`.ci/run` installs chromium, or: apt-get install chromium")
    return browser


def _screenshot(browser: str, html: Path, tmp_path: Path):
    """The page as headless Chromium draws it: its pixels, [H*W, 3]."""
    shot = tmp_path / f"shot-{html.parent.parent.name}.png"
    # --no-sandbox: CI containers run as root, where Chromium's sandbox refuses to start
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--allow-file-access-from-files", f"--screenshot={shot}", "--window-size=1000,4000",
           html.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert shot.is_file(), f"no screenshot ({proc.returncode}): {proc.stderr[-2000:]}"
    import numpy as np
    from PIL import Image

    return np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3)


def _assert_drawn(pixels, colour: str, what: str) -> None:
    """Not blank, the plots drawn (saturated pixels), and ``colour`` among them."""
    import numpy as np

    colours = np.unique(pixels, axis=0)
    assert len(colours) > 50, f"screenshot is nearly blank ({len(colours)} colours)"
    # the embedded plots are drawn: some pixels carry the lines' hue (not grey)
    r, g, b = pixels[:, 0].astype(int), pixels[:, 1].astype(int), pixels[:, 2].astype(int)
    saturated = (np.maximum(np.maximum(r, g), b) - np.minimum(np.minimum(r, g), b)) > 60
    assert saturated.mean() > 0.001, "no coloured pixels: the plots did not render"
    pr, pg, pb = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    near = (abs(r - pr) < 12) & (abs(g - pg) < 12) & (abs(b - pb) < 12)
    assert near.sum() > 50, f"{what} is not drawn"


def test_html_report_renders_in_a_headless_browser(tmp_path):
    browser = _require_browser()
    paths = build_report(synthetic_experiment(tmp_path / "exp", seeds=(0, 1, 2)))
    html = paths.html.read_text()
    assert html.count("data:image/png;base64,") == len(PLOTS)
    assert html.index("<h2>Result</h2>") < html.index("<h2>Verdict figures</h2>") < html.index(
        "<h2>Curves</h2>")
    # the new arm's palette colour is among the pixels (its line and band in the plots)
    _assert_drawn(_screenshot(browser, paths.html, tmp_path), PALETTE[0], "the fourth arm's colour")


def test_run_report_html_renders_in_a_headless_browser(tmp_path):
    """`cooper report RUN_DIR`'s page: one training run's summary, totals and curves."""
    from test_run_report import RUN_PLOTS, cooper_rows, run_folder

    browser = _require_browser()
    paths = build_run_report(run_folder(tmp_path / "run", cooper_rows(), "cooper"))
    html = paths.html.read_text()
    assert html.count("data:image/png;base64,") == len(RUN_PLOTS)
    assert html.index("<h2>Result</h2>") < html.index("<h2>Totals</h2>") < html.index(
        "<h2>Curves</h2>")
    # the reward-paid line's green (training_reward.png)
    _assert_drawn(_screenshot(browser, paths.html, tmp_path), "#55a868", "the reward paid")


def test_where_the_gold_judge_scored_hacking_is_judged_against_it(tmp_path):
    """A blind-rule testbed's records: the fixed reward model pays right answers the rule
    rejects (hacking/gap 0.25-0.35) but nothing the gold judge calls wrong (gold gap 0, gold
    top-wrong 0), so it is not hacked; the rule's accuracy stands beside the gold judge's, and
    the setup's and the steps' figures of what the rule misses are reported."""
    folder = synthetic_experiment(tmp_path / "exp")
    for seed in (0, 1):
        base = folder / f"seed-{seed}"
        setup = json.loads((base / "setup" / "setup.json").read_text())
        setup["policy_check"] = {"accuracy": 0.45, "band": [0.25, 0.6], "problems": 100,
                                 "samples": 2, "benchmark": "arith_2x1_words:validation",
                                 "rule_accuracy": 0.3, "rule_missed": 0.3 + 0.02 * seed,
                                 "rule_missed_form": 0.2, "rule_missed_band": [0.2, 0.4]}
        setup["rm_recall"] = {"answers": 30, "recall_missed": 0.8, "recall_missed_form": 0.9,
                              "recall_missed_reference": 0.7, "bar": 0.5}
        (base / "setup" / "setup.json").write_text(json.dumps(setup))
        for arm in SYNTHETIC:
            d = base / "arms" / arm
            rows = [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()]
            for r in rows:
                if "reward/rule_mean" in r:
                    r.update({"gold/accuracy": 0.6, "gold/rule_missed": 0.25,
                              "gold/rm_recall_missed": 0.9 if r["step"] <= 2 else 0.5,
                              "hacking/gold_gap": 0.0, "hacking/gold_top_wrong": 0.0})
                if "val/accuracy" in r:
                    r["val/rule_accuracy"] = r["val/accuracy"] - 0.1
                    if arm == "cooper":  # reaches the rule arm's best (0.7, step 20) at step 10
                        r["val/accuracy"] = 0.5 if r["step"] == 0 else 0.75
            (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            final = json.loads((d / "final_eval.json").read_text())
            final["rule_average"] = final["average"] - 0.1
            (d / "final_eval.json").write_text(json.dumps(final))
    settings = yaml.safe_load((folder / "experiment.yaml").read_text())
    settings["train"]["validation"]["judge"] = "gold"
    (folder / "experiment.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    paths = build_report(folder)
    md = paths.markdown.read_text()
    assert "(scored by the gold judge, the strict rule's average beside it, " in md
    rm = _figures_row(md, "fixed RM")
    assert rm[1] == "not hacked (2 of 2 seeds)"  # hacking/gap alone would say hacked
    assert rm[2] == "0.000" and rm[3] == "0.000"
    assert "Here the gold judge scored" in _section(md, "How to read this")
    assert "- No arm paid by a reward model was hacked in any seed: fixed RM (not hacked in 2 " \
           "of 2 seeds), " in _section(md, "Result")
    assert "| policy | arith_small:test | average | average by the rule |" in md
    assert "| fixed RM | 33.00 (30.00 to 36.00) | 33.00 (30.00 to 36.00) | 23.00 (20.00 to 26.00) |" in md
    assert "| final_recall_missed | 0.500 | 0.500 | 0.500 | 0.500 |" in md
    assert "| first_recall_missed | 0.900 | 0.900 | 0.900 | 0.900 |" in md
    assert "| steps_to_rule_peak | 20 | 20 | 10 | 20 |" in md  # Cooper reached it first
    assert "| right answers the rule rejects at the start (%) | 31.00 (30.00 to 32.00); band " \
           "20 to 40 |" in md
    assert "| initial RM's recall on them, reference in words (%) | 70.00 |" in md
    # the first table: per seed, the rule's misses per dial and the recall, with band and bar
    assert "| right answers the rule rejects (%) [band] | ... reference in digits (%) | " \
           "initial RM's recall on them (%) [bar] |" in md
    assert "| 32.00 [20.00 to 40.00] | 20.00 | 80.00 [50.00+] |" in md  # seed 1
    assert {p.name for p in paths.plots} == PLOTS | {
        "heldout_rule_accuracy.png", "rule_missed.png", "rm_recall_missed.png"}


def test_judge_arms_the_ceiling_and_the_families_in_the_report(tmp_path):
    """A testbed with a family the rule never pays: the ceiling (paid by the gold judge) and
    TinyV's design (the rule, and a judge on its rejections) beside a Cooper arm that asks the
    judge less. The ceiling is a reference; TinyV is judged like the arms a reward model pays;
    the judge calls, each family's accuracy and the accuracy-against-calls plot are reported."""
    arms = {"rule": {"reward.mode": "rule"},
            "gold": {"reward.mode": "rule", "reward.verifier_mode": "gold", "label": "ceiling"},
            "tinyv": {"reward.mode": "rule", "reward.judge_rejected": True,
                      "judge.backend": "gold", "label": "TinyV"},
            "judged": {"reward.mode": "hybrid_cooper", "rm_update.labels": "judge",
                       "judge.backend": "gold", "label": "judged"}}
    # per arm: final accuracy, (numbers, yes/no) accuracy, judge calls a step, share
    runs = {"rule": (0.50, (0.60, 0.30), None), "gold": (0.65, (0.62, 0.71), None),
            "tinyv": (0.64, (0.61, 0.70), (8.0, 0.125)), "judged": (0.62, (0.60, 0.66), (2.0, 0.03))}
    from cooper.config.arms import declare_arms
    from cooper.config.experiment import ExperimentConfig

    folder = tmp_path / "exp"
    folder.mkdir()
    cfg = ExperimentConfig(arms=declare_arms(arms), seeds="0,1")
    cfg.train.validation.judge = "gold"
    (folder / "experiment.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    for seed in (0, 1):
        base = folder / f"seed-{seed}"
        (base / "setup").mkdir(parents=True)
        (base / "setup" / "setup.json").write_text(json.dumps({"setup": {}, "seconds": 1.0,
                                                                 "probe_accuracy": 0.95}))
        for arm, (acc, (numbers, yesno), judge) in runs.items():
            d = base / "arms" / arm
            d.mkdir(parents=True)
            rows = []
            for s in range(1, 21):
                r = {"step": s, "loss": 0.1, "reward/rule_mean": 0.4, "reward": 0.6,
                     "reward/hybrid_mean": 0.6, "gold/accuracy": 0.6, "hacking/gold_gap": 0.0,
                     "hacking/gold_top_wrong": 0.0, "gold/accuracy_yesno": yesno,
                     "gold/rm_recall_missed_yesno": 0.8, "gold/rm_fpr_unread": 0.1,
                     "perf/step": 0.5 + s % 3,  # 0.5, 1.5 or 2.5 s: the median 1.5
                     "gold/pay_tpr_fpr": 0.5}
                if arm == "tinyv":  # as if its judge were fooled by a trigger
                    r.update({"gold/trigger": 0.1 if s <= 10 else 0.4,
                              "hacking/trigger_paid": 0.5, "hacking/trigger_wrong_paid": 1.0})
                if judge:
                    r.update({"judge/asked": judge[0] * (1.5 if s <= 10 else 0.5),
                              "judge/asked_share": judge[1]})
                rows.append(r)
            (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            (d / "trained.json").write_text(json.dumps({"steps": 20, "seconds": 60.0}))
            (d / "final_eval.json").write_text(json.dumps(
                {"benchmarks": {"cmp:test": {"accuracy": acc + 0.01 * seed, "rule_accuracy": 0.3,
                                             "families": {"numbers": numbers, "yesno": yesno}}},
                 "average": acc + 0.01 * seed, "rule_average": 0.3,
                 "families": {"numbers": numbers, "yesno": yesno}, "seconds": 1.0}))
    paths = build_report(folder)
    md = paths.markdown.read_text()
    result = _section(md, "Result")
    table = _md_row(result, "arm")
    assert "judge calls a step (share of rollouts)" in table
    assert _md_row(result, "TinyV").endswith("| 8.00 (12.5%) |")  # 12 a step, then 4
    assert _md_row(result, "judged").endswith("| 2.00 (3.0%) |")
    assert _md_row(result, "ceiling").split(" | ")[1].startswith("reference")
    assert "not hacked (2 of 2 seeds)" in _md_row(result, "TinyV")  # judged, not a reference
    assert "Judge calls a step: TinyV 8.00; judged 2.00 (25% of it)." in result
    assert "The ceiling, ceiling, ended +15.00 points against rule" in result
    assert "Of the arms paid by a reward model, judged ended furthest above rule" in result
    assert "| policy | cmp:test | average | average by the rule | numbers (average) | " \
           "yes/no (average) |" in md
    assert "| final_accuracy_yesno | 0.300 | 0.710 | 0.700 | 0.660 |" in md
    assert "| judge_calls | not enough data | not enough data | 160 | 40 |" in md
    assert "| first_judge_share | not enough data | not enough data | 0.125 | 0.030 |" in md
    # the judge's calls a step over the first and the last tenth of the steps: 12 then 4
    assert "| first_judge_calls | not enough data | not enough data | 12.000 | 3.000 |" in md
    assert "| final_judge_calls | not enough data | not enough data | 4.000 | 1.000 |" in md
    assert "| median_step | 1.500 | 1.500 | 1.500 | 1.500 |" in md
    assert "| final_pay_tpr_fpr | 0.500 | 0.500 | 0.500 | 0.500 |" in md
    # the trigger's rows, where a run logged them
    assert "| first_trigger | not enough data | not enough data | 0.100 | not enough data |" in md
    assert "| final_trigger_wrong_paid | not enough data | not enough data | 1.000 | not " in md
    names = {p.name for p in paths.plots}
    assert {"judge_calls.png", "accuracy_vs_judge_calls.png", "gold_accuracy_yesno.png",
            "rm_recall_yesno.png", "rm_fpr_unread.png"} <= names
