"""Answer-equivalence rows: is this final answer, in whatever form, the reference's value?

A learned judge (``judge.backend=verifier``) is a small verifier trained as TinyV trained its
own: on labelled pairs of a reference and a final answer, not on a policy's rollouts. These rows
are made from a dataset's problems whose references the gold judge reads (integers, truth
values; ``arith_2x1_compare`` by default): the completion is a bare answer statement,
``The answer is \\boxed{X}.``, with X the reference's value or another one, each written in one
of several forms (digits, words, other cases and spellings, yes/no against a reference stored as
True/False). Labels come by construction and each row is checked with the gold judge. No row
shows working: what such a judge does with a policy's working, a form it never saw, is what
``cooper bench judge`` then measures (its mistakes are a model's).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from cooper.types import LabelledTriple, Problem, Triple
from cooper.verify.gold import gold_correct, in_words, read_boolean, read_integer

TEMPLATES = ("The answer is \\boxed{{{x}}}.", "\\boxed{{{x}}}", "So the answer is \\boxed{{{x}}}.",
             "Final answer: \\boxed{{{x}}}")
TRUTH_WORDS = {True: ("yes", "Yes", "YES", "true", "True"),
               False: ("no", "No", "NO", "false", "False")}


def _number_forms(n: int, rng: random.Random) -> str:
    words = in_words(n)
    return rng.choice((str(n), str(n), words, words, words.title(), words.replace("-", " "),
                       words.upper()))


def _wrong_number(n: int, rng: random.Random) -> int:
    # near misses first: the errors a policy makes (a carry, one off) and a judge must catch
    step = rng.choice((1, 1, 2, 10, 10, 11, 20))
    return n + step if n - step < 0 or rng.random() < 0.5 else n - step


def equivalence_rows(problems: Sequence[Problem], n: int, rng: random.Random
                     ) -> list[LabelledTriple]:
    """``n`` rows (``n`` even): for ``n / 2`` problems drawn with ``rng`` (fewer where there
    are fewer readable ones), one right answer (label 1) and one wrong one (label 0), each in a
    form drawn with ``rng``. Problems whose reference is neither an integer nor a truth value
    are skipped."""
    if n < 2 or n % 2:
        raise ValueError(f"n must be a positive even number (pairs), got {n}")
    readable = [p for p in problems
                if read_boolean(p.reference) is not None or read_integer(p.reference) is not None]
    out: list[LabelledTriple] = []
    for p in rng.sample(readable, min(n // 2, len(readable))):
        truth = read_boolean(p.reference)
        if truth is not None:
            right, wrong = (rng.choice(TRUTH_WORDS[v]) for v in (truth, not truth))
        else:
            value = read_integer(p.reference)
            right, wrong = _number_forms(value, rng), _number_forms(_wrong_number(value, rng), rng)
        for x, label, kind in ((right, True, "equivalent"), (wrong, False, "different")):
            text = rng.choice(TEMPLATES).format(x=x)
            if gold_correct(text, p.reference) != label:  # a form the gold judge reads otherwise
                continue
            out.append(LabelledTriple(Triple(p.question, p.reference, text), label,
                                      f"{p.id}/{kind}", p.source, kind))
    return out
