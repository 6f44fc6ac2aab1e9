"""The frozen-layer cache gives the logits and gradients of the full model."""

from __future__ import annotations

import math

import pytest
import torch

from cooper.rm.model import RewardModel
from cooper.rm.trunk import FrozenTrunk, KeptStates, trained_top_layers, unsupported
from cooper.rm.update import PairwiseUpdater
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


# --------------------------------------------------------- the online update (rm.trunk.StepStates)

SCORED = [Triple("What is 3+4?", "7", t) for t in
          ("3+4=7. #### 7", "Add them: 3+4=7. " * 3 + "#### 7", "3+4=8. #### 8", "7-1=6. #### 6")]
WRITTEN = Triple("What is 3+4?", "7", "3+4=7, so " * 2 + "#### 9")  # never scored


def _updater(tiny_models, *, reuse: bool, epochs: int = 2) -> PairwiseUpdater:
    rm = RewardModel.load(tiny_models.reward, max_length=256)
    rm.train_top_layers(1)
    updater = PairwiseUpdater(rm, lr=1e-3, micro_batch_size=1, epochs=epochs)
    assert updater.step_states is not None
    if not reuse:
        updater.step_states = None  # every pass runs the full model
    return updater


def test_the_update_on_scoring_states_equals_the_full_model(tiny_models):
    cached, full = _updater(tiny_models, reuse=True), _updater(tiny_models, reuse=False)
    states = cached.step_states
    with cached.keeping_states():
        scores = cached.rm.score(SCORED, batch_size=3)  # two batches, right-padded
    with full.rm.full_forwards():  # as keeping runs them
        assert scores == full.rm.score(SCORED, batch_size=3)  # scoring itself is unchanged
    assert len(states) == len(SCORED) and not cached.rm.model._forward_pre_hooks
    ids = [cached.rm.encode(t) for t in SCORED]
    trunk = FrozenTrunk(cached.rm, 1)
    for kept, fresh in zip((states._states[tuple(i)] for i in ids), trunk.states(ids), strict=True):
        assert torch.allclose(kept, fresh, atol=1e-6)

    # logits and gradients from the kept states (made in inference mode) equal the full model's
    cached.rm.model.eval()
    logits = states.logits(ids)
    logits.sum().backward()
    grads = {n: p.grad.clone() for n, p in cached.rm.model.named_parameters() if p.requires_grad}
    cached.rm.model.zero_grad(set_to_none=True)
    expected = cached.rm.logits_of_ids(ids)
    expected.sum().backward()
    assert logits.tolist() == pytest.approx(expected.tolist(), abs=1e-5)
    for name, p in cached.rm.model.named_parameters():
        if p.requires_grad:
            assert torch.allclose(p.grad, grads[name], atol=1e-5), name
    cached.rm.model.zero_grad(set_to_none=True)
    assert states.agrees is True and (states.reused, states.computed) == (4, 0)

    # two epochs of pairs, one negative written by an assistant (not scored): same update
    positives, negatives = [SCORED[0], SCORED[1]], [SCORED[2], WRITTEN]
    a, b = cached.step(positives, negatives), full.step(positives, negatives)
    # four distinct inputs in batches of 2 x micro_batch_size = 2: each epoch takes their
    # logits without grad, then each batch's with grad (PairwiseUpdater._pass); WRITTEN ran once
    # (its frozen layers), then was kept: 3 + 4 in the first epoch, 4 + 4 in the second, after
    # the 4 above
    assert (states.reused, states.computed) == (4 + 3 + 4 + 4 + 4, 1)
    assert len(states) == 0  # the states belong to the step
    assert a.loss == pytest.approx(b.loss, abs=1e-6) and a.pair_acc_before == b.pair_acc_before
    assert a.grad_norm == pytest.approx(b.grad_norm, rel=1e-4) and a.changed_fraction > 0.9
    # the weights moved by about 2 x lr = 2e-3; AdamW divides each gradient by its own size, so
    # float32 rounding in a near-zero gradient can move a weight ~1e-6 differently
    for (name, p), q in zip(cached.rm.model.named_parameters(), full.rm.model.parameters(),
                            strict=True):
        assert torch.allclose(p, q, atol=1e-5), name


def test_states_are_kept_only_when_the_lower_layers_are_frozen(tiny_models):
    rm = RewardModel.load(tiny_models.reward, max_length=256)
    assert trained_top_layers(rm) is None and PairwiseUpdater(rm).step_states is None
    rm.train_top_layers(1)
    assert trained_top_layers(rm) == 1
    rm.model.base_model.embed_tokens.weight.requires_grad_(True)  # the lower pass would change
    assert trained_top_layers(rm) is None and PairwiseUpdater(rm).step_states is None


def test_the_kept_states_are_bounded(tiny_models):
    updater = _updater(tiny_models, reuse=True)
    states = updater.step_states
    states.max_bytes = 1
    with updater.keeping_states():
        updater.rm.score(SCORED)
    assert len(states) == 0  # nothing fits: the update computes them
    stats = updater.step(SCORED[:1], SCORED[2:3])
    assert stats.pairs == 1 and states.computed == 2 * 2 and states.reused == 0


# ------------------------------------------- scoring again after an update (rm.trunk.KeptStates)

def _rows_through(layer: torch.nn.Module) -> list[int]:
    """Rows of every batch that enters ``layer`` from now on."""
    rows: list[int] = []
    layer.register_forward_pre_hook(lambda m, args, kwargs: rows.append(
        (args[0] if args else kwargs["hidden_states"]).shape[0]), with_kwargs=True)
    return rows


def test_kept_states_score_an_updated_top_without_the_frozen_layers(rm):
    triples = TRIPLES + SCORED + SCORED[:2]  # repeats are scored once
    kept = KeptStates(1)
    assert kept.score(rm, triples, batch_size=2) == pytest.approx(
        rm.score(triples, batch_size=2), abs=1e-5)
    assert len(kept) == len(set(triples)) == 6  # TRIPLES[0] is SCORED[0]
    # an update of the top layer and the head, as Cooper's with rm_update.train_layers=1
    torch.manual_seed(1)
    with torch.no_grad():
        for p in [*rm.model.base_model.layers[1].parameters(), *rm.model.score.parameters()]:
            p.add_(0.05 * torch.randn_like(p))
    frozen_rows = _rows_through(rm.model.base_model.layers[0])
    again = kept.score(rm, triples, batch_size=2)
    # only the check ran them: its inputs as one batch, then each alone (the precision's noise)
    assert sum(frozen_rows) <= 2 * kept.check
    assert again == pytest.approx(rm.score(triples, batch_size=2), abs=1e-5)
    assert kept.full_passes == 0


def test_kept_states_of_other_frozen_layers_are_not_used(rm):
    kept = KeptStates(1)
    kept.score(rm, TRIPLES, batch_size=2)
    with torch.no_grad():  # a frozen layer changed: the kept states no longer hold
        for p in rm.model.base_model.layers[0].parameters():
            p.add_(0.5 * torch.randn_like(p))
    assert kept.score(rm, TRIPLES, batch_size=2) == pytest.approx(
        rm.score(TRIPLES, batch_size=2), abs=1e-5)
    assert kept.full_passes == 1
    assert KeptStates(2).score(rm, TRIPLES) == pytest.approx(rm.score(TRIPLES), abs=1e-6)
    assert KeptStates(1).score(rm, []) == []


def test_kept_states_stop_at_their_bound_counting_every_kept_input(rm):
    """A second call whose new inputs fit the bound alone, but not with what is kept already,
    scores with full passes and keeps nothing more."""
    first, second = TRIPLES[:2], [Triple("What is 2+2?", "4", "2+2=4. #### 4")]
    bytes_per_token = rm.model.config.hidden_size * 4  # float32
    kept_tokens = sum(len(rm.encode(t)) for t in first)
    kept = KeptStates(1, max_bytes=kept_tokens * bytes_per_token)
    assert kept.score(rm, first, batch_size=2) == pytest.approx(rm.score(first), abs=1e-5)
    assert kept.full_passes == 0 and len(kept) == 2
    assert len(rm.encode(second[0])) <= kept_tokens  # alone it would fit
    assert kept.score(rm, second) == pytest.approx(rm.score(second), abs=1e-5)
    assert kept.full_passes == 1 and len(kept) == 2


def test_the_agreement_tolerance_follows_what_the_precision_moves_the_full_model_by(tiny_models):
    """In bfloat16 the demo's reward model moves by up to 0.35 between a batch and another
    arrangement of the same inputs, and its faster paths by up to 0.59 (9.4 rounding steps), so
    a tolerance of 4 steps refused them at random. The tolerance is 4 times the noise measured
    on the inputs checked, with floors (float32 1e-3; bfloat16 16 rounding steps at the largest
    logit, at least 5e-2); and a changed frozen layer is still caught in bfloat16."""
    from cooper.rm.model import agreement_tolerance

    assert agreement_tolerance(torch.float32, 10.75) == 1e-3
    assert agreement_tolerance(torch.float32, 10.75, noise=1e-3) == 4e-3  # e.g. TF32 matmuls
    assert agreement_tolerance(torch.bfloat16, 10.75) == 16 * 0.0625  # 2**3 x eps 2**-7
    assert agreement_tolerance(torch.bfloat16, 20.0) == 16 * 0.125
    assert agreement_tolerance(torch.bfloat16, 1.0) == 16 * 2**-7
    assert agreement_tolerance(torch.bfloat16, 0.2) == agreement_tolerance(torch.bfloat16) == 5e-2
    assert agreement_tolerance(torch.bfloat16, 10.75, noise=0.3) == pytest.approx(1.2)
    for bad in (math.inf, math.nan):  # a non-finite logit agrees with nothing, and never raises
        assert agreement_tolerance(torch.bfloat16, bad) == 0.0
        assert agreement_tolerance(torch.float32, 1.0, noise=bad) == 0.0
    f32 = RewardModel.load(tiny_models.reward, max_length=256)
    ids = [f32.encode(t) for t in TRIPLES]
    with torch.no_grad():
        assert f32.tolerance(ids, f32.full_logits(ids)) == 1e-3  # float32 moves by ~1e-6
    bf16 = RewardModel.load(tiny_models.reward, max_length=256, dtype="bfloat16")
    with torch.no_grad():
        full = bf16.full_logits(ids)
        noise = max(abs(bf16.full_logits([i]).item() - f)
                    for i, f in zip(ids, full.tolist(), strict=True))
        assert bf16.tolerance(ids, full) == agreement_tolerance(
            torch.bfloat16, full.abs().max().item(), noise)
    torch.manual_seed(0)
    bf16.train_top_layers(1)
    kept = KeptStates(1)
    first = kept.score(bf16, TRIPLES, batch_size=2)
    assert kept.score(bf16, TRIPLES, batch_size=2) == first and kept.full_passes == 0
    with torch.no_grad():  # a frozen layer changed: caught in bfloat16 too
        for p in bf16.model.base_model.layers[0].parameters():
            p.add_(0.5 * torch.randn_like(p))
    kept.score(bf16, TRIPLES, batch_size=2)
    assert kept.full_passes == 1
