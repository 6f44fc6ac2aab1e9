"""The table and sentences of ``cooper experiment rm-check`` (pure functions).

Each result (one arm, one seed; :mod:`cooper.experiment.rm_check`) holds two answer sets, the
initial policy's and the arm's final policy's test answers, each scored by the initial and the
final reward model. One row per arm, seed and set; one sentence per arm over its seeds.
"""

from __future__ import annotations

from typing import Any

SETS = (("initial_policy", "initial policy"), ("final_policy", "final policy"))
HEADER = ["arm", "seed", "answers of", "right, rule rejects: n",
          "recall: initial RM -> final (%)", "gained / lost (sign test p)",
          "lost by dial", "wrong, rule cannot read: n", "called right: initial RM -> final (%)",
          "called right by dial: initial -> final"]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _p(x: float | None) -> str:
    return "-" if x is None else f"{x:.2g}"


def rm_check_rows(results: list[dict[str, Any]]) -> list[list[str]]:
    """The header, then one row per result and answer set, in the order given."""
    rows = [HEADER]
    for r in results:
        for key, name in SETS:
            rec, fpr = r[key]["recall_missed"], r[key]["fpr_unread"]
            by_rec, by_fpr = rec.get("by_dial", {}), fpr.get("by_dial", {})
            rows.append([r["arm"], str(r["seed"]), name, str(rec["answers"]),
                         f"{_pct(rec['before'])} -> {_pct(rec['after'])}",
                         f"{rec['gained']} / {rec['lost']} ({_p(rec['p_value'])})",
                         ", ".join(f"{d} {x['lost']} of {x['answers']}"
                                   for d, x in by_rec.items() if x["lost"]) or "-",
                         str(fpr["answers"]), f"{_pct(fpr['before'])} -> {_pct(fpr['after'])}",
                         ", ".join(f"{d} {_pct(x['before'])} -> {_pct(x['after'])}"
                                   for d, x in by_fpr.items() if x["answers"]) or "-"])
    return rows


def rm_check_sentences(results: list[dict[str, Any]]) -> list[str]:
    """Per arm and answer set: in how many seeds the final reward model calls right at least as
    many of the right answers the rule rejects as the initial one, and where fewer, by how much
    and how sure."""
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_arm.setdefault(r["arm"], []).append(r)
    out = []
    for arm, rs in by_arm.items():
        parts = []
        for key, name in SETS:
            recs = [(r["seed"], r[key]["recall_missed"]) for r in rs
                    if r[key]["recall_missed"]["before"] is not None]
            if not recs:
                continue
            kept = sum(x["after"] >= x["before"] for _, x in recs)
            fell = [f"seed {s} {_pct(x['before'])} -> {_pct(x['after'])}% (p {_p(x['p_value'])})"
                    for s, x in recs if x["after"] < x["before"]]
            parts.append(f"on the {name}'s answers in {kept} of {len(recs)} seeds"
                         + (f" (fewer: {', '.join(fell)})" if fell else ""))
        if parts:
            out.append(f"{arm}: of the right answers the rule rejects, the final reward model "
                       f"calls right at least as many as the initial one {'; '.join(parts)}.")
    return out
