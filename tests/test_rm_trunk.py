"""The frozen-layer cache gives the logits and gradients of the full model."""

from __future__ import annotations

import pytest
import torch

from cooper.rm.model import RewardModel
from cooper.rm.trunk import FrozenTrunk, unsupported
from cooper.types import Triple

TRIPLES = [Triple("What is 3+4?", "7", "3+4=7. " * n + "#### 7") for n in (1, 4, 9)]


@pytest.fixture
def rm(tiny_models):
    torch.manual_seed(0)
    rm = RewardModel.load(tiny_models.reward, max_length=256)
    rm.train_top_layers(1)
    return rm


def test_cached_logits_and_gradients_equal_the_full_model(rm):
    ids = [rm.encode(t) for t in TRIPLES]  # different lengths: right padding is exercised
    trunk = FrozenTrunk(rm, 1)
    states = trunk.states(ids, batch_size=2)
    assert [s.shape[0] for s in states] == [len(i) for i in ids]
    rm.model.eval()
    full = rm.logits_of_ids(ids)
    full.sum().backward()
    full_grads = {n: p.grad.clone() for n, p in rm.model.named_parameters() if p.requires_grad}
    rm.model.zero_grad(set_to_none=True)
    cached = trunk.logits(states)
    cached.sum().backward()
    assert cached.detach().tolist() == pytest.approx(full.detach().tolist(), abs=1e-5)
    assert full_grads  # the top layer, final norm and score head
    for name, grad in full_grads.items():
        assert torch.allclose(dict(rm.model.named_parameters())[name].grad, grad, atol=1e-5), name
    assert trunk.agrees(ids, states) < 1e-5
    # the layer list is restored after each call
    assert len(rm.model.base_model.layers) == 2


def test_when_the_cache_is_not_used(rm):
    assert unsupported(rm, None, 100) == "every layer is trained"
    assert unsupported(rm, 2, 100) == "no layer is frozen"
    assert "GiB" in unsupported(rm, 1, 10**12)
    assert unsupported(rm, 1, 100) is None
    rm.model.config.attention_dropout = 0.1
    assert "dropout" in unsupported(rm, 1, 100)
