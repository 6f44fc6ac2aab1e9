"""Proof that two final answers differ, for the wrong twins of :mod:`.counterfactual`.

A twin is only worth asking about if it is certainly wrong; one that happens to be equivalent
to the answer the judge called right (or to the reference) would make an honest judge look
fooled, or confirm a wrong "yes". So a twin is kept only where this module *proves* it
differs. The answers are read by :mod:`.twin_read` (math-verify's ``parse`` to sympy, the
project's own readers for words and truth values), but math-verify's ``verify`` does not
decide: it is the rule whose blind spots the project works around, and its "not equal" is no
proof. The decision takes an independent path:

* constants: evaluated at 30 digits and compared with a relative tolerance (and, where a
  float was written, an absolute one wider than math-verify's rounding to 6 decimals, so that
  the two never disagree on a twin); exact rationals compare exactly;
* expressions with free symbols: evaluated on both sides at the same fixed-seed random points;
  different at one point where both are finite means different;
* tuples, vectors and matrices position by position (a pair is not a triple, a number not a
  pair); sets as collections of values: an element of one that differs from every element of
  the other;
* intervals, unions, one-variable inequalities (and math-verify's reading of "A or B" as the
  set {A, B}) as sets of reals: a witness point in one and not in the other (the bounds,
  midpoints between them, and beyond them), decided by sympy's membership; a parameter in
  the bounds (``[k\\pi, k\\pi + 1]``) is set to the same random values on both sides;
* equations by their right-hand sides where the left names what they give (``x = 3``,
  ``f(x) = 2x``, a function's argument renamed: ``f(z)=z`` is ``f(x)=x``); an equation
  against a value by solving it for a variable of degree one the value lacks (``xy = 6`` is
  ``y = 6/x``); two general equations by their sides not being proportional;
* choice letters and truth words as text (a truth value is neither a letter nor a number); a
  reading with several values (a percent, an angle in degrees) must differ in each.

Where math-verify read the same text on both sides (the change lies outside what it read),
nothing is proven. Anything else is "not proven", never "different": sympy failing on an odd
value proves nothing.
"""

from __future__ import annotations

import random
from typing import Any

from cooper.labelling.twin_read import Reading

POINTS = 6  # random points at which expressions with free symbols are compared
DIGITS = 30  # evaluation precision
REL_TOL = 1e-9
FLOAT_TOL = 2e-6  # math-verify rounds floats to 6 decimals: a smaller change is "equal" there
MAX_DEPTH = 4  # nesting of collections compared


# ------------------------------------------------------------------ deciding

def different(a: tuple[Reading, ...], b: tuple[Reading, ...]) -> bool:
    """Proven different: both readable and every reading of one differs from every reading of
    the other."""
    return bool(a) and bool(b) and all(_differ(x, y) for x in a for y in b)


def _differ(a: Reading, b: Reading) -> bool:
    if a.kind == "math" and b.kind == "math":
        if a.seen and a.seen == b.seen:
            return False  # the change lies outside what math-verify read (it matches the text)
        try:
            return _math_differ(a.value, b.value, 0)
        except Exception:  # noqa: BLE001 -- sympy failing on an odd value proves nothing
            return False
    if a.kind == b.kind:  # two truth values, two letters: text
        return a.value != b.value
    # a truth value is neither a letter nor a number; a letter may stand for any value
    return "truth" in (a.kind, b.kind)


def _math_differ(x: Any, y: Any, depth: int) -> bool:
    from sympy import Eq, Expr, FiniteSet, Tuple
    from sympy.matrices import MatrixBase

    if depth > MAX_DEPTH:
        return False
    if isinstance(x, Eq) or isinstance(y, Eq):
        return _eq_differ(x, y, depth)
    if _setlike(x) or _setlike(y):
        return _set_differ(x, y, depth)
    collections = (Tuple, FiniteSet, MatrixBase, list, tuple)
    if isinstance(x, collections) or isinstance(y, collections):
        return _collection_differ(x, y, depth)
    if isinstance(x, Expr) and isinstance(y, Expr):
        return _scalar_differ(x, y)
    return False


# ------------------------------------------------------------------ equations

def _target(lhs: Any) -> bool:
    """Whether an equation's left side names what its right side gives (``x``, ``f(x)``,
    ``(x, y)``, ``(P(x), Q(x))``): then the right side is the answer."""
    from sympy import Symbol, Tuple
    from sympy.core.function import AppliedUndef

    def named(v: Any) -> bool:
        return isinstance(v, Symbol) or (isinstance(v, AppliedUndef)
                                         and all(isinstance(a, Symbol) for a in v.args))
    return named(lhs) or isinstance(lhs, Tuple) and all(named(v) for v in lhs)


def _eq_differ(x: Any, y: Any, depth: int) -> bool:
    from sympy import Eq
    from sympy.core.function import AppliedUndef

    for e in (x, y):
        # T(10) = 2: a function's value at a number, a label math-verify's verify unwraps
        # into a name and then calls any two such equations equal; not decided here
        if isinstance(e, Eq) and any(isinstance(f, AppliedUndef) and not f.args[0].is_Symbol
                                     for f in e.lhs.atoms(AppliedUndef)):
            return False
    if isinstance(x, Eq) and isinstance(y, Eq):
        if x.lhs == y.lhs or (_target(x.lhs) and _target(y.lhs)):
            ry = y.rhs
            if (isinstance(x.lhs, AppliedUndef) and isinstance(y.lhs, AppliedUndef)
                    and len(x.lhs.args) == len(y.lhs.args)):  # f(z)=z is f(x)=x
                ry = ry.xreplace(dict(zip(y.lhs.args, x.lhs.args, strict=True)))
            return _math_differ(x.rhs, ry, depth + 1)
        return _not_proportional(x.lhs - x.rhs, y.lhs - y.rhs)
    eq, other = (x, y) if isinstance(x, Eq) else (y, x)
    if _target(eq.lhs):
        return _math_differ(eq.rhs, other, depth + 1)
    return _equation_vs_value(eq, other, depth)


def _equation_vs_value(eq: Any, other: Any, depth: int) -> bool:
    """An equation that is no assignment (``xy = 6``, ``y + 1 = -(2x-1)^2``) against a value.
    Solved for a variable the value does not hold, where it is of degree one in it (``y =
    6/x``): every such solution must differ. Else, where the value is an expression in the
    equation's variables (no number that could solve it): it must differ from both sides."""
    from sympy import Expr

    if not isinstance(other, Expr):
        return False
    d = eq.lhs - eq.rhs
    solved = []
    for v in sorted(d.free_symbols - other.free_symbols, key=str):
        if d.is_polynomial(v) and d.as_poly(v).degree() == 1:
            a, b = d.as_poly(v).all_coeffs()
            solved.append(-b / a)
    if solved:
        return all(_math_differ(s, other, depth + 1) for s in solved)
    if other.free_symbols and other.free_symbols <= d.free_symbols:
        return all(_math_differ(side, other, depth + 1) for side in (eq.lhs, eq.rhs))
    return False


def _not_proportional(d1: Any, d2: Any) -> bool:
    """Two equations ``d1 = 0`` and ``d2 = 0`` whose sides are not proportional (the ratio
    changes between random points): different equations."""
    ratios = []
    for subs in _points(d1.free_symbols | d2.free_symbols):
        v1, v2 = _number(d1, subs), _number(d2, subs)
        if v1 is None or v2 is None:
            continue
        if abs(v2) <= REL_TOL:
            if abs(v1) > REL_TOL:
                return True
            continue
        ratios.append(v1 / v2)
    return any(_apart(r, ratios[0], False) for r in ratios[1:])


# ------------------------------------------------------------------ sets of reals

def _setlike(e: Any) -> bool:
    from sympy import And, Or, Set
    from sympy.core.relational import Relational

    if isinstance(e, Relational | And | Or) or (isinstance(e, Set) and not e.is_FiniteSet):
        return True
    # {x < 1, x > 2}: math-verify's reading of "x < 1 or x > 2" (one variable)
    return (isinstance(e, Set) and len(e) > 0 and len(e.free_symbols) == 1
            and all(isinstance(x, Relational | And | Or) for x in e))


def _as_set(e: Any, subs: dict) -> Any:
    """``e`` as a set of reals with numeric bounds (its parameters set to ``subs``), or None.
    math-verify reads "A or B" as the set {A, B}: its union here."""
    from sympy import And, FiniteSet, Or, Set, Union
    from sympy.core.relational import Relational

    if isinstance(e, FiniteSet) and _setlike(e):
        parts = [_as_set(x, subs) for x in e]
        return None if any(p is None for p in parts) else Union(*parts)
    if isinstance(e, Relational | And | Or):
        symbols = e.free_symbols - set(subs)
        if len(symbols) != 1:
            return None
        (v,) = symbols
        e = e.xreplace(subs) if subs else e
        rels = e.atoms(Relational)
        # a polynomial of low degree in one variable: as_set solves it quickly
        if not all((r.lhs - r.rhs).is_polynomial(v) and (r.lhs - r.rhs).as_poly(v).degree() <= 2
                   for r in rels):
            return None
        return e.as_set()
    if not isinstance(e, Set):
        return None
    e = e.xreplace(subs) if subs else e
    if e.free_symbols or (isinstance(e, FiniteSet) and not all(x.is_number for x in e)):
        return None
    return e


def _set_differ(x: Any, y: Any, depth: int) -> bool:
    from sympy import Interval, S, Tuple, nsimplify
    from sympy.core.relational import Relational
    from sympy.sets.sets import FiniteSet

    # math-verify reads "(1, 2)" as an interval and compares it with a pair: so do we
    for a, b in ((x, y), (y, x)):
        if isinstance(a, Interval) and isinstance(b, Tuple | FiniteSet) and not _setlike(b):
            return _collection_differ(Tuple(a.start, a.end), b, depth + 1)
    # "A < 1" and "A < 0" for the same A: different statements
    if (isinstance(x, Relational) and type(x) is type(y) and x.lhs == y.lhs
            and x.rhs.is_number and y.rhs.is_number):
        return _math_differ(x.rhs, y.rhs, depth + 1)
    # a parameter (k in [k\pi, k\pi + 1]): compared at the same random values
    params = (_symbols_of(x) | _symbols_of(y))
    for subs in _points(params) if params else [{}]:
        sx, sy = _as_set(x, subs), _as_set(y, subs)
        if sx is None or sy is None:
            continue
        bounds = sorted({_real(b) for s in (sx, sy) for b in _boundary(s)} - {None})
        probes = list(_boundary(sx) | _boundary(sy))
        probes += ([bounds[0] - 1, bounds[-1] + 1] if bounds else [0])
        probes += [(p + q) / 2 for p, q in zip(bounds, bounds[1:], strict=False)]
        for p in probes:
            p = nsimplify(p, rational=True) if isinstance(p, float) else p
            if not getattr(p, "is_finite", False):
                continue
            inx, iny = sx.contains(p), sy.contains(p)
            if inx in (S.true, S.false) and iny in (S.true, S.false) and inx != iny:
                return True
    return False


def _symbols_of(e: Any) -> set:
    """The parameters of a set (its bounds' symbols); a relation's variable is no parameter."""
    from sympy import And, FiniteSet, Or, Set
    from sympy.core.relational import Relational

    if isinstance(e, Relational | And | Or):
        return set()
    if isinstance(e, FiniteSet) and _setlike(e):
        return set()
    return set(e.free_symbols) if isinstance(e, Set) else set()


def _boundary(s: Any) -> set:
    try:
        return {b for b in s.boundary if b.is_finite} if s.boundary.is_FiniteSet else set()
    except Exception:  # noqa: BLE001
        return set()


def _real(b: Any) -> float | None:
    try:
        return float(b.evalf(DIGITS))
    except Exception:  # noqa: BLE001
        return None


# ------------------------------------------------------------------ collections

def _items(e: Any) -> tuple[list, bool, tuple | None]:
    """(elements, ordered, shape) of a collection; a scalar is a one-element set."""
    from sympy import FiniteSet, Tuple
    from sympy.matrices import MatrixBase

    if isinstance(e, MatrixBase):
        return list(e), True, e.shape
    if isinstance(e, Tuple):
        return list(e), True, None
    if isinstance(e, FiniteSet | list | tuple):
        return list(e), False, None
    return [e], False, None


def _collection_differ(x: Any, y: Any, depth: int) -> bool:
    from sympy import FiniteSet, Tuple

    ex, ox, shx = _items(x)
    ey, oy, shy = _items(y)
    if ox and oy:  # tuples, vectors, matrices: position by position
        vector = {s for s in (shx, shy) if s is not None} <= {(len(ex), 1), (1, len(ex))}
        if len(ex) != len(ey) or (shx != shy and not vector):
            return True  # a pair is not a triple, a 2x2 matrix not a vector of 4
        return any(_math_differ(a, b, depth + 1) for a, b in zip(ex, ey, strict=True))
    for one, seq, ordered in ((x, ey, oy), (y, ex, ox)):
        if ordered and not isinstance(one, Tuple | FiniteSet | list | tuple):
            # a number is not a pair (a one-element tuple is its element)
            return len(seq) != 1 or _math_differ(one, seq[0], depth + 1)
    as_values = _witness(ex, ey, depth) or _witness(ey, ex, depth)
    # a tuple beside a set: math-verify compares its values with the set's; it is also one
    # element of a set of tuples: different only if both readings are
    for a, others in ((x, ey), (y, ex)):
        if isinstance(a, Tuple) and ox != oy:
            return as_values and (_witness([a], others, depth) or _witness(others, [a], depth))
    return as_values


def _witness(xs: list, ys: list, depth: int) -> bool:
    """An element of ``xs`` that differs from every element of ``ys``."""
    return any(all(_math_differ(a, b, depth + 1) for b in ys) for a in xs)


# ------------------------------------------------------------------ numbers and expressions

def _scalar_differ(x: Any, y: Any) -> bool:
    from sympy import Float, oo, zoo

    infinite = (oo, -oo, zoo)
    if x in infinite or y in infinite:
        return x != y and (x.is_number and y.is_number) and zoo not in (x, y)
    if x.is_Rational and y.is_Rational:
        return x != y
    floats = x.has(Float) or y.has(Float)
    for subs in _points(x.free_symbols | y.free_symbols):
        v1, v2 = _number(x, subs), _number(y, subs)
        if v1 is not None and v2 is not None and _apart(v1, v2, floats):
            return True
    return False


def _points(symbols: set) -> list[dict]:
    """The same fixed-seed random points for both sides: rationals between 0.13 and 2.9
    (square roots and logarithms stay real), none an integer (an odd numerator over 10^4)."""
    if not symbols:
        return [{}]
    from sympy import Rational

    rng = random.Random(20250)
    ordered = sorted(symbols, key=str)
    return [{s: Rational(rng.randrange(1300, 29000) | 1, 10000) for s in ordered}
            for _ in range(POINTS)]


def _number(e: Any, subs: dict) -> Any:
    """``e``'s value at ``subs`` as a finite sympy number (complex allowed), else None."""
    try:
        v = e.evalf(DIGITS, subs=subs) if subs else e.evalf(DIGITS)
        if not getattr(v, "is_number", False):
            return None  # a free symbol left, an undefined function
        parts = [p.evalf(DIGITS) for p in v.as_real_imag()]
        # infinities, nan and unevaluated leftovers are no value
        return v if all(p.is_Float or p.is_zero for p in parts) else None
    except Exception:  # noqa: BLE001 -- a domain error, an odd sympy object: no value
        return None


def _apart(v1: Any, v2: Any, floats: bool) -> bool:
    d = abs((v1 - v2).evalf(DIGITS))
    scale = max(abs(v1), abs(v2))
    if d <= REL_TOL * scale:
        return False
    return not (floats and d <= FLOAT_TOL)
