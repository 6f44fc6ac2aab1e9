"""Wrong twins of answers in words, certified as text (:mod:`.counterfactual`): another option
the question names, an opposite, or another letter in a list of letters.

A name or a word has no number to change, and math-verify reads it as a product of variables
(``Petya``: a*a*p*t*y), so its "not equal" proves nothing. A twin here is, in this order:

1. another option the question names (:func:`option_edits`, only with the question): the
   answer is an item of a list the question writes ("north, south, east or west", "(odd or
   even)", "one that is one minute slow or one that is stopped": the items' shared first words
   dropped) or a name it mentions (a capitalised word found other than at a sentence's start:
   Petya, Vasya); the twin is the next item or name in the question's order. An answer of
   several items ("line segment and circle") has its last one replaced by the next item it
   lacks. Only words of the question are used, never the reference's;
2. else an opposite from a closed list of pairs (:data:`ANTONYMS`) where the answer is one such
   word, in its case and wrapper (``\\text{East}`` -> ``\\text{West}``). A word inside a phrase
   is not changed: its sense there is not known ("a right prism", "the second derivative"),
   and a verdict before an explanation ("No, the quotient stays, but ...") may be right either
   way;
3. nothing else: no made-up words.

A list of letters (``b, a, d, c``, an order of named quantities) gets its last letter changed to
one it does not hold (:func:`letter_edits`).

Certified as text (:func:`text_certified`): normalised (commands such as ``\\text`` dropped with
their braces, case, punctuation and spacing folded), the twin differs from the answer judged
right and from the reference; the words it brings in appear in neither (a reference that uses
them may make the twin right: "A stopped clock ..." for ``stopped``, "Any odd number" for
``odd``); and math-verify, where it reads both, does not call it equal to either
(:func:`~.twin_read.math_verify_equal`).
"""

from __future__ import annotations

import re

from cooper.labelling.twin_read import math_verify_equal

_PAIRS = (
    "odd even", "east west", "north south", "left right", "up down", "upward downward",
    "increasing decreasing", "maximum minimum", "max min", "convergent divergent",
    "converges diverges", "converge diverge", "possible impossible", "finite infinite",
    "positive negative", "acute obtuse", "always never", "inside outside", "above below",
    "first second", "win lose", "wins loses", "winner loser", "yes no", "true false",
    "prime composite", "rational irrational", "circle ellipse", "parabola hyperbola",
    "horizontal vertical", "parallel perpendicular", "clockwise counterclockwise",
    "concave convex", "bounded unbounded", "open closed", "countable uncountable",
    "dependent independent", "consistent inconsistent", "larger smaller", "more less",
    "most least", "before after", "heads tails", "white black", "inscribed circumscribed",
    "incircle circumcircle", "incenter circumcenter", "inradius circumradius",
    "necessary sufficient")
ANTONYMS: dict[str, str] = {w: o for a, b in map(str.split, _PAIRS) for w, o in ((a, b), (b, a))}
"""each word's one opposite (each word is in one pair)"""

_WRAPPED = re.compile(r"(\s*(?:\\(?:text|textbf|textit|textrm|mathrm|mbox)\s*\{\s*)?)(.*?)"
                      r"(\s*\.?\s*\}?\s*\.?\s*)", re.S)
_CORE = re.compile(r"[A-Za-z][A-Za-z' ,\-]*[A-Za-z]|[A-Za-z]")
_MATH = re.compile(r"\$\$.*?\$\$|\$[^$]*\$|\\\(.*?\\\)|\\\[.*?\\\]", re.S)
_QUOTED_ITEM = re.compile(r"[\"“]([A-Za-z][A-Za-z' \-]*)[\"”]")  # "odd" -> odd: one item
_BOUNDED = re.compile(r"\(([^()]*)\)|\[([^\[\]]*)\]|[\"“]([^\"”]*)[\"”]")
_SEGMENT = re.compile(r"[^.?!;:\n|]+")
_SEP = re.compile(r"\s*,\s*(?:(?:and|or)\s+)?|\s+(?:and|or)\s+|\s*/\s*")
_ITEM = re.compile(r"[A-Za-z][A-Za-z' \-]*")
_NAME = re.compile(r"(?<![A-Za-z\\])[A-Z][a-z]+(?![A-Za-z])")
_LOWER = re.compile(r"(?<![A-Za-z\\])[a-z]+(?![A-Za-z])")
_LETTERS = re.compile(r"\s*\(?\s*[A-Za-z](?:\s*,\s*[A-Za-z])+\s*\)?\s*")
_SKIP_LETTERS = frozenset("eEiIoO")  # Euler's number, the imaginary unit, a zero look-alike


def in_case_of(word: str, like: str) -> str:
    """``word`` in the case ``like`` is written in (YES, Yes, yes; Seventy-Two)."""
    if like.isupper() and len(like) > 1:
        return word.upper()
    parts = re.split(r"([ \-])", like)
    if len(parts) > 1 and all(p[:1].isupper() for p in parts[::2] if p):
        return "".join(p[:1].upper() + p[1:] for p in re.split(r"([ \-])", word))
    if like[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def normal_text(s: str) -> str:
    """Text as compared: LaTeX commands dropped (``\\text{East}``: East), punctuation and
    spacing folded, lower case."""
    s = re.sub(r"\\[A-Za-z]+", " ", s)
    return " ".join(re.sub(r"[^A-Za-z0-9]+", " ", s).lower().split())


def _holds(text: str, phrase: str) -> bool:
    words = normal_text(phrase)
    return bool(words) and re.search(rf"(?<![a-z0-9]){re.escape(words)}(?![a-z0-9])",
                                     normal_text(text)) is not None


def text_certified(twin: str, new: str, judged: str, reference: str) -> bool:
    """A text twin proven wrong as text: it differs from the answer judged right and from the
    reference, neither holds the words ``new`` it brings in, and math-verify calls it equal to
    neither."""
    mine = normal_text(twin)
    for other in (judged, reference):
        if not other:
            continue
        if mine == normal_text(other) or _holds(other, new) or math_verify_equal(twin, other):
            return False
    return True


# ------------------------------------------------------------------ options of the question

def _words(s: str) -> list[str]:
    return s.split()


def _lists(question: str) -> list[tuple[list[str], bool]]:
    """The lists the question writes, in its order: (items, bounds known). Bounds are known in
    brackets or quotes, or where the items share first words (dropped); elsewhere the first
    item may hold the words before the list and the last those after it."""
    q = _QUOTED_ITEM.sub(r"\1", _MATH.sub(" | ", question))
    found = [(m.start(), next(g for g in m.groups() if g is not None), True)
             for m in _BOUNDED.finditer(q)]
    rest = _BOUNDED.sub(lambda m: "|" * len(m.group()), q)
    found += [(m.start(), m.group(), False) for m in _SEGMENT.finditer(rest)]
    out = []
    for _, text, bounded in sorted(found):
        items = [" ".join(_words(i)) for i in _SEP.split(text.strip(" ,")) if i.strip()]
        if len(items) < 2:
            continue
        split = [_words(i) for i in items]
        shared = 0
        while all(len(w) > shared + 1 and w[shared] == split[0][shared] for w in split):
            shared += 1
        out.append(([" ".join(w[shared:]) for w in split], bounded or shared > 0))
    return out


def _shape(s: str) -> tuple[bool, ...]:
    return tuple(w[:1].isupper() for w in _words(s))


def _fits(item: str, core: str, common: bool) -> bool:
    """An item of the answer's shape: its words capitalised where the answer's are, or, for
    an answer the question writes in lower case (``common``: Odd, not Petya), all in lower
    case (written in the answer's case)."""
    return _shape(item) == _shape(core) or (common and item.islower())


def _next_items(core: str, items: list[str], known: bool, common: bool) -> list[str]:
    """The items after ``core`` in the list (then those before it) that can stand for it."""
    n = len(_words(core))
    if not known:  # the first and last items cut to the answer's length
        items = ([" ".join(_words(items[0])[-n:])] + items[1:-1]
                 + [" ".join(_words(items[-1])[:n])])
    folded = [i.lower() for i in items]
    if core.lower() not in folded:
        return []
    at = folded.index(core.lower())
    return [i for i in items[at + 1:] + items[:at] if _ITEM.fullmatch(i)
            and (known or (len(_words(i)) == n and _fits(i, core, common)))]


def _aligned(core: str, items: list[str], common: bool) -> list[str]:
    """The words in the answer's place in the other items of a list whose items share a
    template ("Navin from Mauritius, Luka from Croatia": Luka), where the answer is one word."""
    split = [_words(i) for i in items]
    for at, words in enumerate(split):
        if core not in words:
            continue
        k = words.index(core)
        return [w[k] for w in split[at + 1:] + split[:at]
                if len(w) > k and _fits(w[k], core, common) and _ITEM.fullmatch(w[k])
                and any(m != k and m < len(w) and w[m] == words[m] for m in range(len(words)))]
    return []


def _names(question: str) -> list[str]:
    """Capitalised words found other than at a sentence's start, never in lower case: names,
    in the question's order."""
    q = _MATH.sub(" § ", question)
    lower = set(_LOWER.findall(q))
    names: list[str] = []
    inner = set()
    for m in _NAME.finditer(q):
        at = m.start() - 1
        while at >= 0 and q[at] in " \t":
            at -= 1
        if at >= 0 and q[at] not in ".?!:\n":
            inner.add(m.group())
        if m.group() not in names:
            names.append(m.group())
    return [w for w in names if w in inner and w.lower() not in lower]


def _as(core: str, item: str) -> str:
    """An option in the answer's case: a word in lower case as the answer is written (Odd:
    Even), a name as the question writes it (but in lower case for an answer in lower case)."""
    if item.islower():
        return in_case_of(item, core)
    return item.lower() if core.islower() else item


def option_edits(core: str, question: str) -> list[tuple[str, str]]:
    """(twin, the words it brings in): the next options of the question's lists holding the
    answer ``core``, then the next names, in the question's order."""
    out: list[tuple[str, str]] = []
    parts = [p for p in _SEP.split(core) if p]
    common = core.islower() or core.lower() in _LOWER.findall(_MATH.sub(" ", question))
    for items, known in _lists(question):
        if len(parts) == 1:
            out += [(_as(core, i), i) for i in
                    _next_items(core, items, known, common) or _aligned(core, items, common)]
        elif known and all(p.lower() in [i.lower() for i in items] for p in parts):
            at = [i.lower() for i in items].index(parts[-1].lower())
            taken = {p.lower() for p in parts}
            head = core[:core.rfind(parts[-1])]
            out += [(head + i, i) for i in items[at + 1:] + items[:at]
                    if i.lower() not in taken and _ITEM.fullmatch(i)]
    if _NAME.fullmatch(core):
        names = _names(question)
        if core in names:
            at = names.index(core)
            out += [(n, n) for n in names[at + 1:] + names[:at]]
    return out


def antonym_edits(core: str) -> list[tuple[str, str]]:
    """(twin, the word it brings in): the opposite of a one-word answer (after "the")."""
    m = re.fullmatch(r"((?:the|The|THE)\s+)?([A-Za-z]+)", core)
    word = m.group(2) if m else ""
    if word.lower() not in ANTONYMS:
        return []
    new = in_case_of(ANTONYMS[word.lower()], word)
    return [((m.group(1) or "") + new, new)] if m else []


def text_edits(answer: str, question: str | None) -> list[tuple[str, str, str]]:
    """(twin answer, the words it brings in, "option" | "antonym") for an answer in words, in
    the order tried: the question's options, then an opposite; the answer's wrapper
    (``\\text{...}``, a final period) kept."""
    m = _WRAPPED.fullmatch(answer)
    if m is None or not _CORE.fullmatch(m.group(2)):
        return []
    before, core, after = m.groups()
    found = ([(t, n, "option") for t, n in option_edits(core, question)] if question else [])
    found += [(t, n, "antonym") for t, n in antonym_edits(core)]
    return [(before + twin + after, new, how) for twin, new, how in found
            if twin.lower() != core.lower()]


# ------------------------------------------------------------------ letters

def letter_edits(answer: str) -> list[tuple[str, str, str]]:
    """(twin, the letter it brings in, the letter it replaces): a list of letters (``b, a, d,
    c``) with its last letter changed to the next one of its case it does not hold (not e, i
    or o: a constant, a unit, a zero)."""
    if not _LETTERS.fullmatch(answer):
        return []
    spots = list(re.finditer(r"[A-Za-z]", answer))
    held = {m.group() for m in spots}
    last = spots[-1]
    base = ord("a") if last.group().islower() else ord("A")
    at = ord(last.group()) - base
    out = []
    for k in range(1, 26):
        c = chr(base + (at + k) % 26)
        if c not in held and c not in _SKIP_LETTERS:
            out.append((answer[:last.start()] + c + answer[last.end():], c, last.group()))
    return out[:3]


def letter_certified(twin: str, new: str, old: str, judged: str, reference: str) -> bool:
    """A list of letters proven different, element by element: the letter brought in is in
    neither the answer judged right nor the reference (the twin names a quantity they do not,
    where they name another), math-verify calls it unequal to the letter it replaces, and the
    twin not equal to the reference. (math-verify reads ``b, a, d, c`` as the text ``b, a,
    d,``, its last letter dropped: its verdict on two whole lists is no check.)"""
    alone = re.compile(rf"(?<![A-Za-z\\]){re.escape(new)}(?![A-Za-z])")
    return (not any(other and alone.search(other) for other in (judged, reference))
            and not math_verify_equal(new, old)
            and not (reference and math_verify_equal(twin, reference)))
