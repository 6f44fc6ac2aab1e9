"""Final-answer extraction from completions, and normalisation of reference answers.

Pure functions over text; nothing here imports math-verify, so extraction is cheap enough to run
in the training process on every completion before anything is sent to a verifier worker.

Extraction returns an :class:`AnswerSpan`, the answer's position in the completion, so callers
can rewrite the answer in place (:mod:`cooper.data.perturb` does). The rules, first match wins:

1. ``boxed``: the last balanced ``\\boxed{...}`` or ``\\fbox{...}`` (nested braces, escaped
   ``\\{``/``\\}`` ignored). Qwen2.5-Math-style prompts ask for it, so it beats everything else.
2. ``gsm8k``: the text after the last ``####`` on its line (GSM8K's worked-solution format).
3. ``answer_is``: the text after the last "answer is" / "answer:" (also "final answer is"),
   up to the end of the sentence; a ``$...$`` or ``\\(...\\)`` math span there is taken whole.
4. ``last_number`` (lenient mode only): the last number in the text (``1,234.5``, ``-3``).

``strict`` mode (the default) stops after rule 3: it is what picks Cooper's *positives*, where a
number that merely appears last in a rambling completion must not count as an answer.
``lenient`` adds rule 4, for evaluation of models that do not follow the answer format.

Hostile text is bounded: at most :data:`MAX_TRIES` candidates of a rule are tried and a
boxed answer may not exceed :data:`MAX_ANSWER_CHARS`, so a 1 MB completion of unbalanced
braces costs a few milliseconds, never quadratic time.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

Mode = Literal["strict", "lenient"]
MODES: tuple[str, ...] = ("strict", "lenient")

MAX_ANSWER_CHARS = 4096  # longer "answers" are not answers; bounds the brace scan on hostile text
MAX_TRIES = 32  # candidates of one rule tried from the end before giving up (hostile text)
MAX_PHRASE_CHARS = 300  # how far after "answer is" an answer may run


@dataclass(frozen=True)
class AnswerSpan:
    """Where the final answer sits in a completion: ``completion[start:end] == text``."""

    start: int
    end: int
    text: str
    kind: str  # "boxed" | "gsm8k" | "answer_is" | "last_number"


# ------------------------------------------------------------------ rule 1: \boxed{...}

_BOXED_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
_EMPTY_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{\s*\}")
_BRACE = re.compile(r"\\.|[{}]", re.DOTALL)  # an escaped char (skipped) or a brace


def _balanced_end(text: str, open_brace: int) -> int | None:
    """Index of the ``}`` closing the ``{`` at ``open_brace``, or None within the scan limit."""
    depth = 0
    limit = min(len(text), open_brace + MAX_ANSWER_CHARS + 2)
    for m in _BRACE.finditer(text, open_brace, limit):
        c = m.group()
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return m.start()
    return None


def find_boxed(text: str) -> AnswerSpan | None:
    """The last balanced ``\\boxed{...}``/``\\fbox{...}``; its content is the answer."""
    # Walk back over candidates with rfind instead of collecting every match: a 1 MB text made of
    # "\boxed{" repeated has 10^5 of them and only the last few matter.
    pos = len(text)
    for _ in range(MAX_TRIES):
        starts = [text.rfind(k, 0, pos) for k in ("\\boxed", "\\fbox")]
        start = max(starts)
        if start < 0:
            return None
        pos = start
        m = _BOXED_OPEN.match(text, start)
        if m is None:
            continue
        close = _balanced_end(text, m.end() - 1)
        if close is None:
            continue
        span = _stripped_span(text, m.end(), close, "boxed")
        # an empty box is the prompt's instruction echoed ("put your final answer within
        # \boxed{}"), not an answer: an earlier box may hold the real one
        if span is not None:
            return span
    return None


def _stripped_span(text: str, start: int, end: int, kind: str) -> AnswerSpan | None:
    """The span [start, end) without surrounding whitespace; None when empty."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if start >= end:
        return None
    return AnswerSpan(start, end, text[start:end], kind)


# ------------------------------------------------------------------ rule 2: #### n

def find_gsm8k(text: str) -> AnswerSpan | None:
    """The text after the last ``####``, to the end of its line."""
    marker = text.rfind("####")
    for _ in range(MAX_TRIES):
        if marker < 0:
            break
        start = marker + 4
        newline = text.find("\n", start)
        end = len(text) if newline < 0 else newline
        span = _stripped_span(text, start, min(end, start + MAX_PHRASE_CHARS), "gsm8k")
        # "#####" or a trailing period: drop sentence punctuation after the answer
        if span is not None:
            span = _trim_trailing_punct(text, span)
        if span is not None:
            return span
        marker = text.rfind("####", 0, marker)
    return None


def _trim_trailing_punct(text: str, span: AnswerSpan) -> AnswerSpan | None:
    end = span.end
    while end > span.start and text[end - 1] in ".;:!?,":
        end -= 1
    return _stripped_span(text, span.start, end, span.kind)


# ------------------------------------------------------------------ rule 3: "the answer is ..."

_ANSWER_IS = re.compile(r"\banswer\s*(?:is\s*:?|:|=)", re.IGNORECASE)
# A sentence ends at . , ; ! ? that is not between two digits (so 1,000 and 3.5 survive).
_SENTENCE_END = re.compile(r"\n|[;!?]|[.,](?!\d)")
_DECOR = "*_ \t"  # markdown bold/italic and spaces around the answer


def find_answer_is(text: str) -> AnswerSpan | None:
    """The answer after the last "answer is" / "answer:" phrase."""
    # finditer runs at C speed even on 1 MB; only the last few phrases are looked at.
    for m in reversed(list(_ANSWER_IS.finditer(text))[-MAX_TRIES:]):
        span = _phrase_answer(text, m.end())
        if span is not None:
            return span
    return None


def _phrase_answer(text: str, start: int) -> AnswerSpan | None:
    limit = min(len(text), start + MAX_PHRASE_CHARS)
    while start < limit and text[start] in _DECOR:
        start += 1
    for open_, close in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if text.startswith(open_, start):
            inner = start + len(open_)
            end = text.find(close, inner, limit)
            if end > inner and (open_ != "$" or _is_math_dollar(text, inner, end)):
                return _stripped_span(text, inner, end, "answer_is")
            break
    m = _SENTENCE_END.search(text, start, limit)
    end = m.start() if m else limit
    while end > start and text[end - 1] in _DECOR:
        end -= 1
    span = _stripped_span(text, start, end, "answer_is")
    # "the answer is within \boxed{}" echoes the instruction; it states no answer
    if span is not None and _EMPTY_BOX.search(span.text):
        return None
    return span


def _is_math_dollar(text: str, inner: int, end: int) -> bool:
    """``$\\frac12$`` is math; ``$18 and $20`` is money (the "math" would end in a space or
    be followed by a digit, and inline math never spans a newline)."""
    body = text[inner:end]
    after = text[end + 1:end + 2]
    return "\n" not in body and not body[-1].isspace() and not after.isdigit()


# ------------------------------------------------------------------ rule 4: last number

_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])")
_LAST_NUMBER_WINDOW = 4096


def find_last_number(text: str) -> AnswerSpan | None:
    """The last number in the text (thousands separators and decimals included)."""
    # Search growing windows from the end: the last number is almost always near the end, and a
    # 1 MB digit soup is not scanned match by match in Python.
    window = _LAST_NUMBER_WINDOW
    while True:
        lo = max(0, len(text) - window)
        last = None
        for last in _NUMBER.finditer(text, lo):  # noqa: B007 - we want the final match
            pass
        # A match far enough inside the window cannot be the tail of a longer number
        # ("1,234" cut at the window edge would read "234").
        if last is not None and (last.start() >= lo + 64 or lo == 0):
            return AnswerSpan(last.start(), last.end(), last.group(), "last_number")
        if lo == 0:
            return None
        window *= 8


# ------------------------------------------------------------------ entry point

def find_answer(text: str | None, mode: Mode = "strict") -> AnswerSpan | None:
    """The final answer of a completion, or None when there is none (see module docstring)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not text or not isinstance(text, str):
        return None
    for rule in (find_boxed, find_gsm8k, find_answer_is):
        span = rule(text)
        if span is not None:
            return span
    if mode == "lenient":
        return find_last_number(text)
    return None


# ------------------------------------------------------------------ cleaning and numbers

_WRAPPERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_PLAIN_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_CURRENCY = re.compile(r"^(?:\\\$|\$)\s*(?=-?\d)")
_TEXT_WRAPPED = re.compile(r"^\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}$")


def clean_answer(answer: str) -> str:
    """The answer as math text: math delimiters, a currency sign and a final period removed.

    ``$\\frac{1}{2}$`` -> ``\\frac{1}{2}``; ``\\$18.`` -> ``18``; ``1,000`` -> ``1000``
    (thousands separators only in a plain number: ``1,2`` stays a pair).
    """
    s = answer.strip()
    for _ in range(3):  # nested wrappers such as "$\textbf{5}$"
        before = s
        for open_, close in _WRAPPERS:
            if len(s) > len(open_) + len(close) - 1 and s.startswith(open_) and s.endswith(close):
                s = s[len(open_):len(s) - len(close)].strip()
                break
        s = _CURRENCY.sub("", s)
        if s.endswith(".") and not s.endswith("..."):
            s = s[:-1].rstrip()
        if m := _TEXT_WRAPPED.match(s):
            inner = m.group(1).strip()
            if _PLAIN_NUMBER.fullmatch(inner):
                s = inner
        if s == before:
            break
    if _PLAIN_NUMBER.fullmatch(s):
        s = s.replace(",", "")
    return s


_FAST_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
MAX_FAST_DIGITS = 15  # math-verify compares floats at ~15 significant digits; stay inside that


def plain_number(s: str) -> Fraction | None:
    """The exact value of a plain decimal (``-12``, ``145.0``, ``0.25``), else None.

    Only numbers whose comparison math-verify also does exactly are accepted: at most
    :data:`MAX_FAST_DIGITS` digits and at most 6 decimals (math-verify rounds floats to 6
    places before comparing, so two 6-decimal values are equal there iff they are equal here).
    """
    if not _FAST_NUMBER.fullmatch(s):
        return None
    digits = sum(c.isdigit() for c in s)
    decimals = len(s.partition(".")[2])
    if digits > MAX_FAST_DIGITS or decimals > 6:
        return None
    return Fraction(s)


# ------------------------------------------------------------------ references

def normalize_reference(reference: str) -> str:
    """A reference answer in the form the verifier compares.

    A GSM8K worked solution becomes its final answer (after the last ``####``, commas removed);
    a plain float such as SVAMP's ``145.0`` becomes ``145``; MATH LaTeX is kept as it is
    (only ``$`` delimiters around it are removed).
    """
    text = reference.strip()
    if "####" in text:
        text = text.rsplit("####", 1)[1].strip().replace(",", "")
    text = clean_answer(text)
    value = plain_number(text)
    if value is not None and value.denominator == 1 and "." in text:
        text = str(value.numerator)  # "145.0" -> "145"
    return text


def reads_as_numbers(extracted: str | None, reference: str) -> bool:
    """Whether the rule read an extracted final answer and its reference as plain numbers, so
    that its "wrong" means a different number, not a form it cannot read (an answer or a
    reference in words, a truth value) or no answer at all."""
    return (extracted is not None and plain_number(clean_answer(extracted)) is not None
            and plain_number(normalize_reference(reference)) is not None)


def number_to_str(x: float | int) -> str:
    """145.0 -> '145', 0.5 -> '0.5', 1e-7 -> '1e-07' (shortest exact form)."""
    if isinstance(x, bool) or not math.isfinite(x):
        raise ValueError(f"not a finite number: {x!r}")
    if float(x).is_integer() and abs(x) < 1e16:
        return str(int(x))
    return repr(float(x))
