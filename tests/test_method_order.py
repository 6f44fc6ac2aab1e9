"""The method's order (``method.md``, Part 2), pinned through the real trainer.

A reward model that counts its versions stands in for VerifyRM: its score *is* its version, and
each pairwise update makes a new version. Step t's rewards must come from version t-1 (the
reward model before this step's update), the update after the policy's optimiser step makes
version t, and step t+1 scores with version t. Every step must be scored by the current reward
model even when its batch repeats an earlier one exactly.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback

from cooper.rm.update import PairwiseStats


class CountingRM:
    """Scores every triple with ``version / 100``; ``model`` and ``save`` as the runner needs."""

    def __init__(self, events: list):
        self.version, self.events = 0, events
        self.model = torch.nn.Linear(1, 1)

    def score(self, triples, batch_size=16, **_):
        self.events.append(("score", self.version))
        return [self.version / 100] * len(triples)

    def save(self, out_dir, **_):
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "version.json").write_text(json.dumps(self.version))


class CountingUpdater:
    def __init__(self, rm: CountingRM):
        self.rm = rm

    def keeping_states(self):
        return contextlib.nullcontext()

    def step(self, positives, negatives, *, reduce_grads=None, global_pairs=None):
        self.rm.version += 1
        self.rm.events.append(("update", self.rm.version))
        return PairwiseStats(0.5, 1.0, 0.1, len(positives), False)

    def state_dict(self):
        return {"version": self.rm.version}


class PolicySteps(TrainerCallback):
    def __init__(self, events: list):
        self.events = events

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.events.append(("policy", state.global_step + 1))


@pytest.fixture(scope="module")
def arith():
    from cooper.experiment.testbed import tiny_arith_models

    return tiny_arith_models()


def test_rewards_come_from_the_reward_model_before_its_update(arith, tmp_path, monkeypatch):
    from cooper.config import load_config
    from cooper.rl import runner
    from cooper.rl.trainer import CooperTrainer

    events: list = []
    rm = CountingRM(events)
    monkeypatch.setattr(runner, "load_reward_model", lambda cfg, device=None: (rm, CountingUpdater(rm)))
    original_init = CooperTrainer.__init__

    def init(self, *a, **kw):
        original_init(self, *a, **kw)
        self.add_callback(PolicySteps(events))

    monkeypatch.setattr(CooperTrainer, "__init__", init)
    steps = 4
    # one problem, so every step's batch is the same prompt; the policy is near-greedy and
    # barely moves, so batches repeat (the old content-keyed memo skipped Stage 1 there)
    cfg = load_config("demo_cpu", [
        "reward.mode=cooper", f"reward.model={arith / 'reward'}", f"policy.model={arith / 'policy'}",
        "data.dataset=arith_small", "data.limit=1", "rollout.prompts_per_step=1",
        "rollout.samples_per_prompt=8", "rollout.micro_batch_size=8", "rollout.temperature=0.05",
        "rollout.max_completion_length=48", "assistant.backend=rewrite", "policy.lr=1e-12",
        "validation.enabled=false", f"max_steps={steps}", f"output_dir={tmp_path / 'run'}"])
    runner.run(cfg)
    scores = [v for kind, v in events if kind == "score"]
    assert len(scores) == steps, f"every step is scored once, repeated batches included: {events}"
    updates = [v for kind, v in events if kind == "update"]
    assert updates == list(range(1, steps + 1)), f"one update per step: {events}"
    for t in range(1, steps + 1):
        at = events.index(("update", t))
        # step t: scored with version t-1, then the policy's step, then the update to version t
        assert events[:at].count(("score", t - 1)) == 1
        assert events.index(("score", t - 1)) < events.index(("policy", t)) < at
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    rm_mean = [r["reward/rm_mean"] for r in rows if "reward/rm_mean" in r]
    assert rm_mean == pytest.approx([v / 100 for v in range(steps)])
