"""The embedded model learns to judge perturbed GSM8K solutions, end to end through the CLI.

200 training triples (100 problems), the top 4 layers, 3 epochs, scored on 60 test triples: about
5 minutes at one thread, most of it the frozen layers' one pass over the training triples. The
full-size run (1000 triples) is in docs/reward_model.md.
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
    run_cli("data", "perturbed", "--dataset", "gsm8k", "--split", "test", "--n", "60",
            "--out", test)
    run_cli("rm", "train", "--data", train, "--out", out, "--train-layers", "4",
            "--lr", "3e-4", "--epochs", "3", "--holdout", "0", "--no-progress",
            timeout=1800)
    report = json.loads((out / "train_report.json").read_text())
    assert report["cached_trunk"] is True
    result = json.loads(run_cli("rm", "eval", "--model", out, "--data", test, "--json")
                        .stdout.strip().splitlines()[-1])
    # A balanced set: chance is 0.5 accuracy and 0.5 AUROC. This setting measured 0.80 and 0.90,
    # 0.87 and 0.96, and 0.83 and 0.92 with --seed 0, 1 and 2 (one thread); the bars leave room for
    # thread-order float differences. Half the training triples measured 0.82 with one seed and
    # 0.58 with another head: too few to hold the bar whatever the seed.
    assert result["accuracy"] >= 0.7 and result["auroc"] >= 0.85, result
