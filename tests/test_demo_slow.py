"""`cooper demo` end to end on the embedded model, shrunk to one Cooper step (slow tier).

Its reward model sits on the embedded model's first 8 layers (`--rm-trunk 8`, the top 4 trained,
as on the default's 24): every stage and artefact is the same, and its training and the checks
that score 558 texts twice run 8 layers instead of 24."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.slow


def test_demo_runs_every_stage_and_writes_its_artefacts(tmp_path):
    out = tmp_path / "demo"
    proc = run_cli("demo", "--out", out, "--steps", "1", "--rm-triples", "32", "--rm-trunk", "8",
                   timeout=1800)
    summary = json.loads((out / "summary.json").read_text())
    names = [s["name"] for s in summary["stages"]]
    assert names == ["prepare model", "warm-start policy", "labelled set", "train VerifyRM",
                     "robustness suite",
                     "real completions", "Cooper RL", "Cooper report",
                     "after Cooper: robustness suite", "after Cooper: real completions",
                     "hacking picture"]
    for stage in summary["stages"]:
        assert stage["seconds"] >= 0
        if stage["artefact"] and stage["name"] != "prepare model":
            assert Path(stage["artefact"]).exists(), stage
    figures = summary["figures"]
    assert 0.0 <= figures["suite_false_positive_rate"] <= 1.0
    suite = json.loads((out / "robustness.json").read_text())
    assert suite["overall"]["n"] > 0 and suite["dataset"] == "arith_small/test"
    # every kind of attack scored on 40 items, so a 5% bar is two of them, not half of one
    assert figures["suite_items_per_kind"] == 40
    assert all(k["n"] == 40 for k in suite["kinds"].values())
    stats = json.loads((out / "rm_data.stats.json").read_text())
    assert stats["rows"] == 32 and stats["positives"] == 16  # the recipe's mix, balanced
    # the shipped completions of the embedded model, sorted by the verifier, are in the mix
    assert sum(stats["sampled"].values()) == 1920  # every shipped completion, verified
    assert stats["kinds"]["sampled_correct"]["rows"] > 0
    # and the model was scored on held-out ones, half correct
    real = json.loads((out / "real_completions.json").read_text())
    assert real["n"] == 2 * real["correct"] and 0.0 <= real["accuracy"] <= 1.0
    assert figures["real_balanced_accuracy"] == real["accuracy"]
    run = figures["cooper_run"]
    # the Cooper run summed up over its steps: pairs by source, updates, agreement first and last
    assert run["steps"] == 1 and run["mode"] == "cooper"
    assert run["pairs"] == (run["negatives_rollout"] + run["negatives_assistant"]
                            + run["negatives_fallback"])
    assert run["negatives_assistant"] == 0  # the demo's default: the policy's own rollouts
    # the premise of the Cooper stage: the warm-started policy is right on some rollouts and
    # wrong on others, so a group holds a verified positive and a wrong rollout to pair it with
    (step,) = figures["cooper_steps"]
    assert run["steps_with_pairs"] == 1 and run["rm_updates"] == 1, (
        f"Cooper's step made no pair (rollouts right: {step['right']}; pairs: {step['pairs']}): "
        "the warm start no longer leaves the policy right on some rollouts and wrong on others "
        "(DemoSettings.warm_steps, warm_lr), so Cooper's update would idle on most steps")
    assert 0 < step["right"] < 1 and run["agreement_first"] is not None
    assert summary["settings"]["warm_steps"] > 0
    # the Cooper run starts from the warm-started policy, written beside the other artefacts
    assert (out / "policy_warm_start" / "config.json").is_file()
    assert str(out / "policy_warm_start") in (out / "cooper" / "config.yaml").read_text()
    assert Path(figures["cooper_report"]).is_file()
    rows = [json.loads(x) for x in (out / "cooper" / "metrics.jsonl").read_text().splitlines()]
    assert not any("val/accuracy" in r for r in rows)  # no held-out validation (demo.py: why)
    assert (out / "cooper" / "policy" / "config.json").exists()
    # the updated reward model checked the same way, before -> after
    after = figures["after_cooper"]
    assert after["suite_items_per_kind"] == 40 and 0.0 <= after["real_balanced_accuracy"] <= 1.0
    assert (out / "robustness_after_cooper.json").is_file()
    assert (out / "real_completions_after_cooper.json").is_file()
    # the table the user reads ends with the total and fits 100 columns
    table = proc.stdout[proc.stdout.index("stage  "):proc.stdout.index("\ntotal")]
    assert "Cooper RL" in table and max(len(x) for x in table.splitlines()) <= 100, table
    # and the verdicts, as summary.json has them (wrapped to the terminal's 100 columns)
    assert len(figures["verdicts"]) == 4 and "before -> after" in figures["verdicts"][3]
    printed = " ".join(proc.stdout.split())
    for line in figures["verdicts"]:
        assert " ".join(line.split()) in printed
