"""The embedded model learns to judge perturbed GSM8K solutions, end to end through the CLI.

200 training triples (100 problems), the top 4 layers, 4 epochs: about 4 minutes on two
free CPU cores. The full-size run (1000 triples) is in docs/reward_model.md.
"""

from __future__ import annotations

import json

import pytest

from conftest import run_cli


@pytest.mark.slow
def test_embedded_reward_model_learns_perturbed_gsm8k(tmp_path):
    train, test, out = tmp_path / "train.jsonl", tmp_path / "test.jsonl", tmp_path / "rm"
    run_cli("data", "perturbed", "--dataset", "gsm8k", "--split", "train", "--n", "200",
            "--out", train)
    run_cli("data", "perturbed", "--dataset", "gsm8k", "--split", "test", "--n", "100",
            "--out", test)
    run_cli("rm", "train", "--data", train, "--out", out, "--train-layers", "4",
            "--lr", "3e-4", "--epochs", "4", "--holdout", "0", "--no-progress",
            timeout=900)
    report = json.loads((out / "train_report.json").read_text())
    assert report["cached_trunk"] is True
    result = json.loads(run_cli("rm", "eval", "--model", out, "--data", test, "--json")
                        .stdout.strip().splitlines()[-1])
    # A balanced set: chance is 0.5 accuracy and 0.5 AUROC. This setting measured 0.82 and
    # 0.95 (docs/reward_model.md); the bars leave room for thread-order float differences.
    assert result["accuracy"] >= 0.7 and result["auroc"] >= 0.85, result
