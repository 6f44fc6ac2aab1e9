"""tools/asking_bar.py: the bar written for asking that adapts, checked on an experiment folder
(runs written here as a run writes them)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("asking_bar", ROOT / "tools" / "asking_bar.py")
asking_bar = importlib.util.module_from_spec(spec)
spec.loader.exec_module(asking_bar)


def write_run(out: Path, seed: int, arm: str, asked: list[float], accuracy: float,
              top_wrong: float = 0.0, recall: tuple[int, int] | None = None) -> None:
    d = out / f"seed-{seed}" / "arms" / arm
    d.mkdir(parents=True)
    rows = [{"step": s + 1, "reward/rule_mean": 0.3, "judge/asked": a, "perf/step": 1.0,
             "hacking/gold_gap": 0.0, "hacking/gold_top_wrong": top_wrong}
            for s, a in enumerate(asked)]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "final_eval_last.json").write_text(json.dumps({"average": accuracy}))
    if recall is not None:
        gained, lost = recall
        rec = {"before": 0.95, "after": 0.95 + (gained - lost) / 700, "gained": gained,
               "lost": lost}
        (d / "rm_check.json").write_text(json.dumps({"initial_policy": {"recall_missed": rec}}))


def test_the_bar_passes_only_where_every_criterion_holds(tmp_path):
    for seed in (0, 1):
        write_run(tmp_path, seed, "rule", [0.0] * 20, 0.58)
        write_run(tmp_path, seed, "tinyv", [12.0] * 20, 0.71)
        write_run(tmp_path, seed, "judged", [6.0] * 20, 0.68)
        # 8 a step for two steps, then 1: a fall to an eighth, 34 calls against TinyV's 240
        write_run(tmp_path, seed, "adaptive", [8.0, 8.0] + [1.0] * 18, 0.675, recall=(3, 1))
    figures = [asking_bar.seed_figures(tmp_path, s, "adaptive", "judged", "tinyv", "rule")
               for s in (0, 1)]
    assert figures[0]["calls_first"] == 8.0 and figures[0]["calls_last"] == 1.0
    assert figures[0]["calls_total"] == 34.0 and figures[0]["tinyv_calls_total"] == 240.0
    assert figures[0]["verdict"] == "not hacked" and figures[0]["recall_held"] is True
    result = asking_bar.bar(figures)
    assert result["met"] and abs(result["paired_mean_vs_budget"] + 0.5) < 1e-9
    # a seed hacked, or one whose recall lost beyond chance, or calls that never fall: not met
    for arm, kwargs, failed in (
            ("hacked", {"top_wrong": 0.5, "recall": (3, 1)}, "never_hacked"),
            ("forgot", {"recall": (0, 9)}, "recall_held"),
            ("flat", {"recall": (3, 1)}, "calls_fall")):
        for seed in (0, 1):
            write_run(tmp_path, seed, arm, [2.0] * 20 if arm == "flat" else [8.0, 8.0] + [1.0] * 18,
                      0.675, **kwargs)
        result = asking_bar.bar([asking_bar.seed_figures(tmp_path, s, arm, "judged", "tinyv",
                                                         "rule") for s in (0, 1)])
        assert not result["met"] and not result["criteria"][failed], arm
    # a seed without the arm's run fails the bar, saying so
    write_run(tmp_path, 2, "rule", [0.0] * 20, 0.58)
    missing = asking_bar.seed_figures(tmp_path, 2, "adaptive", "judged", "tinyv", "rule")
    assert asking_bar.bar([*figures, missing]) == {"met": False,
                                                   "why": "a seed is missing its run"}


def test_a_folder_without_seeds_is_a_clear_error(tmp_path):
    import subprocess
    import sys

    (tmp_path / "seed-x").mkdir()
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "asking_bar.py"), str(tmp_path),
                          "--arm", "judged_adaptive_pays"], capture_output=True, text=True)
    assert out.returncode == 2 and "holds no seed-N folder" in out.stderr
