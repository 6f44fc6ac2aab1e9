"""VerifyRM: a one-logit sequence classifier that scores (question, reference, completion) triples.

A triple is rendered by :mod:`cooper.rm.template` (escaped, truncated, fitted to the token
budget) and the model returns one logit; the reward is ``sigmoid(logit)``
(``docs/method.md`` "VerifyRM: the reward model").

The score is read at the last token of the text (the ``>`` of ``</completion>``): sequences are
padded on the right, as TRL's reward trainer does, and the transformers classifier pools the
rightmost token that is not padding. Right padding also keeps position ids natural and leaves
no fully masked attention rows.

**Temperature.** :meth:`RewardModel.score` returns ``sigmoid(logit / T)``. ``T`` is 1 unless
``cooper rm calibrate`` fitted one on held-out labelled triples (:mod:`cooper.rm.calibration`)
and wrote it as ``temperature`` into the folder's ``cooper_rm.json``; dividing by a positive
``T`` changes no ranking, only how far scores sit from 0.5, so the probability that
``hacking/gap`` and the validation metrics read means "P(correct)". Training and the pairwise
update work on raw logits; :func:`cooper.rm.training.train_bce` resets ``T`` to 1, since the
fitted value belongs to the weights it was fitted on.

**Bring your own VerifyRM.** A folder with no ``cooper_rm.json`` that holds a one-label
``AutoModelForSequenceClassification`` (its ``config.json`` says so), such as the paper's released
VerifyRM, is read in the released format (:func:`cooper.rm.template.render_released`: the template
unescaped, the tokenizer's defaults, truncation to ``max_length``) with temperature 1, and
:meth:`RewardModel.load` logs one warning saying so. Any other folder without the file (a causal
LM checkpoint) gets a fresh score head and our format. :meth:`RewardModel.save` records the format
in the spec file, so a released model trained further here reloads the same way.

How the model learns is in :mod:`cooper.rm.training` (BCE on labelled triples) and
:mod:`cooper.rm.update` (Cooper's pairwise update); the losses are in :mod:`cooper.rm.losses`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import asdict, replace
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cooper.errors import UserError
from cooper.infra.files import write_json
from cooper.infra.models import (
    DEFAULT_MODEL,
    load_sequence_classifier,
    load_tokenizer,
    resolve,
)
from cooper.rm.calibration import apply_temperature
from cooper.rm.layers import train_top_layers
from cooper.rm.memo import LogitMemo
from cooper.rm.prefix import PrefixGroup, batch_order, plan_groups, prefix_logits
from cooper.rm.spec import check_temperature, is_plain_classifier, read_spec, released_notice
from cooper.rm.template import (
    CUT_MARKER,
    RELEASED,
    SPEC_FILE,
    InputSpec,
    fit_to_budget,
    render_released,
    render_with_spans,
)
from cooper.types import Triple

if TYPE_CHECKING:
    import torch
    from tqdm import tqdm
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)


def progress_bar(total: int, desc: str, enabled: bool) -> tqdm:
    """A tqdm bar over ``total`` sequences; when not ``enabled``, a silent one (tqdm's own)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="seq", dynamic_ncols=True, disable=not enabled)


# inputs the first shared-prefix batch is also run in full for (RewardModel.logits_of_ids)
CHECK_INPUTS = 8


def agreement_tolerance(dtype: torch.dtype, scale: float = 0.0, noise: float = 0.0) -> float:
    """Largest logit difference accepted between a faster path (frozen layers cached, a shared
    prefix run once) and the full model: largest |logit| ``scale``, moving by ``noise`` alone.

    Both paths do the same arithmetic in another order, so they may differ by what the
    precision moves the full model by: 4 times ``noise``, measured on the inputs checked, with
    floors where those few move less: 1e-3 in float32 (all of this under 3e-5 there), in half
    precision 16 rounding steps at ``scale`` (1.0 at a bfloat16 logit of 8-16), at least 5e-2.
    bfloat16, 240 rows of the demo's reward model: the full model rebatched moved by up to 0.35,
    kept states 0.47, shared prefixes 0.59; a frozen layer changed by 30% moved them 0.75-14."""
    import torch

    if not (math.isfinite(scale) and math.isfinite(noise)):
        return 0.0  # a non-finite logit agrees with nothing (and log2(inf) would raise)
    if dtype.itemsize >= 4:
        floor = 1e-3
    else:
        step = torch.finfo(dtype).eps * 2.0 ** math.floor(math.log2(scale)) if scale > 0 else 0
        floor = max(5e-2, 16 * step)
    return max(floor, 4 * noise)


class RewardModel:
    """A one-logit sequence classifier with its tokenizer and input spec.

    Build it with :meth:`load` from any causal LM checkpoint (a fresh score head), from a
    folder written by :meth:`save`, or from a plain one-label sequence classifier such as the
    released VerifyRM (read in the released format).
    """

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                 spec: InputSpec | None = None, *, temperature: float = 1.0,
                 spec_extra: dict[str, Any] | None = None):
        if tokenizer.pad_token_id is None:
            raise UserError("the tokenizer has no pad token; set one (e.g. the EOS token)")
        # the classifier pools the rightmost non-pad token, so it must know the pad id
        model.config.pad_token_id = tokenizer.pad_token_id
        tokenizer.padding_side = "right"
        self.model, self.tokenizer, self.spec = model, tokenizer, spec or InputSpec()
        self.temperature = check_temperature(temperature)
        # other keys of the spec file (the base model's name, ...), written back by save()
        self.spec_extra = dict(spec_extra or {})
        self._marker = tokenizer(CUT_MARKER, add_special_tokens=False,
                                 split_special_tokens=True)["input_ids"]
        # shared prefixes run once (logits_of_ids): None until the first such batch is checked
        self.share_prefixes: bool | None = None
        self._full = 0  # open full_forwards() blocks

    @classmethod
    def load(cls, name_or_path: str | os.PathLike = DEFAULT_MODEL, *,
             trust_remote_code: bool = False, max_length: int | None = None,
             dtype: str | None = None) -> RewardModel:
        """From a saved reward model, a plain one-label sequence classifier (the released
        format, module docstring) or any causal LM checkpoint (weights from safetensors only).

        ``max_length`` overrides the saved spec's token budget (a model trained with another
        budget then sees inputs cut differently; a warning says so).
        """
        path = resolve(name_or_path)
        temperature, extra = 1.0, {}
        spec_path = path / SPEC_FILE
        released = False
        if spec_path.is_file():
            spec, temperature, extra = read_spec(spec_path, max_length)
        elif is_plain_classifier(path):
            spec, released = InputSpec(template=RELEASED), True
        else:
            spec = InputSpec()
        if max_length is not None:
            spec = replace(spec, max_length=max_length)
        if released:
            log.warning("%s", released_notice(path, spec.max_length))
        model = load_sequence_classifier(path, trust_remote_code=trust_remote_code, dtype=dtype,
                                         use_safetensors=True)
        tokenizer = load_tokenizer(path, trust_remote_code=trust_remote_code,
                                   padding_side="right")
        model.eval()
        return cls(model, tokenizer, spec, temperature=temperature, spec_extra=extra)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def encode(self, triple: Triple) -> list[int]:
        """Token ids of a triple: rendered, escaped, truncated to ``spec.max_length``.

        In the released format (``spec.template == "released"``): the unescaped template,
        tokenized with the tokenizer's defaults and truncated to ``spec.max_length`` tokens, as
        the released model was trained (:func:`cooper.rm.template.render_released`).
        """
        s = self.spec
        if s.template == RELEASED:
            ids = self.tokenizer(render_released(triple), truncation=True,
                                 max_length=s.max_length)["input_ids"]
        else:
            rendered = render_with_spans(triple, max_chars=s.field_max_chars, head=s.head_chars,
                                         tail=s.tail_chars)
            enc = self.tokenizer(rendered.text, return_offsets_mapping=True,
                                 split_special_tokens=True)
            ids = fit_to_budget(enc["input_ids"], enc["offset_mapping"], rendered, s.max_length,
                                self._marker)
        # A tokenizer that appends EOS where EOS is also the pad token: the classifier pools the
        # rightmost non-pad token, so that EOS is never read; dropping it keeps the pooled
        # token the last one, as cooper.rm.trunk assumes, and changes no score.
        while len(ids) > 1 and ids[-1] == self.tokenizer.pad_token_id:
            ids.pop()
        return ids

    def _batch(self, ids: Sequence[list[int]]) -> dict[str, torch.Tensor]:
        import torch

        width = max(map(len, ids))
        pad = self.tokenizer.pad_token_id
        input_ids = torch.full((len(ids), width), pad, dtype=torch.long)  # [B, L]
        mask = torch.zeros((len(ids), width), dtype=torch.long)  # [B, L]
        for i, row in enumerate(ids):  # right padding: the last real token is the scored one
            input_ids[i, :len(row)] = torch.tensor(row)
            mask[i, :len(row)] = 1
        return {"input_ids": input_ids.to(self.device), "attention_mask": mask.to(self.device)}

    def autocast(self):
        """Run the forward in the model's low precision when it has any low-precision weights.

        After :meth:`keep_trainable_in_float32` the frozen layers stay in bfloat16 and the
        trained ones are float32: autocast computes both in bfloat16 (mixed precision), so the
        float32 copies only serve the optimiser, as master weights do.
        """
        import torch

        low = next((p.dtype for p in self.model.parameters()
                    if p.dtype in (torch.bfloat16, torch.float16)), None)
        if low is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=low)

    def keep_trainable_in_float32(self) -> int:
        """Cast the trainable weights to float32; returns how many tensors were cast.

        An AdamW step is about the learning rate (1e-5 for Cooper), below half a bfloat16
        rounding step for any weight with |w| > ~4e-3: stepped in bfloat16, most weights would
        never move. The optimiser therefore steps float32 weights, and the forward autocasts.
        """
        import torch

        cast = 0
        for p in self.model.parameters():
            if p.requires_grad and p.dtype in (torch.bfloat16, torch.float16):
                p.data = p.data.float()
                cast += 1
        return cast

    def logits_of_ids(self, ids: Sequence[list[int]]) -> torch.Tensor:
        """Raw logits [N] of encoded inputs, with grad when grad is enabled.

        Inputs that share a prefix (the samples of one prompt) run it once
        (:mod:`cooper.rm.prefix`), unless :meth:`full_forwards` is open or the first such batch
        disagreed with full forwards (:attr:`share_prefixes`).
        """
        import torch

        groups = plan_groups(ids) if self.sharing_prefixes else []
        shared = [g for g in groups if g.prefix]
        if not shared or not self.prefixes_agree(ids, shared):
            return self.full_logits(ids)
        alone = [g.members[0] for g in groups if not g.prefix]
        with self.autocast():
            parts = [prefix_logits(self.model, ids, shared, self.tokenizer.pad_token_id)]  # [S]
        if alone:
            parts.append(self.full_logits([ids[i] for i in alone]))  # [N - S]
        where = torch.tensor([m for g in shared for m in g.members] + alone)  # [N]
        out = torch.cat(parts)  # [N] in the order of `where`
        return out[torch.argsort(where).to(out.device)]  # [N] in input order

    def full_logits(self, ids: Sequence[list[int]]) -> torch.Tensor:
        """Raw logits [N] of whole sequences, right-padded into one batch."""
        with self.autocast():
            out = self.model(**self._batch(ids))
        return out.logits[:, 0].float()  # [N]

    def tolerance(self, ids: Sequence[list[int]], full: torch.Tensor) -> float:
        """:func:`agreement_tolerance` for a faster path checked on ``ids`` (full logits as one
        batch: ``full`` [N]); the noise: how far each input alone moves from them, no grad."""
        import torch

        with torch.no_grad():
            noise = (torch.cat([self.full_logits([i]) for i in ids]) - full).abs().max().item()
        return agreement_tolerance(self.model.dtype, full.abs().max().item(), noise)

    @property
    def sharing_prefixes(self) -> bool:
        """Shared prefixes run once now: not switched off by :meth:`full_forwards`, nor for good
        by a check that disagreed (:meth:`prefixes_agree`)."""
        return self.share_prefixes is not False and self._full == 0

    def prefixes_agree(self, ids: Sequence[list[int]], shared: list[PrefixGroup]) -> bool:
        """Whether shared prefixes may run once: decided on the first call, by comparing the
        first groups (about :data:`CHECK_INPUTS` inputs) with full forwards; sharing is kept
        only if they agree within :func:`agreement_tolerance`, and a model whose cache or masks
        behave otherwise (attention that is not causal, say) runs full forwards for good."""
        if self.share_prefixes is None:
            self._check_prefix_sharing(ids, shared)
        return bool(self.share_prefixes)  # None: undecided (non-finite logits), not this time

    def _check_prefix_sharing(self, ids: Sequence[list[int]], shared: list[PrefixGroup]) -> None:
        import torch

        shared = [g for g, seen in zip(shared, accumulate(len(g.members) for g in shared),
                                       strict=True) if seen - len(g.members) < CHECK_INPUTS]
        members = [m for g in shared for m in g.members]
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                with self.autocast():
                    fast = prefix_logits(self.model, ids, shared, self.tokenizer.pad_token_id)
                full = self.full_logits([ids[m] for m in members])
            diff = (fast - full).abs().max().item()
            tolerance = self.tolerance([ids[m] for m in members], full)
            reason = (f"they differ by {diff:.2g}, tolerance {tolerance:.2g}"
                      if diff > tolerance else None)
        except Exception as e:  # noqa: BLE001 - any failure means: do not use the fast path
            diff, reason = 0.0, f"{type(e).__name__}: {e}"
        finally:
            self.model.train(was_training)
        if not math.isfinite(diff):  # a non-finite model decides nothing: ask again next time
            return
        self.share_prefixes = reason is None
        if reason is not None:
            log.warning("reward model: scoring shared prefixes once does not reproduce full "
                        "forward passes (%s); running full forward passes (the same scores, "
                        "slower)", reason)

    @contextlib.contextmanager
    def full_forwards(self) -> Iterator[None]:
        """While open, every forward runs whole sequences through the model's own forward (what
        forward hooks such as :class:`cooper.rm.trunk.StepStates` rely on)."""
        self._full += 1
        try:
            yield
        finally:
            self._full -= 1

    def logits(self, triples: Sequence[Triple]) -> torch.Tensor:
        """Raw logits [N] (grad enabled: this is the training path)."""
        if not triples:
            raise ValueError("logits() needs at least one triple")
        return self.logits_of_ids([self.encode(t) for t in triples])

    def score(self, triples: Sequence[Triple], *, batch_size: int = 16,
              sort_by_length: bool = True, progress: bool = False,
              memo: LogitMemo | None = None) -> list[float]:
        """Rewards ``sigmoid(logit / temperature)`` in input order (module docstring)."""
        return apply_temperature(self.raw_logits(
            triples, batch_size=batch_size, sort_by_length=sort_by_length, progress=progress,
            memo=memo), self.temperature)

    def raw_logits(self, triples: Sequence[Triple], *, batch_size: int = 16,
                   sort_by_length: bool = True, progress: bool = False,
                   memo: LogitMemo | None = None) -> list[float]:
        """Logits before the temperature, in input order, without grad.

        Identical inputs are run once: a policy's group of samples often repeats itself (about
        half of a 16-sample group of the CPU testbed's policy are repeats, more once it
        converges), and the model is a function of the tokens. With ``sort_by_length`` the
        batches hold the samples of one prompt together (their shared prefix runs once,
        :meth:`logits_of_ids`) and the other inputs longest first (little padding, and memory
        peaks show early). A ``memo`` (only for weights that do not change) answers the inputs it
        has seen and keeps the new ones.
        """
        import torch

        if batch_size < 1:
            raise UserError(f"batch_size must be at least 1, got {batch_size}")
        slot: dict[tuple[int, ...], int] = {}  # token ids -> index among the distinct inputs
        where = [slot.setdefault(tuple(self.encode(t)), len(slot)) for t in triples]
        encoded = [list(ids) for ids in slot]
        out: list[float | None] = [None] * len(encoded)
        if memo is not None:
            out = [memo.get(ids) for ids in encoded]
        todo = [i for i, x in enumerate(out) if x is None]
        was_training = self.model.training
        self.model.eval()
        bar = progress_bar(len(todo), "scoring", progress)
        try:
            with torch.inference_mode():
                for idx in self._batches(encoded, todo, batch_size, sort_by_length):
                    logits = self.logits_of_ids([encoded[i] for i in idx])  # [B]
                    for i, x in zip(idx, logits.tolist(), strict=True):
                        out[i] = x
                        if memo is not None:
                            memo.put(encoded[i], x)
                    bar.update(len(idx))
        finally:
            bar.close()
            self.model.train(was_training)
        return [out[i] for i in where]  # type: ignore[misc]

    def _batches(self, encoded: Sequence[list[int]], todo: list[int], batch_size: int,
                 sort: bool) -> list[list[int]]:
        """The order :meth:`raw_logits` runs ``todo`` in, cut into batches."""
        if not sort:
            return [todo[k:k + batch_size] for k in range(0, len(todo), batch_size)]
        if not self.sharing_prefixes:
            ordered = sorted(todo, key=lambda i: -len(encoded[i]))
            return [ordered[k:k + batch_size] for k in range(0, len(ordered), batch_size)]
        return [[todo[j] for j in batch]
                for batch in batch_order([encoded[i] for i in todo], batch_size)]

    def train_top_layers(self, k: int | None) -> int:
        """Train only the top ``k`` decoder layers (+ final norm and score head); None: all.

        Freezing the embeddings and lower layers makes the backward pass stop early, which is
        what makes training the embedded model on a CPU take minutes instead of an hour (ours;
        the paper trains every layer). Returns the number of trainable parameters.
        """
        return train_top_layers(self.model, k)

    def save(self, out_dir: str | os.PathLike, *, extra: dict[str, Any] | None = None) -> Path:
        """Write safetensors weights, the tokenizer and :data:`SPEC_FILE` to ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(out)
        self.tokenizer.save_pretrained(out)
        self.save_spec(out, extra=extra)
        return out

    def save_spec(self, out_dir: str | os.PathLike, *, extra: dict[str, Any] | None = None) -> Path:
        """Write only :data:`SPEC_FILE` (the input spec, the temperature, the other keys it
        was loaded with, then ``extra``), atomically; the weights are left as they are."""
        path = Path(out_dir) / SPEC_FILE
        data = {**asdict(self.spec), "temperature": self.temperature, **self.spec_extra,
                **(extra or {})}
        write_json(path, data)
        return path
