"""VerifyRM's input: the template a triple is rendered into, and the token budget.

The reward model reads one text built from a (question, reference answer, completion) triple
(``docs/method.md`` "VerifyRM: the reward model")::

    <question>{question}</question>
    <reference_answer>{reference}</reference_answer>
    <completion>{completion}</completion>

tokenized without a chat template. Three rules make the input safe and reproducible:

* **Escaping** (``docs/method.md`` "VerifyRM: the reward model"): a ``<`` that would start one of
  the template's tags inside a field (any case, with or without ``/`` and spaces) is written
  ``&lt;``, and a literal ``&lt;`` / ``&amp;`` in the text has its ``&`` written ``&amp;`` so the
  escaping can be undone exactly. Nothing else changes (``x < 5`` stays as it is). A field therefore
  never contains a tag, so a completion can neither close its field nor open a fake reference.
  Special-token strings in a field (``<|im_end|>``) are tokenized as plain text, so a completion
  cannot end the sequence early or pose as padding either.
* **Character truncation**: a field over 1500 characters keeps its first 500 and last 1000
  characters (the released code's rule), joined by ``\\n...\\n`` (the marker is ours).
* **Token budget** (ours): when the rendered text is still longer than ``max_length`` tokens,
  fields are cut in the middle (a third kept from the head, two thirds from the tail), the
  completion last and never below half the budget. The completion's final tokens, where its
  answer is, are always kept.

**The released format.** A reward model trained elsewhere, such as the paper's released VerifyRM,
read the same template filled in as is: no escaping, no character or field cut of ours, the
tokenizer's defaults (its special tokens added, special-token strings in the text read as special
tokens, truncation to ``max_length`` from the right). :func:`render_released` reproduces that
text; :class:`InputSpec` says which of the two renderings a model reads (``template``).

Everything here is pure Python on strings and token-id lists; the tokenizer and the model that
reads the result are in :mod:`cooper.rm.model`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from cooper.errors import UserError
from cooper.types import Triple

# Bumped whenever rendering changes in a way that changes token ids: a saved reward model
# records the version it was trained with, and loading it under another version is refused.
TEMPLATE_VERSION = 1
TAGS = ("question", "reference_answer", "completion")
FIELD_MAX_CHARS, HEAD_CHARS, TAIL_CHARS = 1500, 500, 1000  # released code's truncation
DEFAULT_MAX_LENGTH = 1024  # tokens (ours): GSM8K triples are ~200-450 tokens
CUT_MARKER = "\n...\n"
SPEC_FILE = "cooper_rm.json"  # the InputSpec, written beside a saved model's weights
COOPER, RELEASED = "cooper", "released"  # InputSpec.template: ours, or the released format
TEMPLATES = (COOPER, RELEASED)


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
    """:func:`render`, with where each field's content lies (the token budget needs it)."""
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
    """The text the reward model reads for a triple (``docs/method.md``'s template, escaped)."""
    return render_with_spans(triple, **truncation).text


def render_released(triple: Triple) -> str:
    """The text a model in the released format reads: the template filled in as is.

    Faithful to what the released weights were trained on, so **nothing is escaped**: a
    completion that writes ``</completion>``, ``<reference_answer>41</reference_answer>`` or a
    special-token string such as ``<|im_end|>`` puts that text, or that special token, into the
    model's input, and can show it a second, fake reference (the attack :func:`escape_field`
    stops in our format). Nor is any field cut here: the tokenizer truncates the whole text to
    ``max_length`` tokens from the right, as the release's ``tokenizer(text, truncation=True)``
    did, which can cut a long completion's final answer; the head-and-tail character cut of
    :func:`head_tail` is not applied either (the release's joiner is not known). Train a model
    in our format (``cooper rm train``) where completions may be adversarial.
    """
    return (f"<question>{triple.question}</question>\n"
            f"<reference_answer>{triple.reference}</reference_answer>\n"
            f"<completion>{triple.completion}</completion>")


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
    """rendering version the model was trained with (:data:`TEMPLATE_VERSION`); it versions
    our format only (``template`` ``cooper``)"""
    max_length: int = DEFAULT_MAX_LENGTH
    """token budget of the whole rendered text (ours); in the released format, where the
    tokenizer truncates the text from the right"""
    field_max_chars: int = FIELD_MAX_CHARS
    """a field longer than this many characters is cut to its head and tail (our format)"""
    head_chars: int = HEAD_CHARS
    """characters kept from the start of a cut field (our format)"""
    tail_chars: int = TAIL_CHARS
    """characters kept from the end of a cut field (our format)"""
    template: str = COOPER
    """``cooper``: :func:`render_with_spans` (escaped, cut, fitted to the budget); ``released``:
    :func:`render_released` with the tokenizer's defaults (a model trained elsewhere)"""

    def __post_init__(self) -> None:
        if self.template not in TEMPLATES:
            raise UserError(f"template must be one of {', '.join(TEMPLATES)}, "
                            f"got {self.template!r}")
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


def mark_as_ours(folder: str | os.PathLike) -> None:
    """Give an untrained sequence classifier of ours a minimal ``cooper_rm.json`` (our template,
    no budget or temperature yet) unless it has one: a folder without the file that holds a
    one-label classifier is read in the released VerifyRM format (:mod:`cooper.rm.model`)."""
    from cooper.infra.files import write_json

    path = Path(folder) / SPEC_FILE
    if not path.is_file():
        write_json(path, {"template": COOPER, "template_version": TEMPLATE_VERSION})
