"""The paper-style comparison table of finished ``cooper eval`` runs (``cooper eval compare``).

Rows are runs, columns the union of their benchmarks in order of first appearance, plus each
run's average over its *own* benchmarks (the paper's "Avg"); values are percent. A benchmark a
run lacks shows as ``-`` (empty in CSV) with a note, since such averages are not comparable.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cooper.errors import UserError
from cooper.infra.files import UnreadableJSON, parse_json


@dataclass(frozen=True)
class Comparison:
    """Runs x benchmarks (percent), plus each run's average over its own benchmarks."""

    metric: str
    columns: list[str]
    rows: list[tuple[str, list[float | None], float]]
    """one per run: its label, its value per column (None: not evaluated) and its average"""


def _metric_value(entry: dict[str, Any], metric: str) -> float:
    if metric == "accuracy":
        return entry["accuracy"]
    if metric == "majority":
        return entry["majority_accuracy"]
    k = metric.removeprefix("pass@")
    if k not in entry["pass_at_k"]:
        raise UserError(f"{metric} was not computed in every run (have: "
                        f"{', '.join('pass@' + x for x in entry['pass_at_k'])})")
    return entry["pass_at_k"][k]


METRICS = ("accuracy", "majority_accuracy", "pass_at_k")
"""what every benchmark of a results.json holds, whichever --metric is asked for"""


def read_results(run: str | os.PathLike) -> dict[str, Any]:
    """The ``results.json`` of a run folder, checked: a file cut short or edited into
    something else is an error that names it, not a traceback from the table."""
    path = Path(run) / "results.json"
    rerun = (f"rerun cooper eval with that run's settings and --out {run} to write it again "
             "(its finished samples are reused)")
    if not path.is_file():
        raise UserError(f"{run}: no results.json (not a finished cooper eval run); {rerun}")
    try:
        doc = parse_json(path.read_bytes())
    except UnreadableJSON as e:
        raise UserError(f"{path} cannot be read ({e}); {rerun}") from e
    bench = doc.get("benchmarks") if isinstance(doc, dict) else None
    if not (isinstance(bench, dict) and bench and all(
            isinstance(e, dict) and all(k in e for k in METRICS) for e in bench.values())):
        raise UserError(f"{path} holds no cooper eval results (a 'benchmarks' mapping with "
                        f"{', '.join(METRICS)} for each); {rerun}")
    return doc


def compare_runs(dirs: Sequence[str | os.PathLike], *, labels: Sequence[str] | None = None,
                 metric: str = "accuracy") -> Comparison:
    """The paper-style table from the ``results.json`` of each run folder."""
    if not (metric in ("accuracy", "majority") or
            (metric.startswith("pass@") and metric[5:].isdigit())):
        raise UserError(f"unknown metric '{metric}'; choose accuracy, majority or pass@K")
    if labels is not None and len(labels) != len(dirs):
        raise UserError(f"--labels has {len(labels)} names for {len(dirs)} runs")
    docs = [read_results(d) for d in dirs]
    columns: list[str] = []
    for doc in docs:
        columns += [b for b in doc["benchmarks"] if b not in columns]
    names = list(labels) if labels else [Path(d).resolve().name for d in dirs]
    if not labels and len(set(names)) < len(names):
        names = [str(d) for d in dirs]
    rows = []
    for name, doc in zip(names, docs, strict=True):
        values = [_metric_value(doc["benchmarks"][c], metric) if c in doc["benchmarks"]
                  else None for c in columns]
        own = [v for v in values if v is not None]
        rows.append((name, [None if v is None else 100 * v for v in values],
                     100 * sum(own) / len(own)))
    return Comparison(metric, columns, rows)


def comparison_markdown(c: Comparison) -> str:
    head = ["run", *c.columns, "Avg"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for name, values, avg in c.rows:
        cells = ["-" if v is None else f"{v:.2f}" for v in values]
        lines.append("| " + " | ".join([name, *cells, f"{avg:.2f}"]) + " |")
    if any(None in values for _, values, _ in c.rows):
        lines.append("\n'-': not evaluated in that run; Avg is over the benchmarks a run has, "
                     "so such rows are not directly comparable.")
    return f"{c.metric} (%)\n\n" + "\n".join(lines) + "\n"


def comparison_csv(c: Comparison) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["run", *c.columns, "avg"])
    for name, values, avg in c.rows:
        w.writerow([name, *("" if v is None else f"{v:.2f}" for v in values), f"{avg:.2f}"])
    return buf.getvalue()
