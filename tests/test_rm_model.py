"""The reward model: scoring order, padding, saving/loading, freezing, safetensors only."""

from __future__ import annotations

import json
import random

import pytest
import torch

from cooper.errors import UserError
from cooper.rm.model import RewardModel
from cooper.rm.template import SPEC_FILE, TEMPLATE_VERSION
from cooper.types import Triple

TRIPLES = [Triple(f"What is {i}+{i}?", str(2 * i), "We add. " * (i % 5) + f"It is {2 * i}.")
           for i in range(11)]


@pytest.fixture(scope="module")
def rm(tiny_models):
    return RewardModel.load(tiny_models.reward, max_length=256)


def test_scores_are_probabilities_in_input_order_whatever_the_batching(rm):
    sorted_scores = rm.score(TRIPLES, batch_size=4)
    assert all(0 < s < 1 for s in sorted_scores)
    assert len(set(sorted_scores)) > 1
    naive = rm.score(TRIPLES, batch_size=4, sort_by_length=False)
    one_by_one = [rm.score([t])[0] for t in TRIPLES]
    # padding and batch composition change only float rounding
    assert naive == pytest.approx(sorted_scores, abs=1e-5)
    assert one_by_one == pytest.approx(sorted_scores, abs=1e-5)


def test_identical_inputs_are_run_once_and_scored_alike(rm):
    # a policy's group repeats itself: each distinct input goes through the model once
    texts = [TRIPLES[i % 3] for i in (0, 1, 0, 2, 1, 0, 2)]
    rows: list[int] = []
    hook = rm.model.register_forward_pre_hook(
        lambda module, args, kwargs: rows.append(len(kwargs["input_ids"])), with_kwargs=True)
    try:
        with rm.full_forwards():  # whole sequences through rm.model, where the hook counts them
            scores = rm.score(texts, batch_size=2)
    finally:
        hook.remove()
    assert sum(rows) == 3  # not 7
    alone = [rm.score([TRIPLES[i]])[0] for i in range(3)]
    assert scores == pytest.approx([alone[i % 3] for i in (0, 1, 0, 2, 1, 0, 2)], abs=1e-5)


def test_the_score_is_read_at_the_last_real_token(rm):
    # right padding: the shortest triple in a batch with a long one scores as it does alone
    short, long = Triple("q", "1", "a"), Triple("q", "1", "b" * 150)
    alone = rm.score([short])[0]
    assert rm.score([short, long], batch_size=2)[0] == pytest.approx(alone, abs=1e-5)
    assert rm.tokenizer.padding_side == "right"
    assert rm.model.config.pad_token_id == rm.tokenizer.pad_token_id


def test_logits_carry_gradients_and_score_does_not(rm):
    logits = rm.logits(TRIPLES[:3])
    assert logits.shape == (3,) and logits.requires_grad
    assert torch.sigmoid(logits).tolist() == pytest.approx(rm.score(TRIPLES[:3]), abs=1e-5)


def test_save_and_load_reproduce_scores_and_lengths(rm, tmp_path):
    out = rm.save(tmp_path / "rm")
    spec = json.loads((out / SPEC_FILE).read_text())
    assert spec["template_version"] == TEMPLATE_VERSION and spec["max_length"] == 256
    assert (out / "model.safetensors").is_file()
    again = RewardModel.load(out)
    assert again.spec == rm.spec
    assert again.score(TRIPLES) == pytest.approx(rm.score(TRIPLES), abs=1e-6)


def test_a_model_from_another_template_version_is_refused(rm, tmp_path):
    out = rm.save(tmp_path / "old")
    spec = json.loads((out / SPEC_FILE).read_text())
    (out / SPEC_FILE).write_text(json.dumps({**spec, "template_version": 0}))
    with pytest.raises(UserError, match="template version 0"):
        RewardModel.load(out)


def test_pickled_weights_are_refused(tiny_models, tmp_path):
    folder = tmp_path / "pickled"
    folder.mkdir()
    for f in tiny_models.reward.iterdir():
        if f.suffix != ".safetensors":
            (folder / f.name).write_bytes(f.read_bytes())
    model = RewardModel.load(tiny_models.reward).model
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    with pytest.raises(Exception, match="safetensors"):
        RewardModel.load(folder)


def test_training_only_the_top_layers_freezes_the_rest(tiny_models):
    rm = RewardModel.load(tiny_models.reward)
    total = rm.train_top_layers(None)
    top = rm.train_top_layers(1)
    trainable = {n for n, p in rm.model.named_parameters() if p.requires_grad}
    assert 0 < top < total
    assert trainable and all(n.startswith(("model.layers.1.", "model.norm", "score"))
                             for n in trainable)
    assert "score.weight" in trainable
    with pytest.raises(UserError, match="between 1 and 2"):
        rm.train_top_layers(3)


def test_batch_size_must_be_positive(rm):
    with pytest.raises(UserError, match="batch_size"):
        rm.score(TRIPLES, batch_size=0)


def test_random_order_round_trip(rm):
    order = list(range(len(TRIPLES)))
    random.Random(1).shuffle(order)
    shuffled = rm.score([TRIPLES[i] for i in order], batch_size=3)
    base = rm.score(TRIPLES, batch_size=3)
    assert shuffled == pytest.approx([base[i] for i in order], abs=1e-5)
