"""Answer-equivalence rows: is this final answer, in whatever form, the reference's value?

A learned judge (``judge.backend=verifier``) is a small verifier trained as TinyV trained its
own: on labelled pairs of a reference and a final answer, not on a policy's rollouts. These rows
are made from a dataset's problems whose references the gold judge reads (integers, truth
values; ``arith_2x1_compare`` by default): the completion is a bare answer statement,
``The answer is \\boxed{X}.``, with X the reference's value or another one, each written in one
of several forms (digits, words, other cases and spellings, yes/no against a reference stored as
True/False). Labels come by construction and each row is checked with the gold judge. With
``working`` a share of the rows open with one line of working that agrees with their answer
(``62 + 9 = 81.``, ``47 > 52.``), the form a policy of the arithmetic testbeds writes, so the
judge learns to compare the answer with the reference rather than with the working; without it
no row shows working. What the judge then does with a policy's answers is what ``cooper bench
judge`` measures (its mistakes are a model's).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from cooper.types import LabelledTriple, Problem, Triple
from cooper.verify.gold import gold_correct, in_words, read_boolean, read_integer

TEMPLATES = ("The answer is \\boxed{{{x}}}.", "\\boxed{{{x}}}", "So the answer is \\boxed{{{x}}}.",
             "Final answer: \\boxed{{{x}}}")
TRUTH_WORDS = {True: ("yes", "Yes", "YES", "true", "True"),
               False: ("no", "No", "NO", "false", "False")}


_SUM = re.compile(r"What is (\d+) \+ (\d+)\?")
_COMPARE = re.compile(r"Is (\d+) (?:less|greater) than (\d+)\?")


def _working(question: str, value: int | bool) -> str:
    """One line of working that agrees with the answer ``value`` ('' for another question)."""
    if (s := _SUM.fullmatch(question.strip())) and not isinstance(value, bool):
        return f"{s[1]} + {s[2]} = {value}. "
    if (c := _COMPARE.fullmatch(question.strip())) and isinstance(value, bool):
        a, b = int(c[1]), int(c[2])
        says_less = ("less" in question) == value  # "Is a less than b?" answered yes: a < b
        return f"{a} {'<' if says_less else '>'} {b}. "
    return ""


def _number_forms(n: int, rng: random.Random) -> str:
    words = in_words(n)
    return rng.choice((str(n), str(n), words, words, words.title(), words.replace("-", " "),
                       words.upper()))


def _wrong_number(n: int, rng: random.Random) -> int:
    # near misses first: the errors a policy makes (a carry, one off) and a judge must catch
    step = rng.choice((1, 1, 2, 10, 10, 11, 20))
    return n + step if n - step < 0 or rng.random() < 0.5 else n - step


def equivalence_rows(problems: Sequence[Problem], n: int, rng: random.Random, *,
                     working: float = 0.0, numbers: float | None = None
                     ) -> list[LabelledTriple]:
    """``n`` rows (``n`` even): for ``n / 2`` problems drawn with ``rng`` (fewer where there
    are fewer readable ones), one right answer (label 1) and one wrong one (label 0), each in a
    form drawn with ``rng``, each opening with a line of working that agrees with it with
    probability ``working``. ``numbers``: the share of the problems drawn from those with an
    integer reference (None: as the dataset has them); comparing numbers in several forms is
    the harder half to learn. Problems whose reference is neither an integer nor a truth value
    are skipped."""
    if not 0.0 <= working <= 1.0:
        raise ValueError(f"working is a probability in [0, 1], got {working}")
    if numbers is not None and not 0.0 <= numbers <= 1.0:
        raise ValueError(f"numbers is a share in [0, 1], got {numbers}")
    if n < 2 or n % 2:
        raise ValueError(f"n must be a positive even number (pairs), got {n}")
    truths = [p for p in problems if read_boolean(p.reference) is not None]
    ints = [p for p in problems
            if read_boolean(p.reference) is None and read_integer(p.reference) is not None]
    if numbers is None:
        picked = rng.sample(truths + ints, min(n // 2, len(truths) + len(ints)))
    else:
        k = min(round(n // 2 * numbers), len(ints))
        picked = rng.sample(ints, k) + rng.sample(truths, min(n // 2 - k, len(truths)))
        rng.shuffle(picked)
    out: list[LabelledTriple] = []
    for p in picked:
        truth = read_boolean(p.reference)
        if truth is not None:
            values: tuple[int | bool, int | bool] = (truth, not truth)
            right, wrong = (rng.choice(TRUTH_WORDS[v]) for v in values)
        else:
            value = read_integer(p.reference)
            values = (value, _wrong_number(value, rng))
            right, wrong = (_number_forms(v, rng) for v in values)
        for x, v, label, kind in ((right, values[0], True, "equivalent"),
                                  (wrong, values[1], False, "different")):
            text = rng.choice(TEMPLATES).format(x=x)
            if rng.random() < working:
                text = _working(p.question, v) + text
            if gold_correct(text, p.reference) != label:  # a form the gold judge reads otherwise
                continue
            out.append(LabelledTriple(Triple(p.question, p.reference, text), label,
                                      f"{p.id}/{kind}", p.source, kind))
    return out
