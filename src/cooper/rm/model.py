"""VerifyRM: the reference-based reward model, its input template, scoring and pairwise update.

The reward model reads one text built from a (question, reference answer, completion) triple
(``method.md``, Part 1)::

    <question>{question}</question>
    <reference_answer>{reference}</reference_answer>
    <completion>{completion}</completion>

tokenized without a chat template, and returns one logit; the reward is ``sigmoid(logit)``.

Three rules make the input safe and reproducible:

* **Escaping** (``method.md``, "Known weaknesses"): a ``<`` that would start one of the template's
  tags inside a field (any case, with or without ``/`` and spaces) is written ``&lt;``, and a
  literal ``&lt;`` / ``&amp;`` in the text has its ``&`` written ``&amp;`` so the escaping can be
  undone exactly. Nothing else changes (``x < 5`` stays as it is). A field therefore never
  contains a tag, so a completion can neither close its field nor open a fake reference.
  Special-token strings in a field (``<|im_end|>``) are tokenized as plain text, so a completion
  cannot end the sequence early or pose as padding either.
* **Character truncation**: a field over 1500 characters keeps its first 500 and last 1000
  characters (the released code's rule), joined by ``\\n...\\n`` (the marker is ours).
* **Token budget** (ours): when the rendered text is still longer than ``max_length`` tokens,
  fields are cut in the middle (a third kept from the head, two thirds from the tail), the
  completion last and never below half the budget. The completion's final tokens, where its
  answer is, are always kept.

The score is read at the last token of the text (the ``>`` of ``</completion>``): sequences are
padded on the right, as TRL's reward trainer does, and the transformers classifier pools the
rightmost token that is not padding. Right padding also keeps position ids natural and leaves
no fully masked attention rows.

How the model learns, by BCE on labelled triples or by Cooper's pairwise update, is in
:mod:`cooper.rm_training`.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cooper.errors import UserError
from cooper.infra.models import DEFAULT_MODEL
from cooper.types import Triple

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)

# Bumped whenever rendering changes in a way that changes token ids: a saved reward model
# records the version it was trained with, and loading it under another version is refused.
TEMPLATE_VERSION = 1
TAGS = ("question", "reference_answer", "completion")
FIELD_MAX_CHARS, HEAD_CHARS, TAIL_CHARS = 1500, 500, 1000  # released code's truncation
DEFAULT_MAX_LENGTH = 1024  # tokens (ours): GSM8K triples are ~200-450 tokens
CUT_MARKER = "\n...\n"
SPEC_FILE = "cooper_rm.json"




# ------------------------------------------------------------------ escaping and rendering

_TAG_START = re.compile(r"<(?=\s*/?\s*(?:question|reference_answer|completion)\b)", re.I)
_ENTITY_AMP = re.compile(r"&(?=(?:lt|amp);)")
_ENTITY = re.compile(r"&(lt|amp);")


def escape_field(text: str) -> str:
    """Neutralise every tag-like ``<`` of a field; invertible with :func:`unescape_field`."""
    # '&' first: escaping '<' writes '&lt;', whose '&' must not be escaped again.
    return _TAG_START.sub("&lt;", _ENTITY_AMP.sub("&amp;", text))


def unescape_field(text: str) -> str:
    """Undo :func:`escape_field` (one left-to-right pass, so ``&amp;lt;`` gives ``&lt;``)."""
    return _ENTITY.sub(lambda m: "<" if m[1] == "lt" else "&", text)


def head_tail(text: str, max_chars: int = FIELD_MAX_CHARS, head: int = HEAD_CHARS,
              tail: int = TAIL_CHARS) -> str:
    """Keep the first ``head`` and last ``tail`` characters of a text over ``max_chars``."""
    if len(text) <= max_chars:
        return text
    return text[:head] + CUT_MARKER + text[len(text) - tail:]


@dataclass(frozen=True)
class Rendered:
    """The rendered text and the character span of each field's (escaped) content."""

    text: str
    spans: dict[str, tuple[int, int]]


def render_with_spans(triple: Triple, *, max_chars: int = FIELD_MAX_CHARS,
                      head: int = HEAD_CHARS, tail: int = TAIL_CHARS) -> Rendered:
    parts: list[str] = []
    spans: dict[str, tuple[int, int]] = {}
    pos = 0
    for i, (tag, value) in enumerate(zip(TAGS, (triple.question, triple.reference,
                                                triple.completion), strict=True)):
        # truncate before escaping so a cut can never split an '&lt;' entity
        body = escape_field(head_tail(value, max_chars, head, tail))
        opening = ("\n" if i else "") + f"<{tag}>"
        parts += [opening, body, f"</{tag}>"]
        start = pos + len(opening)
        spans[tag] = (start, start + len(body))
        pos = start + len(body) + len(tag) + 3
    return Rendered("".join(parts), spans)


def render(triple: Triple, **truncation: int) -> str:
    """The text the reward model reads for a triple (``method.md`` template, escaped)."""
    return render_with_spans(triple, **truncation).text


_RENDERED = re.compile(r"<question>(.*)</question>\n<reference_answer>(.*)</reference_answer>"
                       r"\n<completion>(.*)</completion>", re.S)


def parse_rendered(text: str) -> Triple:
    """Read a rendered text back into its triple: the inverse of :func:`render`."""
    m = _RENDERED.fullmatch(text)
    if not m:
        raise ValueError("not a rendered reward-model input")
    fields_ = [m[1], m[2], m[3]]
    for f in fields_:
        # escaped fields hold no tag at all, so each field is delimited by exactly its tags
        if _TAG_START.search(f):
            raise ValueError("a field contains an unescaped tag")
    return Triple(*map(unescape_field, fields_))


# ------------------------------------------------------------------ token budget

@dataclass(frozen=True)
class InputSpec:
    """How triples become token ids; saved with a model so scoring reproduces training."""

    template_version: int = TEMPLATE_VERSION
    max_length: int = DEFAULT_MAX_LENGTH  # tokens, the whole rendered text
    field_max_chars: int = FIELD_MAX_CHARS
    head_chars: int = HEAD_CHARS
    tail_chars: int = TAIL_CHARS

    def __post_init__(self) -> None:
        if self.max_length < 32:
            raise UserError(f"max_length must be at least 32 tokens, got {self.max_length}")
        if not 0 < self.head_chars + self.tail_chars <= self.field_max_chars:
            raise UserError("head_chars + tail_chars must be positive and at most "
                            f"field_max_chars ({self.head_chars} + {self.tail_chars} > "
                            f"{self.field_max_chars})")


def _allocate(budget: int, lq: int, lr: int, lc: int) -> tuple[int, int, int]:
    """Tokens kept per field (question, reference, completion) within ``budget``.

    The completion gets what the others leave, and at least half the budget; then the
    reference gets what the question leaves, and at least half of the rest.
    """
    c = min(lc, max(budget - lq - lr, budget // 2))
    rest = budget - c
    r = min(lr, max(rest - lq, rest // 2))
    q = min(lq, rest - r)
    return q, r, c


def _cut_middle(ids: list[int], keep: int, marker: list[int]) -> list[int]:
    """``keep`` tokens of ``ids``: a third from the head, the rest (the end) from the tail."""
    if keep >= len(ids):
        return ids
    if keep <= len(marker) + 2:
        return ids[len(ids) - keep:] if keep > 0 else []
    room = keep - len(marker)
    head = room // 3
    return ids[:head] + marker + ids[len(ids) - (room - head):]


def fit_to_budget(ids: list[int], offsets: list[tuple[int, int]], rendered: Rendered,
                  max_length: int, marker: list[int]) -> list[int]:
    """Shorten token ids to ``max_length`` by cutting field middles; the completion's end stays.

    ``offsets`` are each token's character span in ``rendered.text``; a token belongs to a
    field when it lies inside the field's span. Tokens outside every field (the tags, a BOS
    token) are always kept.
    """
    if len(ids) <= max_length:
        return ids
    bounds = []
    for tag in TAGS:
        a, b = rendered.spans[tag]
        inside = [i for i, (s, e) in enumerate(offsets) if a <= s and e <= b and e > s]
        bounds.append((inside[0], inside[-1] + 1) if inside else (None, None))
    lengths = [(j - i) if i is not None else 0 for i, j in bounds]
    fixed = len(ids) - sum(lengths)
    budget = max_length - fixed
    if budget < 8:
        raise UserError(f"max_length {max_length} leaves {budget} tokens for the fields after "
                        f"the template's {fixed}; raise max_length")
    keeps = _allocate(budget, *lengths)
    out: list[int] = []
    pos = 0
    for (i, j), keep in zip(bounds, keeps, strict=True):
        if i is None:
            continue
        out += ids[pos:i] + _cut_middle(ids[i:j], keep, marker)
        pos = j
    return out + ids[pos:]


# ------------------------------------------------------------------ the reward model

def _decoder_layers(model: PreTrainedModel) -> torch.nn.ModuleList:
    import torch

    n = model.config.get_text_config().num_hidden_layers
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == n:
            return module
    raise UserError(f"cannot find the {n} decoder layers of {type(model).__name__}; "
                    "train all layers instead (leave train_layers unset)")


class RewardModel:
    """A one-logit sequence classifier with its tokenizer and input spec.

    Build it with :meth:`load` from any causal LM checkpoint (a fresh score head) or from a
    folder written by :meth:`save`.
    """

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                 spec: InputSpec | None = None):
        if tokenizer.pad_token_id is None:
            raise UserError("the tokenizer has no pad token; set one (e.g. the EOS token)")
        # the classifier pools the rightmost non-pad token, so it must know the pad id
        model.config.pad_token_id = tokenizer.pad_token_id
        tokenizer.padding_side = "right"
        self.model, self.tokenizer, self.spec = model, tokenizer, spec or InputSpec()
        self._marker = tokenizer(CUT_MARKER, add_special_tokens=False,
                                 split_special_tokens=True)["input_ids"]

    @classmethod
    def load(cls, name_or_path: str | os.PathLike = DEFAULT_MODEL, *,
             trust_remote_code: bool = False, max_length: int | None = None,
             dtype: str | None = None) -> RewardModel:
        """From a saved reward model or any causal LM checkpoint (weights from safetensors only).

        ``max_length`` overrides the saved spec's token budget (a model trained with another
        budget then sees inputs cut differently; a warning says so).
        """
        from cooper.infra.models import load_sequence_classifier, load_tokenizer, resolve

        path = resolve(name_or_path)
        spec = InputSpec()
        spec_path = path / SPEC_FILE
        if spec_path.is_file():
            saved = json.loads(spec_path.read_text())
            version = saved.get("template_version")
            if version != TEMPLATE_VERSION:
                raise UserError(
                    f"{path} was trained with template version {version}, this cooper-rl renders "
                    f"version {TEMPLATE_VERSION}; retrain it, or use the cooper-rl release "
                    "it was trained with")
            known = {f.name for f in fields(InputSpec)}
            spec = InputSpec(**{k: v for k, v in saved.items() if k in known})
            if max_length is not None and max_length != spec.max_length:
                log.warning("%s was trained with max_length %d; scoring with %d", path,
                            spec.max_length, max_length)
        if max_length is not None:
            spec = InputSpec(**{**asdict(spec), "max_length": max_length})
        model = load_sequence_classifier(path, trust_remote_code=trust_remote_code, dtype=dtype,
                                         use_safetensors=True)
        tokenizer = load_tokenizer(path, trust_remote_code=trust_remote_code,
                                   padding_side="right")
        model.eval()
        return cls(model, tokenizer, spec)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def encode(self, triple: Triple) -> list[int]:
        """Token ids of a triple: rendered, escaped, truncated to ``spec.max_length``."""
        s = self.spec
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

    def logits_of_ids(self, ids: Sequence[list[int]]) -> torch.Tensor:
        """Raw logits [N] of encoded inputs, with grad when grad is enabled."""
        out = self.model(**self._batch(ids))
        return out.logits[:, 0].float()  # [N]

    def logits(self, triples: Sequence[Triple]) -> torch.Tensor:
        """Raw logits [N] (grad enabled: this is the training path)."""
        if not triples:
            raise ValueError("logits() needs at least one triple")
        return self.logits_of_ids([self.encode(t) for t in triples])

    def score(self, triples: Sequence[Triple], *, batch_size: int = 16,
              sort_by_length: bool = True, progress: bool = False) -> list[float]:
        """Rewards ``sigmoid(logit)`` in input order; batches hold similar lengths."""
        import torch

        if batch_size < 1:
            raise UserError(f"batch_size must be at least 1, got {batch_size}")
        encoded = [self.encode(t) for t in triples]
        order = list(range(len(encoded)))
        if sort_by_length:  # longest first: padding stays small and memory peaks show early
            order.sort(key=lambda i: -len(encoded[i]))
        scores = [0.0] * len(encoded)
        was_training = self.model.training
        self.model.eval()
        bar = progress_bar(len(encoded), "scoring", progress)
        try:
            with torch.inference_mode():
                for k in range(0, len(order), batch_size):
                    idx = order[k:k + batch_size]
                    probs = torch.sigmoid(self.logits_of_ids([encoded[i] for i in idx]))
                    for i, p in zip(idx, probs.tolist(), strict=True):
                        scores[i] = p
                    bar.update(len(idx))
        finally:
            bar.close()
            self.model.train(was_training)
        return scores

    def train_top_layers(self, k: int | None) -> int:
        """Train only the top ``k`` decoder layers (+ final norm and score head); None: all.

        Freezing the embeddings and lower layers makes the backward pass stop early, which is
        what makes training the embedded model on a CPU take minutes instead of an hour (ours;
        the paper trains every layer). Returns the number of trainable parameters.
        """
        import torch

        if k is None:
            for p in self.model.parameters():
                p.requires_grad_(True)
        else:
            layers = _decoder_layers(self.model)
            if not 1 <= k <= len(layers):
                raise UserError(f"train_layers must be between 1 and {len(layers)}, got {k}")
            frozen = {id(p) for layer in layers[:len(layers) - k] for p in layer.parameters()}
            for m in self.model.modules():
                if isinstance(m, torch.nn.Embedding):  # token (and learned position) tables
                    frozen |= {id(p) for p in m.parameters()}
            for p in self.model.parameters():
                p.requires_grad_(id(p) not in frozen)
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def save(self, out_dir: str | os.PathLike, *, extra: dict[str, Any] | None = None) -> Path:
        """Write safetensors weights, the tokenizer and :data:`SPEC_FILE` to ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(out)
        self.tokenizer.save_pretrained(out)
        (out / SPEC_FILE).write_text(json.dumps({**asdict(self.spec), **(extra or {})},
                                                indent=2) + "\n")
        return out


class _NoBar:
    """Stands in for a tqdm bar when progress is off."""

    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(total: int, desc: str, enabled: bool):
    if not enabled:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="seq", dynamic_ncols=True)
