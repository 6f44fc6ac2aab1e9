"""The reliability diagram of a reward model's scores, as a PNG (``cooper rm eval --plot``).

Top panel: for each of the 10 equal-width score bins (the ECE's bins, :mod:`cooper.rm.metrics`),
the fraction of its items that are correct, against the diagonal of perfect calibration; the gap
between a bar and the diagonal is what the ECE averages. Bottom panel: how many correct and wrong
items fall in each bin. Drawn with matplotlib's Agg canvas directly (no pyplot, no global
backend switch), so it works on a machine without a display and inside any caller.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

from cooper.rm.calibration import reliability_bins
from cooper.rm.metrics import expected_calibration_error


def plot_reliability(scores: Sequence[float], labels: Sequence[bool], path: str | os.PathLike,
                     *, title: str = "", bins: int = 10) -> Path:
    """Write the reliability diagram of ``scores`` against ``labels`` to ``path`` (PNG)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not scores:
        raise ValueError("no items to plot")
    rows = reliability_bins(scores, labels, bins)
    centres = [(b.lo + b.hi) / 2 for b in rows]
    width = 1 / bins
    fig = Figure(figsize=(5.5, 6.5), dpi=100)
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    filled = [(c, b) for c, b in zip(centres, rows, strict=True) if b.n]
    top.bar([c for c, _ in filled], [b.fraction_correct for _, b in filled], width=width * 0.9,
            color="#4c72b0", edgecolor="black", label="fraction correct")
    top.plot([0, 1], [0, 1], linestyle="--", color="gray", label="perfect calibration")
    top.scatter([b.mean_score for _, b in filled], [b.fraction_correct for _, b in filled],
                color="#dd8452", zorder=3, s=18, label="mean score of the bin")
    top.set_xlim(0, 1)
    top.set_ylim(0, 1)
    top.set_ylabel("fraction correct")
    ece = expected_calibration_error(scores, labels, bins)
    top.set_title(f"{title + ': ' if title else ''}n={len(scores)}, "
                  f"ECE={'-' if math.isnan(ece) else f'{ece:.3f}'}", fontsize=10)
    top.legend(loc="upper left", fontsize=8)
    correct = [b.correct for b in rows]
    wrong = [b.n - b.correct for b in rows]
    bottom.bar(centres, wrong, width=width * 0.9, color="#c44e52", label="wrong")
    bottom.bar(centres, correct, width=width * 0.9, bottom=wrong, color="#55a868",
               label="correct")
    bottom.set_xlabel("reward-model score")
    bottom.set_ylabel("items")
    bottom.legend(loc="best", fontsize=8)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out
