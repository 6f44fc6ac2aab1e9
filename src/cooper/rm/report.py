"""What ``cooper rm eval`` reports: figures overall, per source and per kind, as text or JSON.

A reward model can look fine overall and fail on one kind of input: issue 19's model scored
0.98 on answer-changed triples while paying 0.82 for one opener sentence. So the figures are
also given per ``source`` (which dataset or generator a row came from) and per ``kind`` (how
its completion was made: ``gold_boxed``, ``answer_changed``, ``degenerate_opener``, ... as
``cooper data build`` writes them). Most kinds hold one label only, where precision, F1 and
AUROC are undefined; the column that reads for every group is **called correct**, the fraction
of its rows whose verdict is "correct" (``score >= threshold``): recall on a kind of correct
completions, the false-positive rate on a kind of wrong ones. Undefined figures print as ``-``
and are null in JSON. The metrics themselves are defined once, in :mod:`cooper.rm.metrics`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cooper.rm.metrics import BinaryMetrics, binary_metrics

NO_KIND = "(none)"


@dataclass(frozen=True)
class GroupFigures:
    """The figures of one group of rows (all rows, one source, one kind)."""

    metrics: BinaryMetrics
    mean_score: float
    called_correct: float  # fraction of verdicts "correct" (score >= threshold)

    @property
    def one_label(self) -> bool:
        return self.metrics.positives in (0, self.metrics.n)

    def to_dict(self) -> dict[str, Any]:
        return {**self.metrics.to_dict(), "mean_score": self.mean_score,
                "called_correct": self.called_correct}


@dataclass
class EvalReport:
    """Every figure of one evaluation."""

    overall: GroupFigures
    by_source: dict[str, GroupFigures] = field(default_factory=dict)
    by_kind: dict[str, GroupFigures] = field(default_factory=dict)  # empty: rows have no kind

    def to_dict(self) -> dict[str, Any]:
        """The overall figures at the top level (as before), the groups under by_source and
        by_kind."""
        return {**self.overall.to_dict(),
                "by_source": {k: v.to_dict() for k, v in self.by_source.items()},
                "by_kind": {k: v.to_dict() for k, v in self.by_kind.items()}}


def group_figures(scores: Sequence[float], labels: Sequence[bool], *,
                  threshold: float = 0.5) -> GroupFigures:
    m = binary_metrics(scores, labels, threshold=threshold)
    return GroupFigures(m, sum(scores) / len(scores),
                        sum(1 for s in scores if s >= threshold) / len(scores))


def _groups(scores: Sequence[float], labels: Sequence[bool], names: Sequence[str],
            threshold: float) -> dict[str, GroupFigures]:
    out = {}
    for g in sorted(set(names)):
        idx = [i for i, x in enumerate(names) if x == g]
        out[g] = group_figures([scores[i] for i in idx], [labels[i] for i in idx],
                               threshold=threshold)
    return out


def eval_report(scores: Sequence[float], labels: Sequence[bool], sources: Sequence[str],
                kinds: Sequence[str | None], *, threshold: float = 0.5) -> EvalReport:
    """Figures overall, per source, and per kind (when any row has one)."""
    report = EvalReport(group_figures(scores, labels, threshold=threshold),
                        _groups(scores, labels, sources, threshold))
    if any(k is not None for k in kinds):
        report.by_kind = _groups(scores, labels, [k or NO_KIND for k in kinds], threshold)
    return report


def _num(x: float, undefined: bool = False) -> str:
    return "-" if undefined or not math.isfinite(x) else f"{x:.3f}"


def format_table(title: str, groups: Mapping[str, GroupFigures]) -> str:
    """A fixed-width table, one row per group (see the module docstring for the columns)."""
    width = max([len(title)] + [len(g) for g in groups])
    head = (f"{title:<{width}s} {'n':>6s} {'correct':>7s} {'accuracy':>8s} {'called_correct':>14s}"
            f" {'f1':>6s} {'auroc':>6s} {'ece':>6s} {'mean_score':>10s}")
    lines = [head, "-" * len(head)]
    for name, g in groups.items():
        m = g.metrics
        lines.append(f"{name:<{width}s} {m.n:6d} {m.positives:7d} {_num(m.accuracy):>8s} "
                     f"{_num(g.called_correct):>14s} {_num(m.f1, g.one_label):>6s} "
                     f"{_num(m.auroc):>6s} {_num(m.ece):>6s} {_num(g.mean_score):>10s}")
    return "\n".join(lines)


def format_report(report: EvalReport) -> str:
    """The human-readable tables: overall, per source, per kind."""
    parts = [format_table("overall", {"all": report.overall})]
    if report.by_source:
        parts.append(format_table("source", report.by_source))
    if report.by_kind:
        parts.append(format_table("kind", report.by_kind))
    return "\n\n".join(parts)
