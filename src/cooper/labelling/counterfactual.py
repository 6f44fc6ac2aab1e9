"""A solution's wrong twin: the same text with its final answer swapped for one known wrong,
written in the answer's own form (``judge.counterfactual``).

A judge fooled by something in a reply that is not the answer (a phrase, a form of the answer
it favours: "One Token to Fool LLM-as-a-Judge", Zhao et al. 2025) says yes whatever the answer
is. Asking it again about the twin tells its "yes" that read the answer from the one that did
not: a judge that also calls the twin right was not reading the answer, so that "yes" is not
taught (:class:`cooper.rl.judging.RolloutJudge`). The wrong value is made from the reference,
so it needs no judge: the reference's value plus one (a number) or its negation (yes/no); in
the answer's form (digits, words, Roman numerals, yes/no or true/false, its case), so that the
twin differs from the solution in the answer alone. Written here, not taken from a library:
the swap depends on the project's own answer reading (:mod:`cooper.verify.extraction`,
:mod:`cooper.verify.gold`).
"""

from __future__ import annotations

import re

from cooper.verify.extraction import find_answer, normalize_reference, number_to_str, plain_number
from cooper.verify.gold import in_roman, in_words, read_boolean, read_integer

_WORD = re.compile(r"\b(yes|no|true|false)\b", re.IGNORECASE)
_DIGITS = re.compile(r"-?\d+(?:\.\d+)?")
_WORDS = re.compile(r"[A-Za-z][A-Za-z ,\-]*[A-Za-z]|[A-Za-z]")
_OPPOSITE = {"yes": "no", "no": "yes", "true": "false", "false": "true"}


def _in_case_of(word: str, like: str) -> str:
    """``word`` in the case ``like`` is written in (YES, Yes, yes)."""
    if like.isupper() and len(like) > 1:
        return word.upper()
    if like[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def _wrong_number(answer: int | None, reference: str) -> int | None:
    """An integer that is not the reference's value (the reference's plus one), or, when the
    reference is not a number, one that is not the answer (any number is then wrong)."""
    ref = read_integer(reference)  # digits, words or Roman numerals
    if ref is not None:
        return ref + 1
    if plain_number(normalize_reference(reference)) is not None:
        return None  # a fraction or a decimal: no form of it is written here
    if read_boolean(reference) is not None and answer is not None:
        return answer + 1
    return None


def _swap_truth(answer: str, reference: str) -> str | None:
    m = _WORD.search(answer)
    if m is None:
        return None
    truth = read_boolean(reference)
    word = m.group(1).lower()
    if truth is None:  # a yes/no answer to a question that is not one: any truth value is wrong
        wrong = word
    else:
        said_yes = word in ("yes", "true")
        wrong = word if said_yes != truth else _OPPOSITE[word]
    return answer[:m.start()] + _in_case_of(wrong, m.group(1)) + answer[m.end():]


def _swap_integer(answer: str, reference: str) -> str | None:
    value = read_integer(answer)
    wrong = _wrong_number(value, reference)
    if wrong is None:
        return None
    digits = list(_DIGITS.finditer(answer))
    if digits:  # 12, \text{12 apples}, 1,200: the last number written in digits
        m = digits[-1]
        return answer[:m.start()] + number_to_str(wrong) + answer[m.end():]
    words = _WORDS.search(answer)
    if words is None or value is None:
        return None
    text = words.group()
    spelt = in_roman(wrong) if text.isupper() and read_integer(text) is not None and re.fullmatch(
        r"[IVXLCDM]+", text) else in_words(wrong)
    return answer[:words.start()] + _in_case_of(spelt, text) + answer[words.end():]


def wrong_twin(solution: str, reference: str) -> str | None:
    """``solution`` with its final answer (:func:`~cooper.verify.extraction.find_answer`)
    replaced by a wrong one in the same form; None where there is no final answer, or no
    value known wrong can be written in its form (a reference that is neither a number nor
    yes/no, an answer that is neither)."""
    span = find_answer(solution, "strict")
    if span is None:
        return None
    answer = span.text
    try:
        twin = (_swap_truth(answer, reference) if read_boolean(answer) is not None
                or (read_boolean(reference) is not None and _WORD.search(answer))
                else _swap_integer(answer, reference))
    except ValueError:  # a number beyond what words or Roman numerals are written for here
        return None
    return None if twin is None else solution[:span.start] + twin + solution[span.end:]
