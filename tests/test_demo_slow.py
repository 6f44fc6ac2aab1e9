"""`cooper demo` end to end on the embedded model, shrunk to one Cooper step (slow tier)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.slow


def test_demo_runs_every_stage_and_writes_its_artefacts(tmp_path):
    out = tmp_path / "demo"
    proc = run_cli("demo", "--out", out, "--steps", "1", "--rm-triples", "16",
                   "--eval-problems", "2", timeout=1800)
    summary = json.loads((out / "summary.json").read_text())
    names = [s["name"] for s in summary["stages"]]
    assert names == ["prepare model", "labelled set", "train VerifyRM", "evaluate before",
                     "Cooper RL", "evaluate after"]
    for stage in summary["stages"]:
        assert stage["seconds"] >= 0
        if stage["artefact"] and stage["name"] != "prepare model":
            assert Path(stage["artefact"]).exists(), stage
    figures = summary["figures"]
    assert 0.0 <= figures["accuracy_before"] <= 1.0 and 0.0 <= figures["accuracy_after"] <= 1.0
    last = figures["last_step"]
    # the Cooper step logged its reward, the verifier beside it, and the reward-model update
    assert {"reward/rm_mean", "reward/rule_mean", "hacking/gap", "rm/pairs"} <= set(last)
    assert (out / "cooper" / "policy" / "config.json").exists()
    # the table the user reads ends with the total
    assert "total" in proc.stdout and "Cooper RL" in proc.stdout
