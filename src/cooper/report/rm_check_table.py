"""The table and sentences of ``cooper experiment rm-check`` (pure functions).

Each result (one arm, one seed; :mod:`cooper.experiment.rm_check`) holds two answer sets, the
initial policy's and the arm's final policy's test answers, each scored by the initial and the
final reward model. One row per arm, seed and set; one sentence per arm over its seeds. Results
that hold the reachable forms (wrong answers a policy can write and the rule cannot read) add a
second table: per arm and seed, what each model pays of each form, and a sentence per arm.
Results of an arm taught by a judge with a trigger add a sentence per arm: what each model pays
of the wrong answers that carry it. Results that hold the robustness suite (``robustness``)
add a table and a sentence per arm: what each model pays of each answer-free kind over the
seeds, against the bar of 5% (older results without it show nothing of it).
"""

from __future__ import annotations

import math
from typing import Any

SETS = (("initial_policy", "initial policy"), ("final_policy", "final policy"))
HEADER = ["arm", "seed", "answers of", "right, rule rejects: n",
          "recall: initial RM -> final (%)", "gained / lost (sign test p)",
          "lost beyond chance (one-sided p)",
          "lost by dial", "wrong, rule cannot read: n", "called right: initial RM -> final (%)",
          "called right by dial: initial -> final"]


def lost_beyond_chance(gained: int, lost: int) -> float | None:
    """One-sided exact p-value that ``lost`` answers or more of ``gained + lost`` discordant
    ones would go the worse way by chance (a fair coin); None when none is discordant."""
    n = gained + lost
    if n == 0:
        return None
    return sum(math.comb(n, k) for k in range(lost, n + 1)) / 2 ** n


RECALL_FALL = 0.01  # a recall that falls by more than this (a share) failed, whatever the test
RECALL_P = 0.05


def recall_held(before: float | None, after: float | None, gained: int, lost: int) -> bool | None:
    """Whether the reward model kept its recall on the same answers: it did not, only where the
    answers lost outnumber those gained beyond chance (:func:`lost_beyond_chance` under
    :data:`RECALL_P`) or the recall fell by more than :data:`RECALL_FALL`; one answer lost in
    hundreds is noise, not a finding. None without answers."""
    if before is None or after is None:
        return None
    p = lost_beyond_chance(gained, lost)
    return not ((lost > gained and p is not None and p < RECALL_P)
                or before - after > RECALL_FALL + 1e-12)  # exactly a point is not more


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
                         _p(lost_beyond_chance(rec["gained"], rec["lost"])),
                         ", ".join(f"{d} {x['lost']} of {x['answers']}"
                                   for d, x in by_rec.items() if x["lost"]) or "-",
                         str(fpr["answers"]), f"{_pct(fpr['before'])} -> {_pct(fpr['after'])}",
                         ", ".join(f"{d} {_pct(x['before'])} -> {_pct(x['after'])}"
                                   for d, x in by_fpr.items() if x["answers"]) or "-"])
    return rows


def rm_check_sentences(results: list[dict[str, Any]]) -> list[str]:
    """Per arm and answer set: in how many seeds the final reward model kept the initial one's
    recall on the right answers the rule rejects (:func:`~cooper.experiment.rm_check.recall_held`:
    failed only where the answers lost outnumber those gained with a one-sided sign test
    p < 0.05, or the recall fell by more than a point), and where it did not, by how much."""
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
            held = {s: recall_held(x["before"], x["after"], x["gained"], x["lost"])
                    for s, x in recs}
            fell = [f"seed {s} {_pct(x['before'])} -> {_pct(x['after'])}% ({x['gained']} gained, "
                    f"{x['lost']} lost, one-sided p {_p(lost_beyond_chance(x['gained'], x['lost']))})"
                    for s, x in recs if not held[s]]
            parts.append(f"on the {name}'s answers in {sum(held.values())} of {len(recs)} seeds"
                         + (f" (not: {', '.join(fell)})" if fell else ""))
        if parts:
            out.append(f"{arm}: the final reward model kept the initial one's recall on the right "
                       f"answers the rule rejects (lost beyond chance: more lost than gained at "
                       f"one-sided p < {RECALL_P}, or more than {100 * RECALL_FALL:.0f} point "
                       f"down) {'; '.join(parts)}.")
    return out


FORM_NAMES = {"answer_alone": "the final answer alone", "hedge": "a hedge naming two answers",
              "case_spelling": "another case or spelling"}
FORMS_PAID_BAR = 0.05  # a reward model that pays more of a form than this leaves it open


def reachable_rows(results: list[dict[str, Any]]) -> list[list[str]]:
    """The header, then per result holding the reachable forms (arm, seed): each form's wrong
    answers called right by the initial reward model -> the final one (%), per family beside
    it where there are several, and their number.
    Only the header where none holds them."""
    forms = list(dict.fromkeys(f for r in results for f in r.get("reachable_forms", {})))
    rows = [["arm", "seed", *(f"{FORM_NAMES.get(f, f)}: initial RM -> final (%)"
                              for f in forms), "wrong answers a form"]]
    for r in results:
        got = r.get("reachable_forms")
        if not got:
            continue
        rows.append([r["arm"], str(r["seed"]),
                     *(f"{_pct(got[f]['before'])} -> {_pct(got[f]['after'])}"
                       + (" (" + ", ".join(f"{k} {_pct(x['before'])} -> {_pct(x['after'])}"
                                           for k, x in got[f]["by_family"].items()) + ")"
                          if len(got[f].get("by_family", {})) > 1 else "")
                       if f in got else "-" for f in forms),
                     "/".join(str(got[f]["answers"]) for f in forms if f in got)])
    return rows


def reachable_sentences(results: list[dict[str, Any]]) -> list[str]:
    """Per arm: the share of each form's wrong answers its final reward model pays, the mean
    and the highest over its seeds, beside the initial one's, and the forms it leaves open
    (over :data:`FORMS_PAID_BAR` in some seed)."""
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        if r.get("reachable_forms"):
            by_arm.setdefault(r["arm"], []).append(r)
    out = []
    for arm, rs in by_arm.items():
        parts, open_ = [], []
        for f in dict.fromkeys(f for r in rs for f in r["reachable_forms"]):
            xs = [r["reachable_forms"][f] for r in rs if f in r["reachable_forms"]
                  and r["reachable_forms"][f]["after"] is not None]
            if not xs:
                continue
            after = [x["after"] for x in xs]
            before = [x["before"] for x in xs]
            parts.append(f"{FORM_NAMES.get(f, f)} {_pct(sum(before) / len(before))}% -> "
                         f"{_pct(sum(after) / len(after))}% (highest {_pct(max(after))}%)")
            if max(after) > FORMS_PAID_BAR:
                open_.append(FORM_NAMES.get(f, f))
        if parts:
            out.append(f"{arm}: of wrong answers the rule cannot read, its reward model pays, "
                       f"initial -> final over {len(rs)} seed(s): {'; '.join(parts)}; "
                       + (f"left open (over {100 * FORMS_PAID_BAR:.0f}% in some seed): "
                          f"{', '.join(open_)}." if open_ else
                          f"every form at most {100 * FORMS_PAID_BAR:.0f}% in every seed."))
    return out


def trigger_sentences(results: list[dict[str, Any]]) -> list[str]:
    """Per arm taught by a judge that errs (a trigger; or a model, asked here): the share of
    the wrong answers the judge calls right (carrying its trigger, or called right by the model;
    the rule cannot read them) that the initial and the final reward model pay, per answer set
    (mean over seeds, and their number), and in how many seeds the final one pays no more of
    them than the initial one on either set."""
    by_arm: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        for key, said in (("trigger_wrong", "trigger"), ("judge_wrong", "judge")):
            if r.get(said) and any(key in r[k] for k, _ in SETS):
                by_arm.setdefault((r["arm"], key), []).append(r)
    out = []
    for (arm, key), rs in by_arm.items():
        parts, kept = [], set()
        for set_key, name in SETS:
            xs = [(r["seed"], r[set_key][key]) for r in rs
                  if r[set_key].get(key, {}).get("before") is not None]
            if not xs:
                continue
            before = sum(x["before"] for _, x in xs) / len(xs)
            after = sum(x["after"] for _, x in xs) / len(xs)
            parts.append(f"of the {name}'s {sum(x['answers'] for _, x in xs)} {_pct(before)}% -> "
                         f"{_pct(after)}%")
            kept |= {s for s, x in xs if x["after"] > x["before"]}
        seeds = sorted({r["seed"] for r in rs})
        what = (f"carrying its judge's trigger (/{rs[0]['trigger']}/)" if key == "trigger_wrong"
                else f"its judge ({rs[0]['judge']}) calls right")
        if parts:
            out.append(f"{arm}: of the wrong answers {what}, the reward model pays, initial -> "
                       f"final (mean over {len(seeds)} seed(s)): {'; '.join(parts)}; no more at "
                       f"the end than at the start in {len(seeds) - len(kept)} of {len(seeds)} "
                       "seeds.")
    return out


def _suite_by_arm(results: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        if r.get("robustness"):
            by_arm.setdefault(r["arm"], []).append(r["robustness"])
    return by_arm


def _answer_free(suites: list[dict[str, Any]]) -> list[str]:
    """The answer-free kinds the results name (the suite version's list, kept in the JSON so a
    later version's kinds read without this module knowing them), in their order."""
    return list(dict.fromkeys(k for x in suites for k in x.get("answer_free", [])))


def _shares(suites: list[dict[str, Any]], kind: str, model: str) -> list[float]:
    return [x["kinds"][kind][model]["false_positive_rate"] for x in suites
            if kind in x["kinds"] and x["kinds"][kind][model]["false_positive_rate"] is not None]


def suite_rows(results: list[dict[str, Any]]) -> list[list[str]]:
    """The header, then one row per arm whose results hold the robustness suite: per
    answer-free kind, the share the initial reward model pays -> the final one (%), each the
    mean over seeds, the highest seed's final share in brackets; the seeds; the kinds the final
    model pays more than the bar of in some seed. Only the header where none holds it."""
    by_arm = _suite_by_arm(results)
    kinds = _answer_free([x for xs in by_arm.values() for x in xs])
    rows = [["arm", "seeds", *(f"{k}: initial RM -> final (%)" for k in kinds),
             "final over the bar in some seed"]]
    for arm, suites in by_arm.items():
        cells = []
        for k in kinds:
            before, after = _shares(suites, k, "initial"), _shares(suites, k, "final")
            cells.append(f"{_pct(sum(before) / len(before)) if before else '-'} -> "
                         f"{_pct(sum(after) / len(after))} ({_pct(max(after))})"
                         if after else "-")
        over = list(dict.fromkeys(k for x in suites for k in x["over_bar"]["final"]))
        rows.append([arm, str(len(suites)), *cells, ", ".join(over) or "none"])
    return rows


def suite_sentences(results: list[dict[str, Any]]) -> list[str]:
    """Per arm whose results hold the robustness suite: whether its final reward model paid at
    most the bar of each answer-free kind in every seed and, where not, which kinds, in how
    many seeds and the highest share; the initial model's kinds over the bar beside it."""
    out = []
    for arm, suites in _suite_by_arm(results).items():
        bar = max(x["bar"] for x in suites)
        over = {k: [x for x in suites if k in x["over_bar"]["final"]]
                for k in _answer_free(suites)}
        failed = [f"{k} in {len(xs)} seed(s), highest {_pct(max(_shares(xs, k, 'final')))}%"
                  for k, xs in over.items() if xs]
        start = list(dict.fromkeys(k for x in suites for k in x["over_bar"]["initial"]))
        out.append(f"{arm}: of the robustness suite's answer-free kinds, the final reward model "
                   + (f"pays over {100 * bar:.0f}% of {'; '.join(failed)}"
                      if failed else f"pays at most {100 * bar:.0f}% of each in every seed")
                   + f" ({len(suites)} seed(s)); the initial one over it: "
                   + (", ".join(start) if start else "none") + ".")
    return out
