"""A solution's wrong twin: the same text with its final answer swapped for one proven wrong,
written in the answer's own form (``judge.counterfactual``).

A judge fooled by something in a reply that is not the answer (a phrase, a form of the answer
it favours: "One Token to Fool LLM-as-a-Judge", Zhao et al. 2025) says yes whatever the answer
is. Asking it again about the twin tells its "yes" that read the answer from the one that did
not: a judge that also calls the twin right was not reading the answer, so that "yes" is not
taught (:class:`cooper.rl.judging.RolloutJudge`). The twin needs no judge and no reference's
help: it is ONE change in the answer's own text, so that the twin differs from the solution in
the answer alone and in nothing a judge could take as a cue (a number's last digit, keeping its
writing: ``1,200`` -> ``1,201``, ``.35625`` -> ``.35626``, ``\\frac{1}{8}`` -> ``\\frac{1}{9}``;
one element of a tuple or a set; an interval's bound or bracket; a sign; another choice letter;
a truth word's opposite, in its case; a number in words or Roman numerals, in its style; for an
answer in words, another option its question names or an opposite; another letter in a list of
letters).

Edits are tried in a fixed order and the first one *proven* different from the answer the judge
called right, and from the reference where it can be read (a twin must never happen to be the
right answer), is taken: by its reading (:mod:`.twin_certify`: the proof does not rest on
math-verify's verdict), else part by part where math-verify reads the whole in part (a list of
equations, a quantifier in words: :mod:`.twin_parts`), else as text (:mod:`.twin_text`). An
answer no edit can be proven wrong for gets no twin, with the reason; its "yes" is then
withheld by the caller, never checked on a twin that might be right. Written here, not taken
from a library: no library makes such twins, and the swap depends on the project's own answer
reading (:mod:`cooper.verify.extraction`, :mod:`cooper.verify.gold`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cooper.labelling.twin_certify import different
from cooper.labelling.twin_parts import Found, parts_certified
from cooper.labelling.twin_read import (
    MAX_CHARS,
    RELATION,
    choice_letter,
    has_words,
    read,
    read_reference,
    strip_units,
)
from cooper.labelling.twin_text import (
    in_case_of,
    letter_certified,
    letter_edits,
    text_certified,
    text_edits,
)
from cooper.verify.extraction import clean_answer, find_answer, normalize_reference
from cooper.verify.gold import MAX_WORDS, in_roman, in_words, read_boolean, read_integer

KINDS: tuple[str, ...] = (
    "integer", "decimal", "fraction", "radical", "pi", "percent", "complex", "number",
    "expression", "equation", "inequality", "tuple", "interval", "matrix", "choice", "truth",
    "words", "roman", "text", "none")
"""an answer's kind: numbers by their writing (``number``: another closed form, a power or a
logarithm), ``expression`` (a variable), ``tuple`` (also sets and lists of values), ``choice``
(a multiple-choice letter A-E), ``truth`` (yes/no/true/false), ``words`` (a number in words),
``text`` (anything else), ``none`` (no final answer)"""

REASONS: tuple[str, ...] = ("no_answer", "too_long", "no_edit", "uncertified")
"""why no twin: no final answer; one longer than the reader's bound; nothing to change in its
form; no edit proven different from the answer and the reference"""

MAX_TRIES = 40  # edits certified at most (each costs a parse): a long tuple has many
MAX_TRIED_CHARS = 3000  # and at most this much text parsed for one twin (a long answer: fewer)


@dataclass(frozen=True)
class Twin:
    """A solution's wrong twin (``text``), or why there is none (``reason``)."""

    text: str | None  # the solution with its final answer replaced; None where none certified
    answer: str | None  # the twin's final answer alone (what goes inside the box)
    original: str | None  # the solution's final answer
    kind: str  # one of KINDS
    reason: str | None  # one of REASONS where there is no twin
    how: str | None = None  # how it was certified (twin_parts.HOWS); None where there is none
    # the (twin's, source's) pieces math-verify's second path must call unequal where the twin
    # was certified part by part (the changed element's right side); empty: the whole answers
    checks: tuple[tuple[str, str], ...] = ()


_ROMAN = re.compile(r"[IVXLCDM]+")
_OPPOSITE = {"yes": "no", "no": "yes", "true": "false", "false": "true"}
_TRUTH_WORD = re.compile(r"\b(yes|no|true|false)\b", re.IGNORECASE)
_WORDS = re.compile(r"[A-Za-z][A-Za-z \-]*[A-Za-z]|[A-Za-z]")
_LETTER = re.compile(r"(?<![A-Za-z\\])[A-E](?![A-Za-z])")
_TOKEN = re.compile(r"\d+(?:\.\d+)?|\.\d+")
_BASE = re.compile(r"\s*_\s*\{?\s*(\d+)\s*\}?")
_THOUSANDS = re.compile(r"-?(?:\\\$|\$)?\d{1,3}(?:,(?:\\!)?\s?\d{3})+(?:\.\d+)?")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?")


# ------------------------------------------------------------------ kinds

def answer_kind(answer: str | None, reference: str = "") -> str:
    """The kind of a final answer (one of :data:`KINDS`); a Roman numeral is one only where
    the reference reads as an integer (``C`` answering a multiple-choice question is a
    letter)."""
    if answer is None:
        return "none"
    s = clean_answer(answer)
    if read_boolean(s) is not None:
        return "truth"
    if _is_roman(s, reference):
        return "roman"
    if choice_letter(s) is not None:
        return "choice"
    if re.search(r"[A-Za-z]", s) and not _ROMAN.fullmatch(s) and read_integer(s) is not None:
        return "words"
    core = _DEGREES.sub("", strip_units(re.sub(r"\\(?:left|right)\b", "", s)))
    if has_words(core):
        return "text"
    return _math_kind(core)


def _math_kind(s: str) -> str:
    if re.search(r"\\begin\{[pbvB]?matrix\}", s):
        return "matrix"
    if (re.search(r"\\cup|\\cap|\\in\b", s) or re.match(r"\s*\[", s) or re.search(r"\]\s*$", s)
            or (re.match(r"\s*\(", s) and "\\infty" in s)):
        return "interval"
    if re.search(r"(?<![<>!\\])=", s):
        return "equation"
    if RELATION.search(s):
        return "inequality"
    if _THOUSANDS.fullmatch(s):
        return "integer"
    if "," in s or "\\pm" in s or "\\{" in s:
        return "tuple"
    letters = re.sub(r"\\[A-Za-z]+|_\s*\{?\s*\d+\s*\}?", "", s)
    found = set(re.findall(r"[A-Za-z]", letters))
    if found - {"i"}:
        return "expression"
    for kind, pattern in (("percent", r"%"), ("complex", r"i"), ("pi", r"\\pi"),
                          ("radical", r"\\sqrt"), ("fraction", r"\\[dt]?frac|/"),
                          ("decimal", r"\d?\.\d")):
        if re.search(pattern, letters if kind == "complex" else s):
            return kind
    bare = re.sub(r"\\\$|\$|\\!|_\s*\{?\s*\d+\s*\}?", "", s).strip()
    return "integer" if re.fullmatch(r"-?\d+", bare) else "number"


def _is_roman(s: str, reference: str) -> bool:
    s = re.sub(r"^\\text\{\s*(.*?)\s*\}$", r"\1", s)  # \text{XII}: read_integer unwraps it too
    if not _ROMAN.fullmatch(s) or read_integer(s) is None:
        return False
    ref = normalize_reference(reference) if reference else ""
    return bool(ref) and choice_letter(ref) is None and read_integer(ref) is not None


# ------------------------------------------------------------------ edits

def _truth_edits(answer: str) -> list[tuple[str, str | None]]:
    m = _TRUTH_WORD.search(answer)
    if m is None:
        return []
    word = in_case_of(_OPPOSITE[m.group(1).lower()], m.group(1))
    return [(answer[:m.start()] + word + answer[m.end():], None)]


def _choice_edits(answer: str) -> list[tuple[str, str | None]]:
    found = list(_LETTER.finditer(answer))
    if not found:
        return []
    m = found[-1]
    at = "ABCDE".index(m.group())
    others = ["ABCDE"[(at + k) % 5] for k in range(1, 5)]  # the next option first
    return [(answer[:m.start()] + c + answer[m.end():], None) for c in others]


def _spelt_edits(answer: str, roman: bool) -> list[tuple[str, str | None]]:
    value = read_integer(answer)
    # the run of letters that writes the number (not "text" in "\text{seven}")
    m = next((m for m in (_ROMAN if roman else _WORDS).finditer(answer)
              if read_integer(m.group()) == value), None)
    if value is None or m is None:
        return []
    text = m.group()
    out = []
    for wrong in (value + 1, value - 1, value + 2):
        if roman and not 1 <= wrong <= 3999 or not roman and not 0 <= abs(wrong) <= MAX_WORDS:
            continue
        if roman:
            spelt = in_roman(wrong)
        else:
            spelt = in_words(wrong)
            if "-" not in text:  # "seventy two": its style of compound
                spelt = spelt.replace("-", " ")
            spelt = in_case_of(spelt, text)
        out.append((answer[:m.start()] + spelt + answer[m.end():], None))
    return out


def _digit_alternatives(d: int, base: int, leading: bool) -> list[int]:
    low = 1 if leading else 0
    return [x for x in (d + 1, d - 1, d + 2, d - 2) if low <= x < base][:2]


def _token_variants(token: str, base: int) -> list[str]:
    """``token`` with one digit changed: its last digit (+1, else -1; then the other way),
    then its first significant digit (a change in the last digit of a long decimal can be
    below any tolerance)."""
    places = [i for i, c in enumerate(token) if c.isdigit()]
    whole = token.split(".")[0]
    first = next((i for i in places if token[i] != "0"), None)
    out = []
    for at, count in ((places[-1], 2), (first, 1)):
        if at is None or (at == places[-1] and count == 1):
            continue
        leading = at == 0 and len(whole) > 1
        for d in _digit_alternatives(int(token[at]), base, leading)[:count]:
            out.append(token[:at] + str(d) + token[at + 1:])
    return out


def _subscript(answer: str, start: int) -> bool:
    before = answer[:start].rstrip()
    return before.endswith("_") or before.endswith("_{")


def _number_edits(answer: str) -> list[tuple[str, str | None]]:
    """Each number's variants, the last number first (a tuple's last element, an equation's
    right side, an expression's constant term), subscripts (``a_1``, a base) last."""
    tokens = [m for m in _TOKEN.finditer(answer) if not answer[:m.start()].endswith("\\")]
    ordered = ([m for m in reversed(tokens) if not _subscript(answer, m.start())]
               + [m for m in reversed(tokens) if _subscript(answer, m.start())])
    out = []
    for m in ordered:
        b = _BASE.match(answer, m.end())
        base = int(b.group(1)) if b and 2 <= int(b.group(1)) <= 10 else 10
        out += [(answer[:m.start()] + v + answer[m.end():], v)
                for v in _token_variants(m.group(), base)]
    return out


def _after_word(answer: str, edited: str) -> bool:
    """Whether the edit changed a number that follows a word (a label)."""
    at = next((i for i, (a, b) in enumerate(zip(answer, edited, strict=False)) if a != b), 0)
    while at > 0 and (answer[at - 1].isdigit() or answer[at - 1] == "."):
        at -= 1
    return re.search(r"[A-Za-z]{3,}\s*$", answer[:at]) is not None


def _bracket_edits(answer: str) -> list[tuple[str, str | None]]:
    """An interval's outer brackets flipped, open <-> closed (not at an infinite end)."""
    out = []
    left = re.match(r"\s*(?:\\left\s*)?([(\[])", answer)
    if left and not re.match(r"\s*-?\s*\\infty", answer[left.end():]):
        c = "[" if left.group(1) == "(" else "("
        out.append((answer[:left.start(1)] + c + answer[left.end(1):], None))
    right = re.search(r"([)\]])\s*$", answer)
    if right and not re.search(r"\\infty\s*(?:\\right\s*)?$", answer[:right.start(1)]):
        c = "]" if right.group(1) == ")" else ")"
        out.append((answer[:right.start(1)] + c + answer[right.end(1):], None))
    return out


def _sign_edits(answer: str) -> list[tuple[str, str | None]]:
    """A binary + or - flipped (the last first), then a minus put before (or taken from) the
    last element or right side: ``p - q`` -> ``p + q``, ``\\cot x`` -> ``-\\cot x``."""
    out = []
    for i in reversed(range(len(answer))):
        if answer[i] in "+-":
            before = answer[:i].rstrip()
            if before and (before[-1].isalnum() or before[-1] in ")}]!|."):
                c = "-" if answer[i] == "+" else "+"
                out.append((answer[:i] + c + answer[i + 1:], None))
    cut = max(answer.rfind(","), answer.rfind("="))
    at = cut + 1
    while at < len(answer) and (answer[at].isspace() or answer.startswith(("\\,", "\\;", "\\!",
                                                                           "\\ "), at)):
        at += 2 if answer[at] == "\\" else 1
    if answer.startswith("-", at):
        out.append((answer[:at] + answer[at + 1:], None))
    elif at < len(answer):
        out.append((answer[:at] + "-" + answer[at:], None))
    return out


def edits(answer: str, kind: str) -> list[tuple[str, str | None]]:
    """The candidate twins of an answer, in the order they are tried: (twin answer, the new
    number written where one was changed)."""
    if kind == "truth":
        return _truth_edits(answer)
    if kind == "choice":
        return _choice_edits(answer)
    if kind in ("words", "roman"):
        return _spelt_edits(answer, kind == "roman")
    found = _number_edits(answer)
    if kind == "text":  # a name or a phrase has no form to change; a number in it has,
        # but not a label's ("Sequence 1", "Day 15"): changing one says the same thing
        return [(a, t) for a, t in found if not _after_word(answer, a)]
    if kind == "interval":
        found = _bracket_edits(answer) + found
    return found + _sign_edits(answer)


# ------------------------------------------------------------------ the twin

def _numbers(text: str) -> set[str]:
    return {m.group().lstrip("0") or "0" for m in _TOKEN.finditer(text.replace(",", ""))}


def make_twin(solution: str, reference: str, *, judged: str | None = None,
              question: str | None = None) -> Twin:
    """``solution`` with its final answer (``find_answer(solution, "strict")``) changed once,
    in its form, into an answer proven different from ``judged`` (the answer the judge called
    right; default the solution's own) and from ``reference`` where that can be read.
    ``question`` (the problem's text), where given, offers its other options for an answer in
    words (:mod:`.twin_text`)."""
    span = find_answer(solution, "strict") if isinstance(solution, str) else None
    if span is None:
        return Twin(None, None, None, "none", "no_answer")
    original = span.text
    kind = answer_kind(original, reference)
    if len(original) > MAX_CHARS:
        return Twin(None, None, original, kind, "too_long")
    candidates = edits(original, kind)
    source = original if judged is None else judged
    ref = normalize_reference(reference) if isinstance(reference, str) and reference else ""
    texts = text_edits(original, question) if kind == "text" else []
    letters = letter_edits(original) if kind == "tuple" else []
    if not (candidates or texts or letters):
        return Twin(None, None, original, kind, "no_edit")
    found = (_certified(original, candidates, source, ref, kind)
             or next((Found(a, "letters", ((new, old),)) for a, new, old in letters
                      if letter_certified(a, new, old, source, ref)), None)
             or next((Found(a, how) for a, new, how in texts
                      if text_certified(a, new, source, ref)), None))
    if found is None:
        return Twin(None, None, original, kind, "uncertified")
    return Twin(solution[:span.start] + found.answer + solution[span.end:], found.answer,
                original, kind, None, found.how, found.checks)


def _certified(original: str, candidates: list[tuple[str, str | None]], judged: str, ref: str,
               kind: str) -> Found | None:
    """The first candidate proven different from ``judged`` and ``ref`` by its reading (each
    candidate first), else part by part (:mod:`.twin_parts`: lists of equations, quantifiers
    in words, whose whole reading proves nothing)."""
    roman = kind == "roman"
    source = read(judged, roman=roman)
    truth = read_reference(ref) if ref else ()
    # a reference that cannot be read whole (words, a set-builder) cannot be compared: a
    # changed number that appears in it could make the twin right, so such edits are skipped
    guard = _numbers(ref) if not truth or has_words(original) else set()
    seen, tried = {original}, []
    for answer, token in candidates[:MAX_TRIES]:
        if answer not in seen:
            seen.add(answer)
            tried.append((answer, token is not None and (token.lstrip("0") or "0") in guard))
    for prove in ("value", "parts"):
        budget = MAX_TRIED_CHARS
        for answer, guarded in tried:
            budget -= len(answer)
            if budget < 0:
                break
            if guarded:
                continue
            if prove == "parts":
                found = parts_certified(original, answer, judged, truth)
                if found is not None:
                    return found
                continue
            mine = read(answer, roman=roman)
            if different(mine, source) and (not truth or different(mine, truth)):
                return Found(answer, "value")
    return None


def wrong_twin(solution: str, reference: str) -> str | None:
    """The text of :func:`make_twin` (None where no twin is certified): the solution with its
    final answer swapped for one proven wrong, in the same form."""
    return make_twin(solution, reference).text
