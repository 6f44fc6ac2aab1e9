"""Reading a final answer for the proofs of :mod:`.twin_certify`: a truth value, a choice
letter, or math-verify's sympy value.

math-verify reads LaTeX into sympy (``parse("$...$")``, as :mod:`cooper.verify.verifier`
calls it); its ``verify`` is not used here. An answer also reads as what the project's own
readers say it is (:mod:`cooper.verify.gold`: yes/no, an integer in digits, words or Roman
numerals), a decimal as a float and a plain fraction as a rational without a parse (the bulk
of answers: each parse costs tens of milliseconds). A percent or an angle in degrees reads two
ways (``9\\%`` as 0.09 and 9, ``30^\\circ`` as 30 and pi/6). A reference is read only where
math-verify reads it whole (:func:`read_reference`): one with words, a set-builder, or an
inequality that comes back a number would otherwise be compared as something it is not.

Reading is bounded: text over :data:`MAX_CHARS` or nested deeper than :data:`MAX_NESTING` is
not read; math-verify's parse runs without its SIGALRM timeout (judging may run in a non-main
thread, where signals cannot be set, and math-verify 0.9's timeout is SIGALRM on Unix; the
length and nesting bounds replace it); and values whose evaluation could run away (a power
with a huge or nested exponent, a factorial of a large or nested argument, sums, products,
integrals, limits) are not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cooper.verify.extraction import clean_answer
from cooper.verify.gold import read_boolean, read_integer

MAX_CHARS = 200  # longer answers are not read (and no twin is made for them)
MAX_NESTING = 8  # deeper brackets are not read (each parse would cost up to seconds)
MAX_EXPONENT = 10_000  # largest exact exponent or factorial argument evaluated

_CHOICE = re.compile(r"(?:\\(?:text|textbf|mathrm|mathbf)\{\s*)?\(?\s*([A-E])\s*\)?(?:\s*\})?")
_TEXT_NUMBER = re.compile(r"\\(?:text|mbox|mathrm)\{\s*(-?[\d.,]+)\s+[A-Za-z][A-Za-z .]*\}")
_UNIT = re.compile(r"(?<=[\w}.)])\s*\\(?:text|mbox|mathrm)\s*\{\s*[A-Za-z][A-Za-z .]*\}"
                   r"(?:\^\s*\{?\s*\d\s*\}?)?\s*$")
_SET_BUILDER = re.compile(r"\\mid|\\\{[^|]*\|")
RELATION = re.compile(r"\\(?:le|ge|leq|geq|leqslant|geqslant|neq|ne|lt|gt)\b|[<>≤≥≠]")
_DECIMAL = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d*)\.\d+")
_FRACTION = re.compile(r"(-?)\s*\\[dt]?frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\}|(-?)(\d+)\s*/\s*(\d+)")
_PERCENT = re.compile(r"\\?%")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree")
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}")
_FUNCTIONS = frozenset("sin cos tan cot sec csc log ln exp max min gcd lcm mod arcsin arccos "
                       "arctan sinh cosh tanh det deg lim sqrt frac dfrac tfrac pmatrix bmatrix "
                       "matrix begin end left right cdot times infty circ text mbox mathrm "
                       "binom dbinom ceil floor lceil rceil lfloor rfloor".split())


@dataclass(frozen=True)
class Reading:
    """One way an answer reads: a truth value, a choice letter, or a sympy value."""

    kind: str  # "truth" | "choice" | "math"
    value: Any
    seen: str = ""  # the text math-verify read the value from (it matches answers on it too)


def has_words(text: str) -> bool:
    """Whether the text holds an English word (3+ letters that are no LaTeX command and no
    function name): math-verify then reads its letters as a product of variables."""
    return any(w.lower() not in _FUNCTIONS for w in _WORD.findall(text))


def choice_letter(text: str) -> str | None:
    """The letter of a multiple-choice answer (``C``, ``(C)``, ``\\text{(C)}``), else None."""
    m = _CHOICE.fullmatch(clean_answer(text))
    return m.group(1) if m else None


def strip_units(s: str) -> str:
    """A cleaned answer without its unit: ``\\text{7 apples}`` -> ``7``, ``5.4 \\text{ cents}``
    -> ``5.4`` (a text alone, ``\\text{Evelyn}``, is kept)."""
    bare = _UNIT.sub("", _TEXT_NUMBER.sub(r"\1", s)).strip()
    # a unit after a number; where words remain, "\text{...}" is part of a sentence
    return s if has_words(bare) else bare


def read_reference(text: str) -> tuple[Reading, ...]:
    """The readings of a reference that math-verify reads whole (empty where it cannot): one
    with words, a set-builder, an inequality read as a number, variables read as a constant
    or symbols it does not know would be compared as something it is not."""
    if not isinstance(text, str) or len(text) > MAX_CHARS:
        return ()
    found = read(text)
    s = strip_units(clean_answer(text))
    if any(r.kind != "math" for r in found) or not found:
        return found
    if has_words(s) or _SET_BUILDER.search(s) or re.search(r"[^\x00-\x7fπ]", s):
        return ()
    return found if all(_plausible(s, r.value) for r in found[:1]) else ()


def _plausible(s: str, value: Any) -> bool:
    from sympy import And, Or, Set
    from sympy.core.relational import Relational
    from sympy.matrices import MatrixBase

    if isinstance(value, MatrixBase):
        return True
    if RELATION.search(s) and not (value.has(Relational) or value.has(And, Or)
                                    or isinstance(value, Set) or value.atoms(Set)):
        return False
    letters = set(re.findall(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", s))) - {"e", "i"}
    return not letters or bool(value.free_symbols)


def read(text: str, *, roman: bool = False) -> tuple[Reading, ...]:
    """Every reading of an answer (empty: unreadable). ``roman``: a lone capital letter is a
    Roman numeral rather than a choice letter."""
    if not isinstance(text, str) or len(text) > MAX_CHARS or _nesting(text) > MAX_NESTING:
        return ()
    return _read(text, roman)


def math_verify_equal(a: str, b: str) -> bool:
    """Whether math-verify reads both answers and calls them equal (its own ``verify``, bounded
    as :func:`read` is: a longer or deeper answer is not read, so not called equal). A veto for
    the twins certified as text, never a proof that two answers differ."""
    a, b = clean_answer(a), clean_answer(b)
    if a == b:
        return True
    if any(len(s) > MAX_CHARS or _nesting(s) > MAX_NESTING for s in (a, b)):
        return False
    import math_verify.grader
    import math_verify.parser
    from math_verify import parse, verify

    # without its SIGALRM timeouts (see _parse): its warnings that we must bound it are noise
    math_verify.parser.TIMEOUT_WARNING_SHOWN = math_verify.grader.TIMEOUT_WARNING_SHOWN = True
    try:
        gold, pred = parse(f"${b}$", parsing_timeout=None), parse(f"${a}$", parsing_timeout=None)
        return bool(gold) and bool(pred) and bool(verify(gold, pred, timeout_seconds=None))
    except Exception:  # noqa: BLE001 -- what math-verify cannot read it calls equal to nothing
        return False


def _nesting(text: str) -> int:
    """The deepest nesting of brackets and braces: math-verify's parser takes time growing
    about 1.5-fold per level (14 nested braces: seconds)."""
    depth = deepest = 0
    for c in text:
        if c in "{([":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "})]":
            depth = max(0, depth - 1)
    return deepest


@lru_cache(maxsize=8192)
def _read(text: str, roman: bool) -> tuple[Reading, ...]:
    truth = read_boolean(text)
    if truth is not None:
        return (Reading("truth", truth),)
    s = clean_answer(text)
    if not roman and (letter := choice_letter(s)) is not None:
        return (Reading("choice", letter),)
    value = read_integer(s)  # digits, words, Roman numerals ("C" alone: a choice unless roman)
    if value is not None:
        from sympy import Integer
        return (Reading("math", Integer(value)),)
    fast = _fast(s)
    if fast is not None:
        return (Reading("math", fast, s),)
    s = strip_units(s)
    main, seen = _parse(s)
    if main is None:
        return ()
    out = [Reading("math", main, seen)]
    if _PERCENT.search(s):  # "9%": 0.09, and 9 as math-verify also reads it
        bare = _parse(_PERCENT.sub("", s))[0]
        if bare is not None:
            out.append(Reading("math", bare))
    if _DEGREES.search(s) and _is_expr(main):  # "30^\circ": 30, and pi/6
        from sympy import pi
        out.append(Reading("math", main * pi / 180))
    return tuple(out)


def _fast(s: str) -> Any:
    """A decimal (a float, as math-verify reads it) or a plain fraction (a rational), read
    without a parse; else None."""
    if _DECIMAL.fullmatch(s):
        from sympy import Float
        return Float(s.replace(",", ""), 30)
    m = _FRACTION.fullmatch(s)
    if m:
        sign, num, den = m.group(1, 2, 3) if m.group(2) else m.group(4, 5, 6)
        if int(den) != 0:
            from sympy import Rational
            return Rational(int(num), int(den)) * (-1 if sign else 1)
    return None


def _parse(s: str) -> tuple[Any, str]:
    """math-verify's reading of a LaTeX answer and the text it read it from; (None, "") where
    it is unreadable, a string, or unsafe to evaluate."""
    if not s:
        return None, ""
    import math_verify.parser
    from math_verify import parse
    from sympy import Basic
    from sympy.matrices import MatrixBase

    # Without its SIGALRM timeout (non-main threads), math-verify warns once that we must
    # bound the work ourselves: MAX_CHARS, MAX_NESTING and _tame do, so its warning is noise
    # (silenced by its own flag, not by muting its logger for the whole process)
    math_verify.parser.TIMEOUT_WARNING_SHOWN = True
    try:
        found = parse(f"${s}$", parsing_timeout=None)
    except Exception:  # noqa: BLE001 -- anything math-verify cannot read is unreadable
        return None, ""
    value = found[0] if found else None
    if not isinstance(value, Basic | MatrixBase) or not _tame(value):
        return None, ""
    seen = found[1] if len(found) > 1 and isinstance(found[1], str) else ""
    return (value.applyfunc(_evaluated) if isinstance(value, MatrixBase)
            else _evaluated(value)), seen


def _evaluated(e: Any) -> Any:
    """``e`` with math-verify's UnevaluatedExpr wrappers (``50\\%`` is 50*(1/100)) taken off:
    evalf cannot see through them. Safe after :func:`_tame` (no huge exact power or
    factorial is rebuilt)."""
    from sympy import UnevaluatedExpr

    inner = {u: u.args[0] for u in e.atoms(UnevaluatedExpr)}
    return e.xreplace(inner) if inner else e


def _tame(e: Any) -> bool:
    """Whether evaluating ``e`` (or rebuilding it) is safe: no power with a huge or nested
    exponent, no factorial or binomial of a large or nested argument, no sums, products,
    integrals or limits (each can take minutes or all memory to evaluate)."""
    from sympy import Integral, Limit, Pow, Product, Sum, binomial, factorial, factorial2
    from sympy.matrices import MatrixBase

    if isinstance(e, MatrixBase):
        return all(_tame(x) for x in e)
    if e.has(Sum, Product, Integral, Limit, factorial2):
        return False
    for f in e.atoms(factorial, binomial):
        if any(not _small(a) for a in f.args):
            return False
    return all(_small(p.exp) for p in e.atoms(Pow))


def _small(e: Any) -> bool:
    """A factorial's argument or a power's exponent that is safe to evaluate exactly: no
    factorial in it, no numeric power in it with an exponent over 3 (``2^{2^{100}}``: a
    tower), and, where it is a number, at most :data:`MAX_EXPONENT`."""
    from sympy import Pow, factorial

    if e.has(factorial) or (e.has(Pow) and not e.free_symbols and any(
            q.exp.is_number and abs(q.exp) > 3 for q in e.atoms(Pow))):
        return False
    if e.is_Integer or e.is_Rational:
        return abs(e) <= MAX_EXPONENT
    return True


def _is_expr(e: Any) -> bool:
    from sympy import Expr
    return isinstance(e, Expr)
