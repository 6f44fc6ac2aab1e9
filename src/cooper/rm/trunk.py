"""The frozen lower layers of the reward model, run once per triple instead of once per epoch.

Training only the top K decoder layers (``cooper rm train --train-layers K``) freezes the
embeddings and the N-K layers below them. In the supported model families those layers have no
dropout, so the hidden states entering layer N-K are a fixed function of the input:
:class:`FrozenTrunk` computes them once and every epoch (and every held-out evaluation) runs
only the top K layers on them. An epoch then costs about K/N of a forward pass plus the
backward pass instead of a whole forward pass; on a CPU that is what makes several epochs of
the embedded model fit in minutes (ours, an optimisation with the same result).

The top pass reuses the base model's own forward with its layer list cut to the top K for the
duration of the call, so attention masks and rotary embeddings are built exactly as usual; in
the Llama layer's families it cuts to the top K-1 and runs the last layer at the scored token
alone (:mod:`cooper.rm.last_token`).
This needs a base model of the ``embed_tokens -> layers -> norm`` shape with a ``score`` head
whose forward does not rescale ``inputs_embeds`` (Llama, SmolLM, Qwen2/3, Mistral, ...);
:func:`unsupported` says why another model is not handled, and training then runs full forward
passes. The first batch is also computed both ways and must agree before the cache is used.

:class:`StepStates` applies the same idea to Cooper's online update (``rm_update.train_layers``):
the step's scoring pass has just run the frozen layers on every rollout, so the update keeps
their output instead of running them again, and :class:`KeptStates` to scoring the same
triples again with a reward model whose top layers changed.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from cooper.rm.calibration import apply_temperature
from cooper.rm.last_token import last_layer_at, supported
from cooper.rm.model import RewardModel, progress_bar
from cooper.rm.prefix import batch_order, plan_groups, prefix_states

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

DEFAULT_MAX_CACHE_BYTES = 4 << 30
# what StepStates keeps of one RL step's scoring pass at most; inputs beyond it are recomputed
DEFAULT_STEP_CACHE_BYTES = 1 << 30
# forward passes that scale inputs_embeds themselves (Gemma multiplies by sqrt(hidden_size))
_RESCALING_FAMILIES = ("gemma",)


def trained_top_layers(rm: RewardModel) -> int | None:
    """K when every trainable weight of ``rm`` lies in its top K decoder layers, the final norm
    or the score head (as :meth:`RewardModel.train_top_layers` leaves it); None otherwise (every
    layer trained, no trainable weight, or a model not of the ``layers`` shape)."""
    import torch

    model = rm.model
    layers = getattr(model.base_model, "layers", None)
    if not isinstance(layers, torch.nn.ModuleList) or not hasattr(model.base_model, "norm") \
            or not hasattr(model, "score"):
        return None
    trained = [i for i, layer in enumerate(layers)
               if any(p.requires_grad for p in layer.parameters())]
    if not trained:
        return None
    allowed = {id(p) for m in (*layers[trained[0]:], model.base_model.norm, model.score)
               for p in m.parameters()}
    if any(p.requires_grad and id(p) not in allowed for p in model.parameters()):
        return None
    return len(layers) - trained[0]


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

    def __init__(self, rm: RewardModel, k: int, *, last_token: bool = True):
        self.rm, self.base = rm, rm.model.base_model
        self.split = len(self.base.layers) - k  # index of the first trained layer
        # the last layer run at the scored token alone where it can be (cooper.rm.last_token)
        self.last_token = last_token

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
        """The hidden states entering the first trained layer, one [L_i, H] per input.

        Inputs that share a prefix (several completions of one question) run it once
        (:func:`cooper.rm.prefix.prefix_states`), as the reward model's scoring does."""
        import torch

        rm = self.rm
        out: list[torch.Tensor | None] = [None] * len(ids)
        if rm.sharing_prefixes:
            batches = batch_order(ids, batch_size)
        else:
            order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
            batches = [order[k:k + batch_size] for k in range(0, len(order), batch_size)]
        bar = progress_bar(len(ids), "frozen layers", progress)
        was_training = rm.model.training
        rm.model.eval()
        # no_grad, not inference_mode: these tensors are inputs of later backward passes
        with torch.no_grad(), self._cut(0, self.split, norm=False), rm.autocast():
            for idx in batches:
                batch = [ids[i] for i in idx]
                groups = plan_groups(batch) if rm.sharing_prefixes else []
                shared = [g for g in groups if g.prefix]
                if shared and rm.prefixes_agree(batch, shared):
                    members = [m for g in shared for m in g.members]
                    for m, state in zip(members, prefix_states(
                            self.base, batch, shared, rm.tokenizer.pad_token_id), strict=True):
                        out[idx[m]] = state.clone()  # [L_i, H], not a view of the batch
                    alone = [g.members[0] for g in groups if not g.prefix]
                else:
                    alone = list(range(len(batch)))
                if alone:
                    hidden = self.base(**rm._batch([batch[j] for j in alone]),
                                       use_cache=False).last_hidden_state  # [B, L, H]
                    for r, j in enumerate(alone):
                        out[idx[j]] = hidden[r, :len(batch[j])].clone()  # [L_i, H]
                bar.update(len(idx))
        bar.close()
        rm.model.train(was_training)
        return out  # type: ignore[return-value]

    def logits(self, states: Sequence[torch.Tensor]) -> torch.Tensor:
        """Raw logits [B] from cached states: the top layers, final norm and score head (the
        last layer at each row's last token alone, :mod:`cooper.rm.last_token`, where it can)."""
        import torch

        width = max(len(s) for s in states)
        hidden = states[0].new_zeros((len(states), width, states[0].shape[-1]))  # [B, L, H]
        mask = torch.zeros((len(states), width), dtype=torch.long, device=hidden.device)  # [B, L]
        for i, s in enumerate(states):  # right padding, as RewardModel pads
            hidden[i, :len(s)] = s
            mask[i, :len(s)] = 1
        last = mask.sum(dim=1) - 1  # [B] index of each row's last real token
        n = len(self.base.layers)
        with self.rm.autocast():
            if self.last_token and supported(self.base, width) is None:
                if n - 1 > self.split:
                    with self._cut(self.split, n - 1, norm=False):
                        hidden = self.base(inputs_embeds=hidden, attention_mask=mask,
                                           use_cache=False).last_hidden_state  # [B, L, H]
                pooled = self.base.norm(last_layer_at(self.base, hidden, last))  # [B, H]
            else:
                with self._cut(self.split, n, norm=True):
                    top = self.base(inputs_embeds=hidden, attention_mask=mask,
                                    use_cache=False).last_hidden_state  # [B, L, H]
                pooled = top[torch.arange(len(states)), last]  # [B, H]
            scores = self.rm.model.score(pooled)  # [B, 1]
        return scores[:, 0].float()  # [B]

    def agrees(self, ids: Sequence[list[int]], states: Sequence[torch.Tensor]) -> float:
        """Largest logit difference between the cached path and the full model on ``ids``."""
        return self.agreement(ids, states)[0]

    def agreement(self, ids: Sequence[list[int]], states: Sequence[torch.Tensor]
                  ) -> tuple[float, float]:
        """(:meth:`agrees`, the tolerance for it: :meth:`~cooper.rm.model.RewardModel.tolerance`,
        from how far the full model itself moves on ``ids``)."""
        import torch

        was_training = self.rm.model.training
        self.rm.model.eval()
        try:
            with torch.no_grad():
                full = self.rm.full_logits(ids)  # [N]
                diff = (self.logits(states) - full).abs().max().item()
                tolerance = self.rm.tolerance(ids, full)
        finally:
            self.rm.model.train(was_training)
        return diff, tolerance


class StepStates:
    """The frozen layers' output from an RL step's scoring pass, reused by the step's update.

    Why: with ``rm_update.train_layers=K`` Cooper's pairwise update trains only the top K
    layers, and the hidden states entering them are a fixed function of the input (the layers
    below are frozen and have no dropout). The step has just computed them for every rollout
    when it scored the rollouts, and every pair's positive, and each rollout negative, is such a
    rollout. While :meth:`keeping` is open, every forward of the reward model keeps them, keyed
    by the input's token ids (forward hooks: the scoring pass itself is unchanged, bit for bit);
    :meth:`logits` then runs only the top K layers, forward and backward, on them: the logits and
    gradients of a full forward, for K/N of its forward cost (ours, an optimisation with the
    same result; the paper trains every layer, so it does not apply there). Inputs that were not
    scored (an assistant's negatives, another process's rollouts) have their frozen layers run
    once without grad, which is what the full forward does for them too, and are kept for the
    update's later epochs.

    At most ``max_bytes`` are kept; the rest are recomputed when needed. Each scoring pass
    starts empty and :meth:`clear` empties it after the update, so states live for one step.
    The first use compares the cached path with the full model, as :func:`cooper.rm.training`
    does, and falls back to full forward passes for good if they disagree.
    """

    def __init__(self, rm: RewardModel, k: int, max_bytes: int = DEFAULT_STEP_CACHE_BYTES):
        self.trunk, self.max_bytes = FrozenTrunk(rm, k), max_bytes
        self._states: dict[tuple[int, ...], torch.Tensor] = {}  # token ids -> [L, H]
        self.bytes = 0
        self.agrees: bool | None = None  # None until the first use has been checked
        self.reused = self.computed = 0  # inputs taken from scoring / whose frozen layers ran

    def __len__(self) -> int:
        return len(self._states)

    def clear(self) -> None:
        self._states.clear()
        self.bytes = 0

    def _keep(self, key: tuple[int, ...], state: torch.Tensor) -> None:
        size = state.numel() * state.element_size()
        if key not in self._states and self.bytes + size <= self.max_bytes:
            self._states[key] = state.clone()  # [L, H], not a view that keeps the whole batch
            self.bytes += size

    @contextlib.contextmanager
    def keeping(self) -> Iterator[None]:
        """Keep the states entering the first trained layer of every reward-model forward."""
        self.clear()
        if self.agrees is False:
            yield
            return
        rm, base, split = self.trunk.rm, self.trunk.base, self.trunk.split
        inputs: list[tuple[torch.Tensor, torch.Tensor | None]] = []  # this forward's ids, mask

        def take_inputs(module, args, kwargs) -> None:
            inputs[:] = [(kwargs["input_ids"], kwargs.get("attention_mask"))] \
                if kwargs.get("input_ids") is not None else []

        def take_states(module, args, kwargs) -> None:
            hidden = args[0] if args else kwargs["hidden_states"]  # [B, L, H]
            if not inputs:
                return
            ids, mask = inputs.pop()  # [B, L], [B, L]
            lengths = mask.sum(dim=1).tolist() if mask is not None else [ids.shape[1]] * len(ids)
            for i, (row, n) in enumerate(zip(ids.tolist(), lengths, strict=True)):
                self._keep(tuple(row[:n]), hidden[i, :n])  # right padding: [L_i, H]

        handles = [rm.model.register_forward_pre_hook(take_inputs, with_kwargs=True),
                   base.layers[split].register_forward_pre_hook(take_states, with_kwargs=True)]
        try:
            with rm.full_forwards():  # the hooks read whole sequences through rm.model's forward
                yield
        finally:
            for h in handles:
                h.remove()

    def logits(self, ids: Sequence[list[int]]) -> torch.Tensor:
        """Raw logits [B] of encoded inputs, with grad through the trained layers only."""
        keys = [tuple(i) for i in ids]
        states = {k: self._states[k] for k in keys if k in self._states}
        self.reused += sum(k in states for k in keys)
        missing = [k for k in dict.fromkeys(keys) if k not in states]
        if missing:
            self.computed += len(missing)
            for key, state in zip(missing, self.trunk.states([list(k) for k in missing]),
                                  strict=True):
                states[key] = state
                self._keep(key, state)
        ordered = [states[k] for k in keys]  # [L_i, H] each
        if self.agrees is None:
            diff, tolerance = self.trunk.agreement(ids, ordered)
            if math.isfinite(diff):  # a non-finite model (a skipped update) decides nothing
                self.agrees = diff <= tolerance
                if not self.agrees:
                    log.warning("reward-model update: the frozen-layer cache disagrees with the "
                                "full model by %.2g (tolerance %.2g); running full forward "
                                "passes instead", diff, tolerance)
                    self.clear()
        if not self.agrees:
            return self.trunk.rm.logits_of_ids(ids)
        return self.trunk.logits(ordered)


class KeptStates:
    """Scores triples with the frozen layers' output kept per input, so that a later version of
    the reward model whose frozen layers are the same (only its top K layers, norm and score
    head changed, as Cooper's update with ``rm_update.train_layers=K`` leaves it) is scored on
    the same triples for the top K layers alone.

    Why: ``cooper demo`` checks its reward model on the robustness suite and the held-out real
    completions before Cooper's stage and again after it; the second check ran the 20 frozen
    layers again on inputs they had already seen (ours, an optimisation with the same result).
    Every call compares the cached path with the full model on a few inputs first, which also
    catches a model whose frozen layers differ from the ones the states came from; where they
    disagree, or the cache is unsupported, it scores with full forward passes.
    """

    def __init__(self, k: int, *, check: int = 4, max_bytes: int = DEFAULT_MAX_CACHE_BYTES):
        self.k, self.check, self.max_bytes = k, check, max_bytes
        self._states: dict[tuple[int, ...], torch.Tensor] = {}  # token ids -> [L, H]
        self.full_passes = 0  # calls that fell back to the full model

    def __len__(self) -> int:
        return len(self._states)

    def score(self, rm: RewardModel, triples: Sequence, *, batch_size: int = 16,
              progress: bool = False) -> list[float]:
        """``rm.score(triples)``, from kept states where they exist (computed and kept where
        not)."""
        import torch

        if not triples:
            return []
        ids = [rm.encode(t) for t in triples]
        keys = [tuple(i) for i in ids]
        missing = [k for k in dict.fromkeys(keys) if k not in self._states]
        # the bound is on everything kept, not on this call's new inputs alone
        why = unsupported(rm, self.k, sum(len(k) for k in (*self._states, *missing)),
                          self.max_bytes)
        if why is not None:
            log.info("frozen-layer states not kept (%s): full forward passes", why)
            self.full_passes += 1
            return rm.score(triples, batch_size=batch_size, progress=progress)
        trunk = FrozenTrunk(rm, self.k)
        if missing:
            for key, state in zip(missing, trunk.states([list(k) for k in missing],
                                                        batch_size=batch_size,
                                                        progress=progress), strict=True):
                self._states[key] = state
        diff, tolerance = trunk.agreement(ids[:self.check],
                                          [self._states[k] for k in keys[:self.check]])
        if not diff <= tolerance:
            log.warning("kept frozen-layer states disagree with the full model by %.2g "
                        "(tolerance %.2g; its frozen layers changed?): full forward passes",
                        diff, tolerance)
            self.full_passes += 1
            return rm.score(triples, batch_size=batch_size, progress=progress)
        distinct = list(dict.fromkeys(keys))
        order = sorted(range(len(distinct)), key=lambda i: -len(distinct[i]))  # little padding
        logit: dict[tuple[int, ...], float] = {}
        was_training = rm.model.training
        rm.model.eval()
        try:
            with torch.inference_mode():
                for b in range(0, len(order), batch_size):
                    batch = [distinct[i] for i in order[b:b + batch_size]]
                    values = trunk.logits([self._states[k] for k in batch]).tolist()  # [B]
                    logit.update(zip(batch, values, strict=True))
        finally:
            rm.model.train(was_training)
        return apply_temperature([logit[k] for k in keys], rm.temperature)
