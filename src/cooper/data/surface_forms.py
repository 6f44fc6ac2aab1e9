"""One correct solution, written in the surface forms a model may use for its final answer.

A reward model trained on GSM8K's gold solutions alone sees every positive end in ``#### n``
and carry ``<<48/2=24>>`` calculator annotations, which no model writes; it can then learn the
format instead of the answer (a correct real completion ending ``\\boxed{72}`` looks unlike any
positive it saw: issue 19 measured F1 0.00 on real solutions). So the data builder writes each
gold solution in several forms, and builds its negatives from the same forms, so that no form
gives the label away:

* ``original``: as the dataset ships it (GSM8K: annotations and ``#### n``; MATH500: a box);
* ``hashes``: annotations removed, ending ``#### n``;
* ``boxed``: ending ``The answer is \\boxed{n}.``;
* ``answer_is``: ending ``The answer is n.`` (a LaTeX answer inside ``$...$``, so the verifier
  takes it whole).

:func:`split_solution` separates a solution into its working (the *body*) and its final answer:
for ``#### n`` the body is everything before that line; for a final sentence that only states
the answer ("The answer is \\boxed{12}.") the body ends before that sentence; otherwise (a box in
the middle of a sentence, as in MATH500) the box is unwrapped in place, so the body still reads
as prose but states no boxed answer. Pure functions over text; the builder verifies every result.
"""

from __future__ import annotations

import random
import re

from cooper.verify.extraction import find_answer, plain_number

FORMS = ("original", "hashes", "boxed", "answer_is")

_ANNOTATION = re.compile(r"<<[^<>\n]*>>")
# the text before a final answer that makes its sentence an answer statement and nothing else
_STATEMENT_LEAD = re.compile(
    r"(?:^|(?<=[.!?:\n]))[ \t]*(?:(?:so|thus|therefore|hence)[ ,]+)?(?:the[ \t]+)?"
    r"(?:final[ \t]+)?answer[ \t]*(?:is|:|=)?[ \t]*:?[ \t]*\$?[ \t]*(?:\\(?:boxed|fbox)\s*\{)?\s*$",
    re.IGNORECASE)


def strip_annotations(text: str) -> str:
    """GSM8K's calculator annotations removed: ``48/2 = <<48/2=24>>24`` -> ``48/2 = 24``."""
    return _ANNOTATION.sub("", text)


def _unbox(text: str, start: int, end: int) -> str:
    """``text`` with the ``\\boxed{...}`` whose content is ``text[start:end]`` unwrapped."""
    open_ = max(text.rfind("\\boxed", 0, start), text.rfind("\\fbox", 0, start))
    close = text.find("}", end)
    if open_ < 0 or close < 0:
        return text
    return text[:open_] + text[start:end] + text[close + 1:]


def split_solution(solution: str) -> tuple[str, str] | None:
    """(body, final answer) of a worked solution, or None when it states no final answer."""
    span = find_answer(solution, "strict")
    if span is None:
        return None
    if span.kind == "gsm8k":
        return solution[:solution.rfind("####", 0, span.start)].rstrip(), span.text
    line_start = max(solution.rfind("\n", 0, span.start) + 1, 0)
    # the answer's own sentence: after the last sentence end on its line
    head = solution[line_start:span.start]
    ends = [m.end() for m in re.finditer(r"[.!?](?=\s)", head)]
    sentence_start = line_start + (ends[-1] if ends else 0)
    if _STATEMENT_LEAD.search(solution[sentence_start:span.start]):
        return solution[:sentence_start].rstrip(), span.text
    if span.kind == "boxed":
        return _unbox(solution, span.start, span.end).rstrip(), span.text
    return solution.rstrip(), span.text


def _math(answer: str) -> str:
    """An answer written so "the answer is" takes it whole (commas in LaTeX end sentences)."""
    plain = answer.replace(",", "") if re.fullmatch(r"-?[\d,]+(?:\.\d+)?", answer) else answer
    return answer if plain_number(plain) is not None else f"${answer}$"


def final_statement(answer: str, form: str) -> str:
    """The line that states ``answer`` in ``form`` (not ``original``)."""
    if form == "hashes":
        return f"#### {answer}"
    if form == "boxed":
        return f"The answer is \\boxed{{{answer}}}."
    if form == "answer_is":
        return f"The answer is {_math(answer)}."
    raise ValueError(f"form must be one of {', '.join(FORMS[1:])}, got {form!r}")


def join(body: str, statement: str) -> str:
    """A body and its final statement, on their own lines (a bare statement without a body)."""
    return f"{body}\n{statement}" if body else statement


def in_form(solution: str, form: str, *, annotations: bool = False) -> str | None:
    """``solution`` rewritten to end in ``form``; annotations kept only when asked (and for
    ``original``, which is the text as shipped). None when it states no final answer."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {', '.join(FORMS)}, got {form!r}")
    if form == "original":
        return solution
    parts = split_solution(solution)
    if parts is None:
        return None
    body, answer = parts
    if not annotations:
        body = strip_annotations(body)
    return join(body, final_statement(answer, form))


def any_form(solution: str, rng: random.Random) -> str | None:
    """``solution`` in a form drawn with ``rng`` (annotations kept half the time)."""
    form = rng.choice(FORMS)
    return in_form(solution, form, annotations=rng.random() < 0.5)
