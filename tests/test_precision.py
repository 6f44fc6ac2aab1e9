"""Updates that move in low precision (bfloat16): the reward model's and the policy's.

An AdamW step of about the learning rate (1e-5) is below half a bfloat16 rounding step for any
weight with |w| above ~4e-3, so stepping bfloat16 weights directly leaves most of them as they
were. The reward model therefore keeps its trainable weights in float32 and autocasts the
forward; the policy is loaded in float32 with bf16 autocast; both are checked here on a CPU.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from conftest import run_cli
from cooper.rm.model import RewardModel
from cooper.rm.update import PairwiseUpdater
from cooper.types import Triple

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models

POS = [Triple("What is 2+3?", "5", f"2+3=5. The answer is \\boxed{{5}}.{' ' * i}") for i in range(4)]
NEG = [Triple("What is 2+3?", "5", f"2+3=6. The answer is \\boxed{{6}}.{' ' * i}") for i in range(4)]


def trainable(rm: RewardModel) -> dict[str, torch.Tensor]:
    return {n: p.detach().float().clone() for n, p in rm.model.named_parameters() if p.requires_grad}


def test_bfloat16_reward_model_updates_move_most_weights(tiny_models):
    rm = RewardModel.load(tiny_models.reward, dtype="bfloat16")
    frozen_before = {n: p.detach().clone() for n, p in rm.model.named_parameters()}
    rm.train_top_layers(1)
    before = trainable(rm)
    updater = PairwiseUpdater(rm, lr=1e-5)
    stats = [updater.step(POS, NEG) for _ in range(3)]
    after = trainable(rm)
    changed = sum(int((after[n] != before[n]).sum()) for n in before)
    total = sum(t.numel() for t in before.values())
    assert changed / total > 0.5, f"only {changed / total:.0%} of trainable weights changed"
    assert all(s.changed_fraction > 0.5 and not s.skipped for s in stats), stats
    # the frozen layers stay in bfloat16 (memory), the trained ones are float32 masters
    dtypes = {n: p.dtype for n, p in rm.model.named_parameters()}
    assert {dtypes[n] for n in before} == {torch.float32}
    assert torch.bfloat16 in {dtypes[n] for n in frozen_before if n not in before}
    # scoring still works on the mixed model (autocast) and gives probabilities
    scores = rm.score(POS + NEG)
    assert all(0 < s < 1 for s in scores)


def test_bfloat16_offline_training_moves_most_weights(tiny_models):
    """`cooper rm train --dtype bfloat16`: the trained layers are float32 masters, as online."""
    from cooper.config.rm import RMTrainConfig
    from cooper.rm.training import train_bce
    from cooper.types import LabelledTriple

    rm = RewardModel.load(tiny_models.reward, dtype="bfloat16")
    rm.train_top_layers(1)
    before = trainable(rm)
    rows = ([LabelledTriple(t, True, f"p{i}", "test") for i, t in enumerate(POS)]
            + [LabelledTriple(t, False, f"n{i}", "test") for i, t in enumerate(NEG)])
    train_bce(rm, rows, RMTrainConfig(lr=2e-5, epochs=2, batch_size=4, holdout=0.0,
                                      train_layers=1), progress=False)
    after = trainable(rm)
    changed = sum(int((after[n] != before[n]).sum()) for n in before)
    assert changed / sum(t.numel() for t in before.values()) > 0.5
    dtypes = {n: p.dtype for n, p in rm.model.named_parameters()}
    assert {dtypes[n] for n in before} == {torch.float32}
    assert torch.bfloat16 in set(dtypes.values())  # the frozen layers stay in bfloat16


def test_changed_fraction_is_zero_when_nothing_moves(tiny_models):
    rm = RewardModel.load(tiny_models.reward, dtype="float32")
    updater = PairwiseUpdater(rm, lr=1e-5)
    for g in updater.optimizer.param_groups:
        g["lr"] = 0.0
        g["weight_decay"] = 0.0
    assert updater.step(POS, NEG).changed_fraction == 0.0


def test_bfloat16_training_run_on_cpu_moves_policy_and_reward_model(tmp_path):
    """`cooper train` with policy.dtype=bfloat16 (the GPU preset's precision) on a CPU: every
    reward-model update moves most trainable weights, and the policy changes."""
    from safetensors.torch import load_file

    from cooper.experiment.testbed import tiny_arith_models

    arith = tiny_arith_models()  # right about 40% of the time: most steps make pairs
    out = tmp_path / "bf16"
    run_cli("train", "--config", "demo_cpu", "reward.mode=cooper", "policy.dtype=bfloat16",
            f"policy.model={arith / 'policy'}", f"reward.model={arith / 'reward'}",
            "data.dataset=arith_small", "data.limit=64", "rollout.prompts_per_step=4",
            "rollout.samples_per_prompt=4", "rollout.micro_batch_size=8",
            "rollout.max_completion_length=48", "assistant.backend=rewrite",
            "rm_update.negatives=assistant",
            "reward.max_length=256", "rm_update.train_layers=none", "rm_update.lr=1e-5",
            "policy.lr=1e-5", "validation.enabled=false", "max_steps=3", f"output_dir={out}")
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    updates = [r["rm/changed_fraction"] for r in rows if "rm/changed_fraction" in r]
    assert len(updates) >= 2, f"too few reward-model updates to judge: {rows}"
    assert all(math.isfinite(v) and v > 0.5 for v in updates), updates
    policy_before = load_file(arith / "policy" / "model.safetensors")
    policy_after = load_file(out / "policy" / "model.safetensors")
    changed = sum(int((policy_before[k] != policy_after[k].to(policy_before[k].dtype)).sum())
                  for k in policy_before)
    total = sum(v.numel() for v in policy_before.values())
    assert changed / total > 0.5, f"the bfloat16 run moved {changed / total:.0%} of the policy"
