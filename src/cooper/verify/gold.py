"""A gold judge for integer and yes/no answers written in forms a rule-based verifier cannot read.

math-verify reads a right answer in many forms (``x = 32``, ``32 apples``, ``30 + 2``, ``32.0``,
``\\$32``: all accepted against ``32``), but not an integer written in English words
(``thirty-two``) or in Roman numerals (``XXXII``): both are rejected, as answers and as
references. A testbed in which the rule misses right answers writes them in those forms, and
needs a judge that reads every form it writes and is right by construction: this one.

:func:`read_integer` reads one integer written as digits (``32``, ``-7``, ``1,024``, ``32.0``),
in words (``thirty-two``, ``one hundred and five``, ``minus seven``; 0 to 999,999) or in Roman
numerals (``XXXII``; 1 to 3999, canonical forms only); :func:`read_boolean` reads a yes/no
answer (``yes``, ``no``, ``true``, ``false``, any case). A reference that reads as a truth value
(``True``: how a dataset of yes/no questions stores its answers) takes an answer that reads as
the same truth value, whatever the word. math-verify reads a word as the product of its
letters (``True`` is e*r*t*u, ``yes`` is e*s*y), so it never matches ``yes`` with ``True``
(tests/test_gold.py shows it); the comparison problems of :mod:`cooper.data.synthetic` are
built on that blind spot. Anything else is not read (None), so the judge never guesses.
:func:`gold_correct` takes the completion's final answer as the project's strict extraction
finds it (a box, ``####``, "the answer is"; :mod:`.extraction`) and compares the values, an
integer with an integer and a truth value with a truth value. :func:`in_words` and
:func:`in_roman` write the forms, each the inverse of the reader (tested on every integer of
their ranges). :func:`gold_verdict` gives the judge's decision in the verifier's record
(``cooper.verify.verifier.verify_batch`` with ``mode="gold"``), so a testbed can pay with it,
or score held-out answers with it beside the rule. Pure functions; nothing here calls math-verify.
"""

from __future__ import annotations

import re

from cooper.verify.extraction import clean_answer, find_answer

ONES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
        "eighteen", "nineteen")
TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
MAX_WORDS = 999_999
MAX_ROMAN = 3999
MAX_CHARS = 200  # longer text is no integer answer of the testbed: not read (and int() is bounded)

_ROMAN = (("M", 1000), ("CM", 900), ("D", 500), ("CD", 400), ("C", 100), ("XC", 90),
          ("L", 50), ("XL", 40), ("X", 10), ("IX", 9), ("V", 5), ("IV", 4), ("I", 1))
_ROMAN_RE = re.compile(r"M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
_DIGITS_RE = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.0+)?")
_WORD_VALUES = {w: i for i, w in enumerate(ONES)} | {w: 10 * i for i, w in enumerate(TENS) if w}


def in_words(n: int) -> str:
    """``n`` in English words: 32 -> 'thirty-two', 105 -> 'one hundred five', -7 -> 'minus
    seven' (|n| at most :data:`MAX_WORDS`)."""
    if abs(n) > MAX_WORDS:
        raise ValueError(f"{n} is beyond {MAX_WORDS}")
    if n < 0:
        return "minus " + in_words(-n)
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("-" + ONES[n % 10] if n % 10 else "")
    if n < 1000:
        return ONES[n // 100] + " hundred" + (" " + in_words(n % 100) if n % 100 else "")
    return in_words(n // 1000) + " thousand" + (" " + in_words(n % 1000) if n % 1000 else "")


def in_roman(n: int) -> str:
    """``n`` in Roman numerals: 32 -> 'XXXII' (1 to :data:`MAX_ROMAN`)."""
    if not 1 <= n <= MAX_ROMAN:
        raise ValueError(f"{n} has no Roman numeral here (1 to {MAX_ROMAN})")
    out = []
    for letters, value in _ROMAN:
        while n >= value:
            out.append(letters)
            n -= value
    return "".join(out)


def _from_words(text: str) -> int | None:
    """'thirty-two' -> 32; 'one hundred and five' -> 105; None unless every word is read."""
    words = text.lower().replace("-", " ").replace(",", " ").split()
    sign = 1
    if words and words[0] in ("minus", "negative"):
        sign, words = -1, words[1:]
    if not words:
        return None
    total = current = 0
    seen_value = False
    for w in words:
        if w == "and" and seen_value:
            continue
        if w in _WORD_VALUES:
            current += _WORD_VALUES[w]
        elif w == "hundred" and 0 < current < 10:
            current *= 100
        elif w == "thousand" and 0 < current < 1000:
            total, current = total + current * 1000, 0
        else:
            return None
        seen_value = True
    value = sign * (total + current)
    # only the canonical spelling (hyphens and "and" optional): "twenty ten" or "five twenty"
    # are not numbers
    return (value if abs(value) <= MAX_WORDS and _canonical(in_words(value)) == _canonical(text)
            else None)


def _canonical(text: str) -> str:
    words = [w for w in text.lower().replace(",", " ").replace("-", " ").split() if w != "and"]
    words = ["minus" if w == "negative" else w for w in words]
    return " ".join(words)


def read_integer(text: str) -> int | None:
    """The integer ``text`` writes, as digits, in words or in Roman numerals; None otherwise."""
    if len(text) > MAX_CHARS:
        return None
    s = clean_answer(text)
    m = re.fullmatch(r"\\text\{([^{}]*)\}", s)
    if m:  # \text{thirty-two}
        s = m.group(1).strip()
    if _DIGITS_RE.fullmatch(s):
        return int(s.replace(",", "").partition(".")[0])
    if s and _ROMAN_RE.fullmatch(s):
        return sum(v for _, v in _roman_values(s))
    return _from_words(s) if re.fullmatch(r"[A-Za-z ,\-]+", s) else None


TRUTH = {"yes": True, "true": True, "no": False, "false": False}
"""the words read as a truth value (any case): a yes/no answer, and the reference a dataset of
yes/no questions stores"""


def read_boolean(text: str) -> bool | None:
    """The truth value ``text`` writes (``yes``, ``no``, ``true``, ``false``, any case, also as
    ``\\text{yes}``); None otherwise."""
    if len(text) > MAX_CHARS:
        return None
    s = clean_answer(text)
    m = re.fullmatch(r"\\text(?:bf)?\{([^{}]*)\}", s)
    if m:
        s = m.group(1).strip()
    return TRUTH.get(s.lower())


def read_value(text: str) -> int | bool | None:
    """What an answer or a reference of the testbeds says: a truth value or an integer (in
    any form :func:`read_integer` reads); None when it is neither."""
    truth = read_boolean(text)
    return truth if truth is not None else read_integer(text)


def _same(answer: int | bool | None, expected: int | bool) -> bool:
    """An answer is right when it is the reference's value *and kind*: ``True == 1`` in Python,
    but "yes" is no answer to "What is 0 + 1?"."""
    return answer is not None and type(answer) is type(expected) and answer == expected


def _roman_values(s: str) -> list[tuple[str, int]]:
    out, i = [], 0
    while i < len(s):
        for letters, value in _ROMAN:
            if s.startswith(letters, i):
                out.append((letters, value))
                i += len(letters)
                break
    return out


def gold_verdict(completion: str, reference: str) -> tuple[bool, str | None, str]:
    """(correct, the final answer as written, reason) in the verifier's terms: ``correct``,
    ``wrong``, ``no_answer`` (no final answer found) or ``error`` (a reference the judge cannot
    read: the judge is for integer and yes/no answers only)."""
    span = find_answer(completion, "strict") if isinstance(completion, str) else None
    if span is None:
        return False, None, "no_answer"
    expected = read_value(reference) if isinstance(reference, str) else None
    if expected is None:
        return False, span.text, "error"
    ok = _same(read_value(span.text), expected)
    return ok, span.text, "correct" if ok else "wrong"


def gold_correct(completion: str, reference: str) -> bool:
    """Whether the completion's final answer (strict extraction) says what the reference says:
    the same integer or the same truth value, each written in any form :func:`read_value`
    reads."""
    return gold_verdict(completion, reference)[0]
