"""The method's order (``docs/method.md``, "One Cooper step"), pinned through the real trainer.

A reward model that counts its versions stands in for VerifyRM: its score *is* its version, and
each pairwise update makes a new version. Step t's rewards must come from version t-1 (the
reward model before this step's update), the update makes version t once those rewards are
fixed, and step t+1 scores with version t. Every step must be scored by the current reward
model even when its batch repeats an earlier one exactly. The same checks run on a planted
wrong order, where they must fail.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback

from cooper.rm.update import PairwiseStats

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models


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


def order_problems(events: list, steps: int) -> list[str]:
    """What in a run's (kind, version) events breaks the method's order."""
    problems = []
    scores = [v for kind, v in events if kind == "score"]
    if len(scores) != steps:
        problems.append(f"{len(scores)} scorings for {steps} steps (one each, repeats included)")
    updates = [v for kind, v in events if kind == "update"]
    if updates != list(range(1, steps + 1)):
        problems.append(f"updates {updates}: not one per step")
    for t in range(1, steps + 1):
        if ("update", t) not in events or ("policy", t) not in events:
            continue
        at = events.index(("update", t))
        if events[:at].count(("score", t - 1)) != 1:
            problems.append(f"step {t}: not scored once by version {t - 1} before its update")
        elif events.index(("score", t - 1)) > events.index(("policy", t)):
            problems.append(f"step {t}: the policy stepped before its rewards were computed")
    return problems


def test_the_order_check_fails_on_a_planted_wrong_order():
    # the update before the scoring: step t is paid by version t, not t-1
    wrong = [e for t in (1, 2) for e in (("update", t), ("score", t), ("policy", t))]
    assert any("not scored once by version 0" in p for p in order_problems(wrong, 2))
    # the right order passes
    right = [e for t in (1, 2) for e in (("score", t - 1), ("update", t), ("policy", t))]
    assert order_problems(right, 2) == []


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
        "rm_update.negatives=assistant",
        "validation.enabled=false", f"max_steps={steps}", f"output_dir={tmp_path / 'run'}"])
    runner.run(cfg)
    assert order_problems(events, steps) == [], events
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    rm_mean = [r["reward/rm_mean"] for r in rows if "reward/rm_mean" in r]
    assert rm_mean == pytest.approx([v / 100 for v in range(steps)])
