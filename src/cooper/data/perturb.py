"""Rule-based wrong solutions: the same solution with its final answer changed consistently.

Two uses:

* a quick labelled set for the reward model before the labelling pipeline exists
  (``cooper data perturbed``): each gold solution is a positive, the same text with a changed
  final answer is its negative, so the only thing that separates them is the answer checked
  against the reference;
* the trainer's rule-based negative backend: :func:`rewrite_final_answer` turns a verified
  policy completion ending in ``\\boxed{...}`` into a wrong one (the paper uses an assistant
  LLM for this; this is the cheap, deterministic option).

How an answer is changed (:func:`wrong_answer`): one number in it is replaced by a nearby
plausible value in the same format (``72`` -> ``75``, ``1,000`` -> ``1,010``, ``3.5`` ->
``3.7``, ``\\frac{14}{3}`` -> ``\\frac{14}{5}``). Answers without a digit (``\\pi``, a name) are
not perturbed (None): appending ``+1`` would make the negative trivially recognisable.

"Consistently" (:func:`rewrite_final_answer`): besides the extracted final answer, every place
where the old answer is *stated as a result* is rewritten too: after ``=``, after a GSM8K
calculator annotation's ``>>``, inside ``\\boxed{}``, after ``####`` and after "answer is". So a
GSM8K solution ending ``... = <<48+24=72>>72 clips.\\n#### 72`` becomes
``... = <<48+24=75>>75 clips.\\n#### 75``: no line still gives the gold answer away.

Every rewrite is checked with the verifier: the new answer must be *wrong* (not a timeout or
error) against both the old answer and the reference; otherwise another value is drawn (up to
``attempts`` times) and finally None is returned. Everything is deterministic given the
``random.Random`` passed in.
"""

from __future__ import annotations

import logging
import math
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from cooper.types import LabelledTriple, Problem, Triple
from cooper.verify.extraction import Mode, clean_answer, find_answer, normalize_reference
from cooper.verify.verifier import Verifier, default_verifier

log = logging.getLogger(__name__)

_NUMBER = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])")
# Text right before a value that marks it as a stated result (checked on the 40 chars before).
_RESULT_MARK = re.compile(r"(?:=|>>|\\boxed\{|\\fbox\{|####|answer\s*(?:is|:))\s*(?:\\?\$)?\s*$",
                          re.IGNORECASE)


# ------------------------------------------------------------------ one answer

def _new_integer(n: int, rng: random.Random) -> int:
    step = max(1, round(abs(n) * rng.choice([0.1, 0.2, 0.5]))) if abs(n) >= 10 else 1
    candidates = [n + rng.randint(1, 3), n - rng.randint(1, 3), n + step, n - step, n * 2,
                  n + 10 * rng.randint(1, 3)]
    if abs(n) >= 4:
        candidates.append(n // 2)
    # a positive answer stays positive (a count of apples), zero goes up, negatives are free
    candidates = [c for c in candidates if c != n and (c > 0 or n < 0)]
    return rng.choice(candidates)


def _format_like(value: int, decimals: int, template: str) -> str:
    """``value`` (scaled by 10**decimals) written like ``template`` (commas, decimals)."""
    sign = "-" if value < 0 else ""
    value = abs(value)
    whole, frac = divmod(value, 10**decimals) if decimals else (value, 0)
    text = f"{whole:,}" if "," in template else str(whole)
    if decimals:
        text += "." + str(frac).rjust(decimals, "0")
    return sign + text


def _change_number(token: str, rng: random.Random) -> str:
    decimals = len(token.partition(".")[2])
    scaled = int(token.replace(",", "").replace(".", ""))
    if decimals:  # change a decimal at its own precision: 3.5 -> 3.7, 0.25 -> 0.27
        new = scaled + rng.choice([-1, 1]) * rng.randint(1, 9)
        if new < 0 <= scaled or new == scaled:
            new = scaled + rng.randint(1, 9)
    else:
        new = _new_integer(scaled, rng)
    return _format_like(new, decimals, token)


def wrong_answer(answer: str, rng: random.Random) -> str | None:
    """``answer`` with one of its numbers changed to a nearby value, or None without digits."""
    numbers = list(_NUMBER.finditer(answer))
    if not numbers:
        return None
    # An equation's result is after its last "=": changing an operand ("3 + 3 = 7") leaves the
    # stated result, which the verifier still accepts.
    eq = answer.rfind("=")
    if any(m.start() > eq for m in numbers) and eq >= 0:
        numbers = [m for m in numbers if m.start() > eq]
    # The last number usually carries the result (the denominator of \frac{a}{b} is the last
    # one too, which is as good a choice as any for a fraction).
    m = numbers[-1] if rng.random() < 0.75 else rng.choice(numbers)
    return answer[:m.start()] + _change_number(m.group(), rng) + answer[m.end():]


# ------------------------------------------------------------------ a whole completion

def _value(token: str) -> Fraction:
    return Fraction(token.replace(",", ""))


def _written_like(new: str, token: str) -> str:
    """A plain number ``new`` with thousands separators when ``token`` has them."""
    if "," not in token or _NUMBER.fullmatch(new) is None:
        return new
    whole, dot, frac = new.replace(",", "").partition(".")
    sign = "-" if whole.startswith("-") else ""
    return f"{sign}{int(whole.lstrip('-')):,}{dot}{frac}"


def _result_edits(text: str, old: str, new: str) -> list[tuple[int, int, str]]:
    """Replacements for every place ``old`` is stated as a result (module docstring). A numeric
    answer matches by value, so ``70,000`` in the text matches the answer ``70000``."""
    edits = []
    if _NUMBER.fullmatch(old):
        for m in _NUMBER.finditer(text):
            if _value(m.group()) == _value(old) and _RESULT_MARK.search(
                    text[max(0, m.start() - 40):m.start()]):
                edits.append((m.start(), m.end(), _written_like(new, m.group())))
        return edits
    start = text.find(old)
    while start >= 0:
        if _RESULT_MARK.search(text[max(0, start - 40):start]):
            edits.append((start, start + len(old), new))
        start = text.find(old, start + 1)
    return edits


def _apply(text: str, edits: Iterable[tuple[int, int, str]]) -> str:
    out, last = [], 0
    for start, end, new in sorted(set(edits)):
        if start < last:  # overlapping: keep the first
            continue
        out += [text[last:start], new]
        last = end
    return "".join(out) + text[last:]


def _result_of(answer: str) -> str:
    """The part of ``answer`` after its last "=" (the whole answer without one)."""
    return answer.rpartition("=")[2].strip() or answer


def rewrite_final_answer(completion: str, reference: str | None, rng: random.Random, *,
                         mode: Mode = "strict", verifier: Verifier | None = None,
                         attempts: int = 5) -> str | None:
    """``completion`` with its final answer changed consistently into a wrong one.

    None when no final answer can be found (in ``mode``), the answer has no number to change,
    or no drawn value was verified wrong in ``attempts`` tries.
    """
    span = find_answer(completion, mode)
    if span is None:
        return None
    verifier = verifier or default_verifier()
    old = span.text
    # math-verify calls any two equations equal ("3+4=14" vs "3+4=7"), so an equation's
    # result (after its last "=") is what the rewrite must differ from
    checks = [_result_of(clean_answer(old))] + ([reference] if reference else [])
    for _ in range(attempts):
        new = wrong_answer(old, rng)
        if new is None:
            return None
        rewritten = _apply(completion, [(span.start, span.end, new),
                                        *_result_edits(completion, old, new)])
        verdicts = verifier.verify_batch([rewritten] * len(checks), checks, mode=mode)
        if all(v.reason == "wrong" for v in verdicts):
            return rewritten
    return None


# ------------------------------------------------------------------ labelled triples


def gold_solution(problem: Problem) -> str | None:
    """A correct worked solution whose final answer can be found, or None.

    GSM8K and MATH500 ship one. SVAMP ships only the equation (``( 155.0 - 20.0 )``), which is
    turned into a one-line solution ending in a boxed answer.
    """
    if not problem.solution:
        return None
    if problem.source == "svamp":
        return f"{problem.solution.strip()} = {problem.reference}.\n" \
               f"The answer is \\boxed{{{problem.reference}}}."
    return problem.solution


@dataclass(frozen=True)
class PerturbSkip:
    """A problem left out of the perturbed set, and why."""

    id: str
    reason: str  # "no worked solution" | "gold not verified" | "cannot be perturbed"
    detail: str = ""


def answer_change(wrong: str, reference: str) -> float | None:
    """How far the final answer of ``wrong`` is from a numeric ``reference`` (None when either
    is not a plain number)."""
    span = find_answer(wrong, "strict")
    try:
        return abs(float(_value(_result_of(clean_answer(span.text)))) - float(_value(reference)))
    except (AttributeError, ValueError, ZeroDivisionError):
        return None


def _wrong_copy(gold: str, reference: str, rng: random.Random, verifier: Verifier,
                min_change: float) -> str | None:
    """A perturbed copy of ``gold``; with ``min_change`` > 0, one whose answer is further than
    that from the reference (None when 20 draws give none). Without it, exactly one draw, so
    the sets built before this setting existed are drawn the same."""
    for _ in range(20 if min_change > 0 else 1):
        wrong = rewrite_final_answer(gold, reference, rng, verifier=verifier)
        if wrong is None or min_change <= 0:
            return wrong
        change = answer_change(wrong, reference)
        if change is not None and change > min_change:
            return wrong
    return None


def perturbed_triples(problems: Iterable[Problem], n: int, rng: random.Random, *,
                      verifier: Verifier | None = None, min_change: float = 0.0,
                      ) -> tuple[list[LabelledTriple], list[PerturbSkip]]:
    """``n`` triples (``n`` even): for ``n / 2`` problems drawn with ``rng``, the gold solution
    (label 1) followed by its perturbed copy (label 0). Problems whose gold solution does not
    verify against the reference, or cannot be perturbed, are skipped and reported.

    ``min_change`` > 0 keeps only wrong answers further than that from a numeric reference
    (redrawn up to 20 times): a set without near misses, whose reward model has never been
    shown that an answer one off is wrong (the blind spot of the third round's testbed,
    ``rm_init.min_change: 10``; docs/experiment_history.md)."""
    if n < 2 or n % 2:
        raise ValueError(f"n must be a positive even number (pairs of gold and perturbed), got {n}")
    if not math.isfinite(min_change) or min_change < 0:
        raise ValueError(f"min_change must be a finite number >= 0, got {min_change}")
    verifier = verifier or default_verifier()
    pool = list(problems)
    order = list(range(len(pool)))
    rng.shuffle(order)
    triples: list[LabelledTriple] = []
    skipped: list[PerturbSkip] = []
    for idx in order:
        if len(triples) >= n:
            break
        p = pool[idx]
        gold = gold_solution(p)
        if gold is None:
            skipped.append(PerturbSkip(p.id, "no worked solution"))
            continue
        reference = normalize_reference(p.reference)
        verdict = verifier.verify(gold, reference)
        if not verdict.correct:  # label 1 must be true: never trust an unverified gold
            skipped.append(PerturbSkip(p.id, "gold not verified", verdict.reason))
            continue
        wrong = _wrong_copy(gold, reference, rng, verifier, min_change)
        if wrong is None:
            far = f", no change over {min_change:g} in 20 draws" if min_change > 0 else ""
            skipped.append(PerturbSkip(p.id, "cannot be perturbed",
                                       f"answer {verdict.extracted!r}{far}"))
            continue
        triples.append(LabelledTriple(Triple(p.question, p.reference, gold), True, f"{p.id}/gold",
                                      p.source))
        triples.append(LabelledTriple(Triple(p.question, p.reference, wrong), False,
                                      f"{p.id}/perturbed", p.source))
    if skipped:
        log.warning("perturbed set: skipped %d problem(s); first: %s: %s %s", len(skipped),
                    skipped[0].id, skipped[0].reason, skipped[0].detail)
    return triples, skipped
