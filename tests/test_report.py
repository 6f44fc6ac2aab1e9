"""`cooper report`: figures from hand-made records, and the HTML as a browser renders it."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from cooper.experiment.plots import moving_average
from cooper.experiment.report import Arm, build_report, hacking_figures, tail_mean

BROWSERS = ("chromium", "chromium-headless-shell", "chromium-browser", "google-chrome",
            "google-chrome-stable")


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
    f = hacking_figures(Arm("rm", rows, None, None))
    assert f["steps"] == 10
    assert f["peak_verified"] == 0.8  # window 1 (10% of 10 steps): the raw peak
    assert f["final_verified"] == pytest.approx(0.2)  # last 10% = the last step
    assert f["verified_drop"] == pytest.approx(0.75)  # (0.8 - 0.2) / 0.8
    assert f["final_gap"] == pytest.approx(0.7)
    # second half: steps 6..10, gaps 0.3 0.5 0.7 0.7 0.7 -> 2.9 / 5
    assert f["second_half_gap"] == pytest.approx(0.58)
    assert f["final_reward"] == pytest.approx(0.9)


def fake_experiment(folder: Path, steps: int = 40, arms=("rule", "rm", "cooper"),
                    finished=("rule", "rm", "cooper")) -> Path:
    """An experiment folder with made-up curves: rm hacks, cooper and rule do not."""
    from cooper.config.experiment import ExperimentConfig

    folder.mkdir(parents=True)
    cfg = ExperimentConfig(arms=",".join(arms))
    (folder / "experiment.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    (folder / "experiment.json").write_text(json.dumps({"versions": {"cooper-rl": "0.1.0"}}))
    ev = {"benchmarks": {"arith_small:test": {"accuracy": 0.5}}, "average": 0.5, "seconds": 3.0}
    (folder / "setup").mkdir()
    (folder / "setup" / "setup.json").write_text(json.dumps(
        {"setup": {}, "probe_accuracy": 0.7, "initial_eval": ev, "seconds": 12.0}))
    for k, arm in enumerate(arms):
        d = folder / "arms" / arm
        d.mkdir(parents=True)
        rows = []
        for s in range(steps + 1):
            t = s / steps
            ver = 0.5 + 0.3 * t if arm != "rm" else 0.5 + 0.3 * t - 0.7 * max(0.0, t - 0.4)
            rm = ver + (0.6 * t if arm == "rm" else 0.02)
            row = {"step": s}
            if s:
                row.update({"reward/rule_mean": ver, "reward/rm_mean": rm, "hacking/gap": rm - ver,
                            "rm/agreement": 0.8, "loss": 0.1})
            if s % 10 == 0:
                row.update({"val/accuracy": ver, "val/rm_probe_accuracy": 0.7 + 0.01 * k})
            rows.append(row)
        (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        if arm in finished:
            (d / "trained.json").write_text(json.dumps({"steps": steps, "seconds": 600.0}))
            final = {"benchmarks": {"arith_small:test": {"accuracy": rows[-1]["val/accuracy"]}},
                     "average": rows[-1]["val/accuracy"], "seconds": 5.0}
            (d / "final_eval.json").write_text(json.dumps(final))
    return folder


def test_report_tables_and_files(tmp_path):
    paths = build_report(fake_experiment(tmp_path / "exp"))
    md = paths.markdown.read_text()
    # final table: initial policy row and each arm, accuracy in percent
    assert "| no RL (initial policy) | 50.00 | 50.00 |" in md
    assert "| fixed RM | 38.00 | 38.00 |" in md  # step 40: 0.5 + 0.3 - 0.7 * (1 - 0.4)
    assert "| Cooper | 80.00 | 80.00 |" in md
    assert "Incomplete" not in md
    assert {p.name for p in paths.plots} == {"heldout_accuracy.png", "training_reward.png",
                                             "hacking_gap.png", "hacking_top_wrong.png",
                                             "rm_group_auroc.png", "rm_probe.png"}
    for p in paths.plots:
        assert (paths.folder / p.name).is_file() and f"]({p.name})" in md
    assert "| total | 30 min 27 s |" in md  # 12 s setup + 3 x (600 s + 5 s)


def test_report_of_an_unfinished_experiment_says_so(tmp_path):
    paths = build_report(fake_experiment(tmp_path / "exp", finished=("rule",)))
    md = paths.markdown.read_text()
    assert "Incomplete: rm, cooper not finished yet" in md
    assert "| fixed RM | not run yet | not run yet |" in md


def _browser() -> str | None:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def test_html_report_renders_in_a_headless_browser(tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip(f"no headless browser found (looked for {', '.join(BROWSERS)}); "
                    "`.ci/run` installs chromium, or: apt-get install chromium")
    paths = build_report(fake_experiment(tmp_path / "exp"))
    shot = tmp_path / "shot.png"
    # --no-sandbox: CI containers run as root, where Chromium's sandbox refuses to start
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--allow-file-access-from-files", f"--screenshot={shot}", "--window-size=1000,2400",
           paths.html.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert shot.is_file(), f"no screenshot ({proc.returncode}): {proc.stderr[-2000:]}"
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3)
    colours = np.unique(pixels, axis=0)
    assert len(colours) > 50, f"screenshot is nearly blank ({len(colours)} colours)"
    # the embedded plots are drawn: some pixels carry the arms' line colours' hue (not grey)
    r, g, b = pixels[:, 0].astype(int), pixels[:, 1].astype(int), pixels[:, 2].astype(int)
    saturated = (np.maximum(np.maximum(r, g), b) - np.minimum(np.minimum(r, g), b)) > 60
    assert saturated.mean() > 0.001, "no coloured pixels: the plots did not render"
