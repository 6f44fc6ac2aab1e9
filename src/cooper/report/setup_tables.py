"""The report's tables of where every seed started: the setup's figures over seeds.

Read from each seed's ``setup.json`` (:mod:`cooper.experiment.setup`): the initial reward
model's training and probe figures, the initial policy's held-out accuracy and its band, and,
where the gold judge scored (the blind-rule testbed), the share of the initial policy's right
answers the rule rejects and the initial reward model's recall on them. A figure an older
``setup.json`` lacks is left out, and one only some seeds have says how many.
"""

from __future__ import annotations

from typing import Any

from cooper.report.figures import spread
from cooper.report.verdict import fmt


def _distinct(values: list[Any]) -> str:
    """A setting's value over seeds: one when they agree, else each distinct one."""
    return " / ".join(dict.fromkeys(map(str, values)))


def _band(lo: float | None, hi: float | None) -> str:
    """A band of shares in percent; an unset bound (the check off on that side) is 0 or 100."""
    return f"{100 * (lo or 0):g} to {100 * (hi if hi is not None else 1):g}"


def _policy_check(checks: list[dict[str, Any]], seeds: int) -> str:
    """The initial policy's held-out accuracy over seeds, where it was measured and the band
    it had to fall in (``setup.json``'s ``policy_check``)."""
    band = _distinct([_band(lo, hi) for lo, hi in (c["band"] for c in checks)])
    return (f"{fmt(spread([c['accuracy'] for c in checks]), 2, 100, of=seeds)} on "
            f"{_distinct([c['benchmark'] for c in checks])} "
            f"({_distinct([c['problems'] for c in checks])} problems x "
            f"{_distinct([c['samples'] for c in checks])} samples); band {band}")


def setup_rows(done: list[dict[str, Any]]) -> list[list[str]]:
    """What the seeds' setups measured (``setup.json``), over seeds; a figure an older
    ``setup.json`` lacks is left out, and one only some seeds have says how many."""
    n = len(done)
    rm_init = [s["rm_init"] for s in done if "rm_init" in s]
    rows = []
    if rm_init:
        rows.append(["initial RM accuracy on its training triples",
                     fmt(spread([r["train_accuracy"] for r in rm_init]), of=n)])
    if any("rounds" in r for r in rm_init):
        rows.append(["initial RM training rounds",
                     fmt(spread([r["rounds"] for r in rm_init if "rounds" in r]), 0, of=n)])
    if done:
        rows.append(["initial RM accuracy on the probe",
                     fmt(spread([s["probe_accuracy"] for s in done]))])
    if any("probe_auroc" in s for s in done):
        rows.append(["initial RM AUROC on the probe",
                     fmt(spread([s["probe_auroc"] for s in done if "probe_auroc" in s]), of=n)])
    if any("probe_bar" in s for s in done):
        rows.append(["probe bar of the initial RM (probe_bar)",
                     _distinct(["none" if s["probe_bar"] is None else f"{s['probe_bar']:g}"
                                for s in done if "probe_bar" in s])])
    if any("policy_check" in s for s in done):
        rows.append(["initial policy's held-out accuracy (%, policy check)",
                     _policy_check([s["policy_check"] for s in done if "policy_check" in s], n)])
    checks = [s["policy_check"] for s in done if "rule_missed" in s.get("policy_check", {})]
    if checks:  # the gold judge scored: what the rule misses at the start, and the band
        band = _distinct([_band(lo, hi) for lo, hi in (c["rule_missed_band"] for c in checks)])
        rows += [["initial policy's accuracy by the rule (%)",
                  fmt(spread([c["rule_accuracy"] for c in checks]), 2, 100, of=n)],
                 ["right answers the rule rejects at the start (%)",
                  f"{fmt(spread([c['rule_missed'] for c in checks]), 2, 100, of=n)}; band {band}"],
                 ["... where the reference is in digits (the form dial, %)",
                  fmt(spread([c["rule_missed_form"] for c in checks]), 2, 100, of=n)]]
    recall = [s["rm_recall"] for s in done if "rm_recall" in s]
    if recall:
        rows += [[f"initial RM's recall on them{what} (%)", fmt(spread(xs), 2, 100, of=n)]
                 for what, key in (("", "recall_missed"),
                                   (", reference in digits", "recall_missed_form"),
                                   (", reference in words", "recall_missed_reference"))
                 if (xs := [r[key] for r in recall if r.get(key) is not None])]
    return rows
