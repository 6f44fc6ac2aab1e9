"""The frozen lower layers of the reward model, run once per triple instead of once per epoch.

Training only the top K decoder layers (``cooper rm train --train-layers K``) freezes the
embeddings and the N-K layers below them. In the supported model families those layers have no
dropout, so the hidden states entering layer N-K are a fixed function of the input:
:class:`FrozenTrunk` computes them once and every epoch (and every held-out evaluation) runs
only the top K layers on them. An epoch then costs about K/N of a forward pass plus the
backward pass instead of a whole forward pass; on a CPU that is what makes several epochs of
the embedded model fit in minutes (ours, an optimisation with the same result).

The top pass reuses the base model's own forward with its layer list cut to the top K for the
duration of the call, so attention masks and rotary embeddings are built exactly as usual.
This needs a base model of the ``embed_tokens -> layers -> norm`` shape with a ``score`` head
whose forward does not rescale ``inputs_embeds`` (Llama, SmolLM, Qwen2/3, Mistral, ...);
:func:`unsupported` says why another model is not handled, and training then runs full forward
passes. The first batch is also computed both ways and must agree before the cache is used.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from cooper.rm.model import RewardModel, progress_bar

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

DEFAULT_MAX_CACHE_BYTES = 4 << 30
# forward passes that scale inputs_embeds themselves (Gemma multiplies by sqrt(hidden_size))
_RESCALING_FAMILIES = ("gemma",)


def unsupported(rm: RewardModel, k: int | None, total_tokens: int,
                max_bytes: int = DEFAULT_MAX_CACHE_BYTES) -> str | None:
    """Why the frozen layers of ``rm`` cannot be cached for training the top ``k``; None if they can."""
    import torch

    model, base = rm.model, rm.model.base_model
    config = model.config.get_text_config()
    if k is None:
        return "every layer is trained"
    if not isinstance(getattr(base, "layers", None), torch.nn.ModuleList) or \
            not hasattr(base, "norm") or not hasattr(model, "score"):
        return f"{type(model).__name__} is not an embed -> layers -> norm -> score stack"
    if k >= len(base.layers):
        return "no layer is frozen"
    if config.model_type.startswith(_RESCALING_FAMILIES):
        return f"{config.model_type} rescales its input embeddings"
    dropouts = {name: getattr(config, name) for name in ("attention_dropout", "hidden_dropout",
                                                         "resid_pdrop", "embd_pdrop")
                if getattr(config, name, 0)}
    if dropouts:
        return f"the frozen layers use dropout ({dropouts})"
    size = total_tokens * config.hidden_size * torch.finfo(model.dtype).bits // 8
    if size > max_bytes:
        return f"the cache would take {size / 2**30:.1f} GiB (limit {max_bytes / 2**30:.1f} GiB)"
    return None


class FrozenTrunk:
    """Hidden states after the frozen layers, and logits computed from them."""

    def __init__(self, rm: RewardModel, k: int):
        self.rm, self.base = rm, rm.model.base_model
        self.split = len(self.base.layers) - k  # index of the first trained layer

    @contextlib.contextmanager
    def _cut(self, lo: int, hi: int, *, norm: bool) -> Iterator[None]:
        """Run the base model with only layers ``lo:hi`` (and the final norm if ``norm``)."""
        import torch

        base = self.base
        layers, final_norm = base.layers, base.norm
        base.layers = torch.nn.ModuleList(list(layers)[lo:hi])
        if not norm:
            base.norm = torch.nn.Identity()
        try:
            yield
        finally:
            base.layers, base.norm = layers, final_norm

    def states(self, ids: Sequence[list[int]], *, batch_size: int = 16,
               progress: bool = False) -> list[torch.Tensor]:
        """The hidden states entering the first trained layer, one [L_i, H] per input."""
        import torch

        out: list[torch.Tensor | None] = [None] * len(ids)
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        bar = progress_bar(len(ids), "frozen layers", progress)
        was_training = self.rm.model.training
        self.rm.model.eval()
        # no_grad, not inference_mode: these tensors are inputs of later backward passes
        with torch.no_grad(), self._cut(0, self.split, norm=False), self.rm.autocast():
            for k in range(0, len(order), batch_size):
                idx = order[k:k + batch_size]
                batch = self.rm._batch([ids[i] for i in idx])
                hidden = self.base(**batch, use_cache=False).last_hidden_state  # [B, L, H]
                for j, i in enumerate(idx):
                    out[i] = hidden[j, :len(ids[i])].clone()  # [L_i, H]
                bar.update(len(idx))
        bar.close()
        self.rm.model.train(was_training)
        return out  # type: ignore[return-value]

    def logits(self, states: Sequence[torch.Tensor]) -> torch.Tensor:
        """Raw logits [B] from cached states: the top layers, final norm and score head."""
        import torch

        width = max(len(s) for s in states)
        hidden = states[0].new_zeros((len(states), width, states[0].shape[-1]))  # [B, L, H]
        mask = torch.zeros((len(states), width), dtype=torch.long, device=hidden.device)  # [B, L]
        for i, s in enumerate(states):  # right padding, as RewardModel pads
            hidden[i, :len(s)] = s
            mask[i, :len(s)] = 1
        with self._cut(self.split, len(self.base.layers), norm=True), self.rm.autocast():
            top = self.base(inputs_embeds=hidden, attention_mask=mask,
                            use_cache=False).last_hidden_state  # [B, L, H]
            last = mask.sum(dim=1) - 1  # [B] index of each row's last real token
            scores = self.rm.model.score(top[torch.arange(len(states)), last])  # [B, 1]
        return scores[:, 0].float()  # [B]

    def agrees(self, ids: Sequence[list[int]], states: Sequence[torch.Tensor]) -> float:
        """Largest logit difference between the cached path and the full model on ``ids``."""
        import torch

        was_training = self.rm.model.training
        self.rm.model.eval()
        with torch.no_grad():
            diff = (self.logits(states) - self.rm.logits_of_ids(ids)).abs().max().item()
        self.rm.model.train(was_training)
        return diff
