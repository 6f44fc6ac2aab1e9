"""Wrong twins certified part by part (:mod:`.counterfactual`): lists of equations, and answers
with a quantifier in words.

math-verify reads some answers in part, or calls two of them equal whatever they say:
``T(10)=2, T(11)=4, T(12)=3`` (it unwraps a function's value at a number into a name, and then
any two such lists are equal), ``(f(n), g(n)) = (n, 1) \\text{ for all positive integers } n``
(it reads 1), ``(-32 + 3t, 64 - 5t) \\text{ for some integer } t`` (it reads 5). A reading of
the whole proves nothing there, so such a twin (one number changed, as for any answer) is
certified here, element by element:

* the answer splits at its top-level commas and ``\\text{ and }`` / ``\\text{ or }`` into
  elements: a head in math (an equation's two sides read apart by :mod:`.twin_read`) and a
  tail, none or a quantifier: over all of an infinite domain ("\\text{ for all } x \\in
  \\mathbb{Z}", "for all positive integers n") or naming one parameter ("\\text{ for some
  integer } t"). Any other tail (a condition: "where c is a positive integer with ...") is
  not read, and no twin is certified here;
* the twin has its source's elements and tails, one head changed;
* facts (``NAME = value``, ``NAME(args) = value``; a tuple of names split into its
  components): the twin holds a fact whose right side is proven different from that of every
  fact with the same left side in the other answer (there is one; a function's argument
  renamed), its difference a nonzero number or a nonzero polynomial in the quantified
  variables (then the two differ at all but finitely many points of an infinite domain).
  Another left side says another thing. Against a reference of bare values (``2,4,3``), the
  twin's values as a set must differ;
* a family in one parameter: a component linear in the parameter on both sides fixes the
  other's parameter, and another component then differs by a nonzero number, so no member of
  the twin's family is one of the other's (``(-32 + 3t, 65 - 5t)`` against ``(-32 + 3x, 64 -
  5x)``; a changed coefficient, ``64 - 6t``, is not proven and not taken).

math-verify's second path then compares the changed element's right side with its source's
(:attr:`Found.checks`), not the whole answers it does not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cooper.labelling.twin_certify import FLOAT_TOL, different
from cooper.labelling.twin_read import Reading, read

HOWS: tuple[str, ...] = ("value", "elements", "family", "letters", "option", "antonym")
"""how a twin was certified: its reading (:mod:`.twin_certify`); element by element or as a
family (here); as text (:mod:`.twin_text`: a list of letters, an option of the question, an
opposite)"""


@dataclass(frozen=True)
class Found:
    """A certified twin's answer, how it was certified, and what the second path compares."""

    answer: str
    how: str  # one of HOWS
    # (twin's, source's) pieces math-verify must call unequal; empty: the whole answers
    checks: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class _Element:
    head: str  # math
    tail: str  # a quantifier in words, or ""


@dataclass(frozen=True)
class _Fact:
    lhs: Any  # what the fact gives (x, f(x), T(10)); None: a bare value
    rhs: Any
    over: frozenset | None = None  # the quantified variables' names; None: any symbol


_JOIN = re.compile(r"\s*,?\s*\\(?:text|mbox|textrm)\s*\{\s*,?\s*(?:and|or)\s*,?\s*\}\s*,?\s*"
                   r"|\s*,\s*")
_TAIL = re.compile(r"\\(?:text|mbox|textrm|mathrm)\s*\{|\\forall\b")
_TRAILING = re.compile(r"(?:\s|\\[,;:! ]|\\q?quad\b)+$")
_SORT = (r"(?:(?:positive|nonnegative|non-negative|negative)\s+)?(?:integers?|natural\s+numbers?"
         r"|real\s+numbers?|reals?|rationals?|rational\s+numbers?|complex\s+numbers?)")
_SET = r"in\s+[ZNRQC](?:\s*\^?\s*[+*]|\s*_\s*(?:>\s*0|\+|0))?"
_ALL = re.compile(rf"(?:for\s+(?:all|every|each|any)|forall)\s+(?:{_SORT}\s+)?"
                  rf"([a-z](?:\s+[a-z])*)(?:\s+{_SET})?")
_SOME = re.compile(rf"(?:for\s+some|where)\s+(?:{_SORT}\s+)?([a-z])"
                   rf"(?:\s+{_SET}|\s+is\s+an?\s+{_SORT})?")


# ------------------------------------------------------------------ reading the parts

def _split(answer: str) -> list[_Element]:
    """The answer's elements: split at top-level joins, each cut at its first words."""
    pieces, depth, start, i = [], 0, 0, 0
    while i < len(answer):
        m = _JOIN.match(answer, i) if depth == 0 else None
        if m:
            pieces.append(answer[start:i])
            start = i = m.end()
            continue
        depth = max(0, depth + (answer[i] in "([{") - (answer[i] in ")]}"))
        i += 1
    pieces.append(answer[start:])
    out = []
    for p in pieces:
        m = _TAIL.search(p)
        head, tail = (p[:m.start()], p[m.start():]) if m else (p, "")
        out.append(_Element(_TRAILING.sub("", head).strip().strip("$").strip(), tail.strip()))
    return out


def _tail(tail: str) -> tuple[str, frozenset] | None:
    """("none" | "all" | "some", the names of the variables it names); None: a tail not
    read."""
    if not tail:
        return "none", frozenset()
    s = re.sub(r"\\mathbb\s*\{\s*([A-Z])\s*\}|\\mathbb\s*([A-Z])",
               lambda m: f" {m.group(1) or m.group(2)} ", tail)
    s = re.sub(r"\\forall\b", " forall ", re.sub(r"\\in\b", " in ", s))
    s = re.sub(r"\\[,;:! ]|\\[A-Za-z]+|[{}$,.~]", " ", s)  # \text and its braces: its words
    s = " ".join(s.split())
    for kind, pattern in (("all", _ALL), ("some", _SOME)):
        m = pattern.fullmatch(s)
        if m:
            return kind, frozenset(m.group(1).split())
    return None


def _top_equals(head: str) -> list[str] | None:
    """The head's two sides at its one top-level "=" ([head] without one; None: several)."""
    depth, cuts = 0, []
    for i, c in enumerate(head):
        depth = max(0, depth + (c in "([{") - (c in ")]}"))
        if (c == "=" and depth == 0 and head[i - 1:i] not in ("<", ">", "!", "\\", "=")
                and head[i + 1:i + 2] != "="):
            cuts.append(i)
    if len(cuts) > 1:
        return None
    return [head[:cuts[0]], head[cuts[0] + 1:]] if cuts else [head]


def _right(head: str) -> str:
    sides = _top_equals(head)
    return sides[-1].strip() if sides else head


def _pair(v: Any) -> Any:
    """math-verify reads ``(a, b)`` as an open interval: a pair here."""
    from sympy import Interval, Tuple

    if isinstance(v, Interval) and v.left_open and v.right_open:
        return Tuple(v.start, v.end)
    return v


def _value(text: str) -> Any:
    found = read(text)
    return _pair(found[0].value) if len(found) == 1 and found[0].kind == "math" else None


def _named(v: Any) -> bool:
    """A left side that names what the right side gives: x, f(x), T(10)."""
    from sympy import Symbol
    from sympy.core.function import AppliedUndef

    return isinstance(v, Symbol) or (isinstance(v, AppliedUndef)
                                     and all(a.is_Symbol or a.is_number for a in v.args))


def _assignments(lhs: Any, rhs: Any, over: frozenset | None) -> list[_Fact] | None:
    from sympy import Tuple

    if isinstance(lhs, Tuple):  # (f(n), g(n)) = (n, 1): two facts
        if not (isinstance(rhs, Tuple) and len(rhs) == len(lhs) and all(map(_named, lhs))):
            return None
        return [_Fact(a, b, over) for a, b in zip(lhs, rhs, strict=True)]
    return [_Fact(lhs, rhs, over)] if _named(lhs) else None


def _meaning(elements: list[_Element]) -> tuple[str, Any] | None:
    """("facts", [facts]) or ("family", (components, parameter)); None: not read."""
    tails = [t for t in map(_tail, (e.tail for e in elements)) if t is not None]
    sides = [_top_equals(e.head) for e in elements]
    if len(tails) != len(elements) or any(s is None for s in sides):
        return None
    if any(kind == "some" for kind, _ in tails):  # one family, in one parameter
        (kind, names), (parts,) = tails[0], sides
        if len(elements) != 1 or len(names) != 1 or parts is None:
            return None
        lhs = _value(parts[0]) if len(parts) == 2 else None
        family = _family(_value(parts[-1]), lhs, next(iter(names)))
        return None if family is None or (len(parts) == 2 and lhs is None) else (
            "family", family)
    facts: list[_Fact] = []
    for (kind, names), parts in zip(tails, sides, strict=True):
        if parts is None or len(parts) != 2:
            return None
        lhs, rhs = _value(parts[0]), _value(parts[1])
        found = None if lhs is None or rhs is None else _assignments(
            lhs, rhs, names | _arguments(lhs) if kind == "all" else None)
        if found is None:
            return None
        facts += found
    return "facts", facts


def _arguments(lhs: Any) -> frozenset:
    from sympy import Tuple

    return frozenset(s.name for x in (lhs if isinstance(lhs, Tuple) else [lhs])
                     for s in getattr(x, "free_symbols", ()))


def _family(rhs: Any, lhs: Any, param: str | None = None) -> tuple[tuple, Any] | None:
    """(components, parameter) of a family: its one parameter ``param`` (else the one symbol
    its right side holds that its left side does not)."""
    from sympy import Expr, Tuple

    if rhs is None or (lhs is not None and not all(map(_named, lhs if isinstance(lhs, Tuple)
                                                         else [lhs]))):
        return None
    parts = tuple(rhs) if isinstance(rhs, Tuple) else (rhs,)
    if not all(isinstance(p, Expr) for p in parts):
        return None
    named = _arguments(lhs)
    free = {s for p in parts for s in p.free_symbols if s.name not in named}
    if len(free) != 1 or (param is not None and next(iter(free)).name != param):
        return None
    return parts, next(iter(free))


def reference_meaning(truth: tuple[Reading, ...], kind: str) -> tuple[str, Any] | None:
    """A readable reference as facts or a family (``kind``); None: not comparable."""
    from sympy import Eq, FiniteSet, Tuple

    if len(truth) != 1 or truth[0].kind != "math":
        return None
    v = _pair(truth[0].value)
    if kind == "family":
        lhs, rhs = (_pair(v.lhs), _pair(v.rhs)) if isinstance(v, Eq) else (None, v)
        family = _family(rhs, lhs)
        return None if family is None else ("family", family)
    equations = [v] if isinstance(v, Eq) else list(v) if isinstance(v, FiniteSet | Tuple) else []
    if not equations or not all(isinstance(e, Eq) for e in equations):
        return "facts", [_Fact(None, v)]
    facts: list[_Fact] = []
    for e in equations:
        found = _assignments(_pair(e.lhs), _pair(e.rhs), None)
        if found is None:
            return None
        facts += found
    return "facts", facts


# ------------------------------------------------------------------ proofs

def _apart(a: Any, b: Any, over: frozenset | None) -> bool:
    """Two right sides proven different: numbers apart (:func:`.twin_certify.different`, with
    math-verify's float rounding), or a difference that is a polynomial in ``over`` (any
    symbol where None) with a coefficient proven nonzero."""
    from sympy import Expr, Float, Poly, Tuple

    if isinstance(a, Tuple) and isinstance(b, Tuple):
        return len(a) != len(b) or any(_apart(x, y, over) for x, y in zip(a, b, strict=True))
    if not (isinstance(a, Expr) and isinstance(b, Expr)):
        return False
    d = (a - b).expand()
    if not d.free_symbols:
        return different((Reading("math", a),), (Reading("math", b),))
    if over is not None and not {s.name for s in d.free_symbols} <= over:
        return False
    symbols = sorted(d.free_symbols, key=str)
    if not d.is_polynomial(*symbols):
        return False
    return any(c.is_zero is False and (not c.has(Float) or abs(c) > FLOAT_TOL)
               for c in Poly(d, *symbols).coeffs())


def _renaming(a: Any, b: Any) -> dict | None:
    """How ``b`` is ``a`` with its arguments renamed (f(n) is f(x)); None: another name."""
    from sympy.core.function import AppliedUndef

    if a == b:
        return {}
    if (isinstance(a, AppliedUndef) and isinstance(b, AppliedUndef) and a.func == b.func
            and len(a.args) == len(b.args) and all(x.is_Symbol for x in a.args + b.args)):
        return dict(zip(b.args, a.args, strict=True))
    return None


def _facts_differ(mine: list[_Fact], other: list[_Fact]) -> bool:
    from sympy import FiniteSet

    if all(f.lhs is not None for f in mine) and len(other) == 1 and other[0].lhs is None:
        values = [f.rhs for f in mine]  # T(10)=2, T(11)=4 against "2,4": the values as a set
        if any(getattr(v, "free_symbols", True) for v in values):
            return False
        ours = FiniteSet(*values) if len(values) > 1 else values[0]
        return different((Reading("math", ours),), (Reading("math", other[0].rhs),))
    for f in mine:
        if f.lhs is None:
            continue
        same = [(o, r) for o in other if o.lhs is not None
                and (r := _renaming(f.lhs, o.lhs)) is not None]
        if same and all(_apart(f.rhs, o.rhs.xreplace(r), f.over) for o, r in same):
            return True
    return False


def _linear(e: Any, t: Any) -> Any:
    """The coefficient of ``t`` where ``e`` is a + b*t with numbers a, b != 0; else None."""
    if e.free_symbols != {t} or not e.is_polynomial(t):
        return None
    from sympy import Poly

    p = Poly(e, t)
    b = p.coeff_monomial(t)
    return b if p.degree() == 1 and b.is_number and b.is_zero is False else None


def _family_differ(mine: tuple[tuple, Any], other: tuple[tuple, Any]) -> bool:
    (xs, t), (ys, s) = mine, other
    if len(xs) != len(ys):
        return True  # a pair is not a triple
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if _linear(x, t) is None or (b := _linear(y, s)) is None:
            continue
        at = ((x - y.xreplace({s: 0})) / b).expand()  # the one s where y(s) = x(t)
        if any(_apart(xj, yj.xreplace({s: at}), frozenset())
               for j, (xj, yj) in enumerate(zip(xs, ys, strict=True)) if j != i):
            return True
    return False


def _proven(mine: tuple[str, Any], other: tuple[str, Any] | None) -> bool:
    if other is None or mine[0] != other[0]:
        return False
    try:
        return (_family_differ if mine[0] == "family" else _facts_differ)(mine[1], other[1])
    except Exception:  # noqa: BLE001 -- sympy failing on an odd value proves nothing
        return False


def parts_certified(original: str, twin: str, judged: str,
                    truth: tuple[Reading, ...]) -> Found | None:
    """``twin`` (``original`` with one head changed) proven different, part by part, from the
    answer judged right and from the reference's reading ``truth`` where there is one."""
    mine, source = _split(twin), _split(original)
    if len(mine) != len(source) or [e.tail for e in mine] != [e.tail for e in source]:
        return None
    changed = [k for k, (a, b) in enumerate(zip(mine, source, strict=True)) if a.head != b.head]
    me = _meaning(mine) if len(changed) == 1 else None
    if me is None or not _proven(me, _meaning(source if judged == original else _split(judged))):
        return None
    if truth and not _proven(me, reference_meaning(truth, me[0])):
        return None
    k = changed[0]
    return Found(twin, "family" if me[0] == "family" else "elements",
                 ((_right(mine[k].head), _right(source[k].head)),))
