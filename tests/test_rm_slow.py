"""A reward model on the embedded model learns to judge perturbed GSM8K solutions, end to end
through the CLI.

The demo's reward model: the embedded model's first 24 layers (`--base embedded-trunk-24`), the
top 4 trained. 120 training triples (60 problems), 3 epochs, scored on 60 test triples: about
2.5 minutes at one thread, most of it the frozen layers' one pass over the training triples.
The full-size run (1000 triples, the whole model) is in docs/reward_model.md.
"""

from __future__ import annotations

import json

import pytest

from conftest import run_cli


@pytest.mark.slow
def test_embedded_reward_model_learns_perturbed_gsm8k(tmp_path):
    train, test, out = tmp_path / "train.jsonl", tmp_path / "test.jsonl", tmp_path / "rm"
    run_cli("data", "perturbed", "--dataset", "gsm8k", "--split", "train", "--n", "120",
            "--out", train)
    run_cli("data", "perturbed", "--dataset", "gsm8k", "--split", "test", "--n", "60",
            "--out", test)
    run_cli("rm", "train", "--data", train, "--out", out, "--base", "embedded-trunk-24",
            "--train-layers", "4", "--lr", "3e-4", "--epochs", "3", "--holdout", "0",
            "--no-progress", timeout=1800)
    report = json.loads((out / "train_report.json").read_text())
    assert report["cached_trunk"] is True
    result = json.loads(run_cli("rm", "eval", "--model", out, "--data", test, "--json")
                        .stdout.strip().splitlines()[-1])
    # A balanced set: chance is 0.5 accuracy and 0.5 AUROC. This setting measured 0.92 and 0.98,
    # 0.95 and 1.00, 0.95 and 0.99 with --seed 0, 1 and 2 (one thread); the bars leave room for
    # thread-order float differences. The whole model, 200 triples and 3 epochs, measured
    # 0.80-0.87 and 0.90-0.96, and the whole model on 100 triples 0.82 with one score head and
    # 0.58 with another: the trunk learns this task better, and a regression shows.
    assert result["accuracy"] >= 0.85 and result["auroc"] >= 0.95, result
