"""The GPU tier (``pytest -m gpu``; ``tools/gpu_check.sh`` runs it with the step benchmark).

On CUDA, in bfloat16, the code paths that only a CPU has run in CI: a Cooper step with rollout
negatives through ``cooper train`` (bf16 compute over float32 master weights for what is
trained), and the TRL drop-in example. Skipped where there is no CUDA device.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch

from conftest import cli_env, run_cli
from test_train_smoke import assert_changed, metrics, tiny_args, weights
from test_trl_dropin import EXAMPLE

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.fixture(scope="module")
def arith():
    from cooper.experiment.testbed import tiny_arith_models

    return tiny_arith_models()


def test_a_bfloat16_cooper_step_on_cuda_updates_both_models(arith, tmp_path):
    out = tmp_path / "run"
    run_cli(*tiny_args(arith, out, "cooper", "policy.dtype=bfloat16",
                       "rm_update.negatives=rollouts", "rollout.samples_per_prompt=8",
                       "rollout.micro_batch_size=8", "max_steps=4", "validation.enabled=false"))
    rows = [r for r in metrics(out) if "loss" in r]
    assert len(rows) == 4
    for r in rows:
        bad = {k: v for k, v in r.items() if isinstance(v, float) and not math.isfinite(v)
               and k != "rm/changed_fraction"}  # NaN there means "no update this step"
        assert not bad, f"step {r['step']}: non-finite {bad}"
    updates = [r for r in rows if r["rm/pairs"] > 0]
    assert updates, "no step had a pair: the update was not exercised"
    # bfloat16 weights under a plain optimiser step would round most updates away
    assert all(r["rm/changed_fraction"] > 0.5 for r in updates), \
        [(r["step"], r["rm/changed_fraction"]) for r in updates]
    assert_changed(weights(arith / "policy"), weights(out / "policy"), "policy")
    assert_changed(weights(arith / "reward"), weights(out / "reward_model"), "reward model")


def test_the_trl_drop_in_example_on_cuda(arith, tmp_path):
    out = tmp_path / "example"
    cmd = [sys.executable, str(EXAMPLE), "--policy", str(arith / "policy"),
           "--reward-model", str(arith / "reward"), "--dataset", "arith_small", "--limit", "64",
           "--num-generations", "8", "--batch-size", "16", "--max-completion-length", "48",
           "--max-steps", "3", "--save-steps", "3", "--output-dir", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=cli_env())
    assert proc.returncode == 0, proc.stderr[-4000:]
    log = json.loads((out / "checkpoint-3" / "trainer_state.json").read_text())["log_history"]
    steps = [r for r in log if "loss" in r]
    assert len(steps) == 3 and all(math.isfinite(r["loss"]) for r in steps)
    assert any(r["rm/pairs"] > 0 for r in steps), "no step had a pair: nothing was updated"
    assert_changed(weights(arith / "reward"), weights(out / "reward_model"), "reward model")
    assert json.loads((out / "rm_replicas.json").read_text())["identical"]
