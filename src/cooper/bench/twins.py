"""Wrong twins of real final answers: how many are made, by answer kind, and math-verify's check.

The counterfactual check (``judge.counterfactual``) asks a judge about a "yes"'s wrong twin
(:func:`cooper.labelling.counterfactual.make_twin`); a "yes" whose answer gets no twin cannot be
checked. Two sets of answers a run meets:

* ``math500``: MATH500's 500 references, each boxed as a solution (``The answer is
  \\boxed{REF}.``) and twinned against itself (judged = reference = REF);
* ``hardverify_rejected``: TinyV's HardVerify-Math (bundled), its right answers (``fn_output``)
  that the project's strict rule rejects against ``ground_truth`` (what a judge is asked
  about), twinned with judged = the answer and reference = the ground truth.

Each is twinned with its problem's text (``question``: MATH500's ``problem``, HardVerify's
``question``), whose other options an answer in words may take. Per set and kind: answers,
twins made, their share, and the reasons for none; per way of certifying (``how``: by its
reading, element by element, as a family, as text): twins made.

A second path checks every twin made: math-verify's own verdict
(:func:`cooper.verify.verifier.equivalent`) on the twin's answer against the answer it was
made from must be "not equal" (``math_verify_equal`` counts the exceptions: 0 expected). Where
the twin was certified part by part (:attr:`~cooper.labelling.counterfactual.Twin.checks`: a
list of equations, an answer with a quantifier in words, which math-verify reads in part or
calls equal whatever they say), the verdict is taken on the changed element's right side
against its source's instead: that element must be called unequal.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cooper.labelling.counterfactual import Twin

SETS: tuple[str, ...] = ("math500", "hardverify_rejected")


@dataclass(frozen=True)
class Item:
    id: str
    solution: str  # "The answer is \boxed{ANSWER}."
    source: str  # the answer the twin is made from (and the judge called right)
    reference: str
    question: str = ""  # the problem's text


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--show", type=int, default=10,
                   help="list up to N answers per set that got no twin (default: %(default)s)")


def _bundled(*parts: str) -> Any:
    return resources.files("cooper.data").joinpath("bundled", *parts)


def boxed(answer: str) -> str:
    return f"The answer is \\boxed{{{answer}}}."


def math500_items() -> list[Item]:
    rows = [json.loads(line) for line in
            _bundled("math500", "test.jsonl").read_text().splitlines() if line.strip()]
    return [Item(r["unique_id"], boxed(r["answer"]), r["answer"], r["answer"], r["problem"])
            for r in rows]


def hardverify_rows() -> list[dict]:
    return json.loads(_bundled("hardverify_math", "HardVerify-Math.json").read_text())


def hardverify_rejected_items() -> list[Item]:
    """HardVerify-Math's right answers that the strict rule rejects (95 of 250), as the
    verifier is called on them: the reference cleaned by normalize_reference."""
    from cooper.verify.extraction import normalize_reference
    from cooper.verify.verifier import verify_batch

    rows = hardverify_rows()
    solutions = [boxed(r["fn_output"]) for r in rows]
    verdicts = verify_batch(solutions, [normalize_reference(r["ground_truth"]) for r in rows],
                            mode="strict")
    return [Item(str(r["id"]), s, r["fn_output"], r["ground_truth"], r["question"])
            for r, s, v in zip(rows, solutions, verdicts, strict=True) if not v.correct]


def math_verify_equal(answer: str, source: str) -> bool | None:
    """math-verify's verdict on a twin's answer against its source (None: it cannot read the
    source)."""
    from cooper.verify.extraction import clean_answer
    from cooper.verify.verifier import equivalent, fast_equivalent

    pair = clean_answer(answer), clean_answer(source)
    known = fast_equivalent(*pair)  # plain numbers: math-verify's verdict without a parse
    if known is not None:
        return known
    try:
        return equivalent(*pair)
    except ValueError:
        return None


def second_path_equal(twin: Twin, source: str) -> bool | None:
    """math-verify's verdict on a twin against its source: on the whole answers, or where the
    twin was certified part by part, on each changed piece (True if it calls any equal; None:
    it cannot read a source)."""
    pairs = twin.checks or ((twin.answer, source),)
    verdicts = [math_verify_equal(a, b) for a, b in pairs]
    return True if any(verdicts) else None if None in verdicts else False


def twin_table(items: list[Item], show: int = 10) -> dict[str, Any]:
    """Twins made per kind, reasons for none, and math-verify's second-path check."""
    from cooper.labelling.counterfactual import make_twin

    # math-verify's verdicts are taken here, in this process, without its SIGALRM timeout: it
    # warns that we must bound them (the answers are short, known data); as in the verifier's
    # workers, the warning is noise
    logging.getLogger("math_verify").setLevel(logging.ERROR)

    kinds: dict[str, dict[str, Any]] = {}
    equal, unread, missed, shown, hows = [], 0, [], [], Counter()
    for item in items:
        twin = make_twin(item.solution, item.reference, judged=item.source,
                         question=item.question or None)
        row = kinds.setdefault(twin.kind, {"n": 0, "twinned": 0, "reasons": Counter()})
        row["n"] += 1
        if twin.text is None:
            row["reasons"][twin.reason] += 1
            missed.append({"id": item.id, "answer": item.source, "kind": twin.kind,
                           "reason": twin.reason})
            continue
        row["twinned"] += 1
        hows[twin.how] += 1
        verdict = second_path_equal(twin, item.source)
        unread += verdict is None
        if verdict:
            equal.append({"id": item.id, "answer": item.source, "twin": twin.answer})
        elif twin.how != "value":  # the new ways of certifying, shown with their twins
            shown.append({"id": item.id, "answer": item.source, "twin": twin.answer,
                          "how": twin.how, "checks": [list(c) for c in twin.checks]})
    for row in kinds.values():
        row["share"] = round(row["twinned"] / row["n"], 4)
        row["reasons"] = dict(row["reasons"])
    n, made = len(items), sum(r["twinned"] for r in kinds.values())
    return {"n": n, "twinned": made, "share": round(made / n, 4) if n else None,
            "math_verify_equal": len(equal), "math_verify_unreadable_source": unread,
            "equal_examples": equal[:show],
            "kinds": dict(sorted(kinds.items(), key=lambda kv: -kv[1]["n"])),
            "how": dict(hows.most_common()), "missed": missed[:show], "shown": shown[:show]}


def format_table(name: str, table: dict[str, Any]) -> str:
    lines = [f"{name}: {table['twinned']}/{table['n']} twinned ({table['share']:.1%}); "
             f"math-verify calls {table['math_verify_equal']} twins equal to their source",
             f"  {'kind':<11} {'n':>4} {'twinned':>8} {'share':>7}  reasons for none"]
    for kind, row in table["kinds"].items():
        reasons = ", ".join(f"{k} {v}" for k, v in row["reasons"].items()) or "-"
        lines.append(f"  {kind:<11} {row['n']:>4} {row['twinned']:>8} {row['share']:>7.1%}  "
                     f"{reasons}")
    lines.append("  twins by how certified: "
                 + ", ".join(f"{k} {v}" for k, v in table["how"].items()))
    for m in table["shown"]:
        checked = "".join(f"; math-verify on {a!r} vs {b!r}" for a, b in m["checks"])
        lines.append(f"    {m['how']}: {m['answer'][:60]!r} -> {m['twin'][:60]!r}{checked}")
    for m in table["missed"]:
        lines.append(f"    no twin ({m['kind']}, {m['reason']}): {m['answer'][:70]!r}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict[str, Any]:
    t = time.perf_counter()
    loaded = {"math500": math500_items(), "hardverify_rejected": hardverify_rejected_items()}
    tables = {name: twin_table(items, args.show) for name, items in loaded.items()}
    for name, table in tables.items():
        print(format_table(name, table), file=sys.stderr)
    return {"benchmark": "twins", "sets": tables, "seconds": round(time.perf_counter() - t, 2)}
