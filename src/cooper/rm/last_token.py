"""The reward model's last decoder layer, run for the one token the score head reads.

The score is read from the last real token of each sequence, after the final norm. In a causal
model the last layer's output at every other position feeds nothing: no later layer reads it.
Only its keys and values are needed, at every position, since the last token attends to them.
:func:`last_layer_at` therefore runs the last layer's norm and key and value projections over the
whole sequence, and its query, attention, output projection and MLP at the last token alone.
Its output there is the full layer's, up to float rounding; so are the gradients of every
trained weight, since the skipped outputs carry none. In the embedded reward model's layer (576
wide, MLP 1536, 3 key-value heads) the keys and values are about 6% of a token's arithmetic;
``cooper bench train`` times both ways (ours, an optimisation with the same result.
transformers runs a layer over all the positions it is given; its own last-token shortcut,
``logits_to_keep``, cuts only the head after the last layer).

It is written for the Llama layer (Llama, SmolLM, Mistral, Qwen2), the families the frozen-layer
cache is used with: :func:`supported` says why another layer is not, and callers then run the
whole layer. Callers also compare the result with the full model before they use it
(:meth:`cooper.rm.trunk.FrozenTrunk.agreement`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# model types whose decoder layer is the Llama layer: pre-norm attention with rotary
# embeddings on q and k (no q/k norm), then a pre-norm MLP, each added to the residual
_LLAMA_LAYER = ("llama", "mistral", "qwen2")
_PARTS = ("input_layernorm", "post_attention_layernorm", "mlp", "self_attn")
_ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj", "head_dim", "scaling")


def supported(base: torch.nn.Module, width: int) -> str | None:
    """Why :func:`last_layer_at` cannot stand in for the last layer of ``base`` on sequences of
    ``width`` tokens; None if it can."""
    config = base.config
    if config.model_type not in _LLAMA_LAYER:
        return f"{config.model_type} is not a Llama-layer model"
    layer = base.layers[-1]
    attn = getattr(layer, "self_attn", None)
    if not all(hasattr(layer, p) for p in _PARTS) or not all(hasattr(attn, a) for a in _ATTENTION) \
            or not hasattr(base, "rotary_emb") or hasattr(attn, "q_norm"):
        return f"{type(layer).__name__} is not laid out as a Llama layer"
    window = getattr(config, "sliding_window", None)
    if window and getattr(config, "use_sliding_window", True) and width > window:
        return f"sequences of {width} tokens exceed the sliding window of {window}"
    return None


def last_layer_at(base: torch.nn.Module, hidden: torch.Tensor, last: torch.Tensor
                  ) -> torch.Tensor:
    """The output [B, H] of ``base``'s last decoder layer at position ``last[b]`` of each row,
    from the hidden states ``hidden`` [B, L, H] entering it. Rows are right-padded: position
    ``last[b]`` is row b's last real token, so every position up to it is real."""
    import torch
    import torch.nn.functional as F
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    layer = base.layers[-1]
    attn = layer.self_attn
    b, width, _ = hidden.shape
    rows = torch.arange(b, device=hidden.device)  # [B]
    positions = torch.arange(width, device=hidden.device).expand(b, width)  # [B, L]
    cos, sin = base.rotary_emb(hidden, positions)  # [B, L, D] each, D the head size
    normed = layer.input_layernorm(hidden)  # [B, L, H]
    heads = (b, -1, attn.head_dim)
    # the query of the last token only; the keys and values of every position
    q = attn.q_proj(normed[rows, last]).view(heads)[:, :, None]  # [B, Hq, 1, D]
    k = attn.k_proj(normed).view(b, width, -1, attn.head_dim).transpose(1, 2)  # [B, Hkv, L, D]
    v = attn.v_proj(normed).view(b, width, -1, attn.head_dim).transpose(1, 2)  # [B, Hkv, L, D]
    q, _ = apply_rotary_pos_emb(q, q, cos[rows, last][:, None], sin[rows, last][:, None])
    k, _ = apply_rotary_pos_emb(k, k, cos, sin)
    causal = positions <= last[:, None]  # [B, L] keys the last token may see
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=causal[:, None, None], scale=attn.scaling,
        enable_gqa=q.shape[1] != k.shape[1])  # [B, Hq, 1, D]
    x = hidden[rows, last] + attn.o_proj(out.reshape(b, -1))  # [B, H]
    return x + layer.mlp(layer.post_attention_layernorm(x))  # [B, H]
