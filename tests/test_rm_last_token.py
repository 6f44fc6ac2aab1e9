"""The last decoder layer run at the last token gives the full layer's output and gradients."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    LlamaConfig,
    LlamaForSequenceClassification,
    Qwen2Config,
    Qwen2ForSequenceClassification,
)

import cooper.rm.trunk as trunk_module
from cooper.rm.last_token import last_layer_at, supported
from cooper.rm.model import RewardModel
from cooper.rm.trunk import FrozenTrunk
from cooper.types import Triple

LENGTHS = (5, 11, 8)  # right padding up to 11


def _model(kind: str) -> torch.nn.Module:
    torch.manual_seed(0)
    shape = dict(vocab_size=50, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                 max_position_embeddings=64, num_labels=1, pad_token_id=0)
    if kind == "llama":
        return LlamaForSequenceClassification(LlamaConfig(**shape, num_attention_heads=4,
                                                          num_key_value_heads=4))
    if kind == "llama-gqa":  # 4 query heads share 2 key-value heads, as in the embedded model
        return LlamaForSequenceClassification(LlamaConfig(**shape, num_attention_heads=4,
                                                          num_key_value_heads=2))
    return Qwen2ForSequenceClassification(  # biases on q, k and v
        Qwen2Config(**shape, num_attention_heads=4, num_key_value_heads=2))


def _batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    ids = torch.zeros((len(LENGTHS), max(LENGTHS)), dtype=torch.long)  # [B, L]
    mask = torch.zeros_like(ids)
    for r, n in enumerate(LENGTHS):
        ids[r, :n] = torch.randint(1, 50, (n,), generator=g)
        mask[r, :n] = 1
    return ids, mask, torch.tensor(LENGTHS) - 1


@pytest.mark.parametrize("kind", ["llama", "llama-gqa", "qwen2"])
def test_the_last_token_output_and_gradients_are_the_full_layers(kind):
    model = _model(kind)
    base = model.base_model
    assert supported(base, max(LENGTHS)) is None
    ids, mask, last = _batch()
    rows = torch.arange(len(LENGTHS))
    out = base(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    entering = out.hidden_states[-2].detach()  # [B, L, H] the input of the last layer
    # the full path: the whole last layer, the final norm, then the last token read
    full = base.layers[-1](entering, attention_mask=None, position_embeddings=base.rotary_emb(
        entering, torch.arange(entering.shape[1])[None].expand(len(rows), -1)),
        position_ids=None)
    # right padding with a causal mask: the padded keys sit after every row's last token, so
    # the layer without a mask is exact at the positions read
    full = base.norm(full[rows, last])  # [B, H]
    assert torch.allclose(full, out.last_hidden_state[rows, last], atol=1e-5)
    weights = [p for p in base.layers[-1].parameters()]
    full_grads = torch.autograd.grad(model.score(full).sum(), weights)
    short = base.norm(last_layer_at(base, entering, last))  # [B, H]
    assert torch.allclose(short, full, atol=1e-5)
    short_grads = torch.autograd.grad(model.score(short).sum(), weights)
    for w, a, b in zip(weights, full_grads, short_grads, strict=True):
        assert torch.allclose(a, b, atol=1e-5), w.shape
    # a row's padding is not read: changing it changes nothing
    noisy = entering.clone()
    noisy[0, LENGTHS[0]:] = 100.0
    with torch.no_grad():
        assert torch.allclose(last_layer_at(base, noisy, last)[0],
                              last_layer_at(base, entering, last)[0], atol=1e-6)


def test_the_layers_it_does_not_stand_in_for():
    base = _model("llama").base_model
    base.config.model_type = "gemma"
    assert "not a Llama-layer model" in supported(base, 8)
    base = _model("llama").base_model
    base.layers[-1].self_attn.q_norm = torch.nn.Identity()  # Qwen3 normalises q and k
    assert "not laid out as a Llama layer" in supported(base, 8)
    base = _model("qwen2").base_model
    base.config.use_sliding_window, base.config.sliding_window = True, 8
    assert supported(base, 8) is None
    assert "sliding window of 8" in supported(base, 9)


def test_the_trunk_uses_it_and_falls_back_to_the_whole_layer(tiny_models, monkeypatch):
    torch.manual_seed(0)
    rm = RewardModel.load(tiny_models.reward, max_length=256)
    rm.train_top_layers(1)
    ids = [rm.encode(Triple("What is 3+4?", "7", "3+4=7. " * n + "#### 7")) for n in (1, 5)]
    trunk = FrozenTrunk(rm, 1)
    states = trunk.states(ids)
    calls = []
    real = trunk_module.last_layer_at
    monkeypatch.setattr(trunk_module, "last_layer_at",
                        lambda *a: calls.append(1) or real(*a))
    short = trunk.logits(states)
    assert calls  # the embedded model's family takes the short path
    whole = FrozenTrunk(rm, 1, last_token=False).logits(states)
    assert len(calls) == 1  # the fallback ran the whole layer
    assert torch.allclose(short, whole, atol=1e-5)
    with torch.no_grad():
        assert torch.allclose(whole, rm.full_logits(ids), atol=1e-5)
