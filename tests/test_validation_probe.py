"""``validation.rm_probe``: each validation scores the current reward model on a fixed labelled
probe (cooper.rl.validation); an updated reward model is scored every time, a frozen one once."""

from __future__ import annotations

import contextlib
import math
from types import SimpleNamespace

import pytest

import cooper.rl.validation as validation
from cooper.config.reward_sections import RewardConfig
from cooper.config.sections import ValidationConfig
from cooper.infra.collective import SingleProcess
from cooper.rl.validation import ValidationCallback
from cooper.rm.metrics import binary_metrics
from cooper.types import LabelledTriple, Triple

PROBE = [LabelledTriple(Triple(f"What is {a} + {b}?", str(a + b),
                               f"{a} + {b} = {a + b + (i % 2)}. The answer is {a + b + (i % 2)}."),
                        i % 2 == 0, f"p{i}", "probe")
         for i, (a, b) in enumerate((a, b) for a in range(1, 5) for b in range(2, 5))]


def _callback(rm, updater) -> ValidationCallback:
    """The callback with only what its probe uses: no held-out problems, so the policy's part
    of a validation scores nothing (its generation is replaced by a model that is never run)."""
    cb = ValidationCallback.__new__(ValidationCallback)
    cb.vcfg, cb.reward_cfg = ValidationConfig(), RewardConfig(score_batch_size=5)
    cb.problems, cb.probe, cb._frozen_probe = [], PROBE, None
    cb.policy, cb.accelerator = (lambda: None), None
    cb.engine = SimpleNamespace(rm=rm, updater=updater, collective=SingleProcess())
    return cb


@pytest.fixture
def rm(tiny_models):
    from cooper.rm.model import RewardModel

    return RewardModel.load(tiny_models.reward)


@pytest.fixture(autouse=True)
def no_policy(monkeypatch):
    import torch

    @contextlib.contextmanager
    def unwrap(model, accelerator):
        yield torch.nn.Linear(1, 1)

    monkeypatch.setattr(validation, "unwrap_model_for_generation", unwrap)


def _flip(rm) -> None:
    """Negate the reward model's logits: every score s becomes 1 - s."""
    import torch

    with torch.no_grad():
        for p in rm.model.score.parameters():
            p.neg_()


def test_the_probe_figures_are_the_reward_models_scores_on_the_probe(rm):
    got = _callback(rm, updater=None).probe_metrics(rm, SingleProcess())
    m = binary_metrics(rm.score([r.triple for r in PROBE]), [r.label for r in PROBE])
    assert got == {"val/rm_probe_accuracy": m.accuracy, "val/rm_probe_auroc": m.auroc}
    assert 0 < m.auroc < 1 and m.auroc != 0.5  # a random model: flipping it shows below


def test_an_updated_reward_model_is_scored_again_a_frozen_one_once(rm):
    updated, frozen = _callback(rm, updater=object()), _callback(rm, updater=None)
    first = updated.measure(0)["val/rm_probe_auroc"]
    assert frozen.measure(0)["val/rm_probe_auroc"] == first
    _flip(rm)  # what an update could do to the figures, at the extreme
    assert math.isclose(updated.measure(25)["val/rm_probe_auroc"], 1 - first)
    # a frozen model is scored once (its weights do not move in training): the flip goes unseen
    assert frozen.measure(25)["val/rm_probe_auroc"] == first
