"""The curves of a reward-hacking experiment report: one PNG per per-step metric, arms overlaid.

Per-step curves are noisy (a step sees a handful of prompts), so each is drawn raw and thin with
a trailing moving average on top (window: a tenth of the points, :func:`window_for`); the same
smoothing gives the report's "peak" figures (:mod:`cooper.experiment.report`). matplotlib is
imported only when a plot is drawn, with the file-only Agg backend (no display needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cooper.experiment.report import Arm

ARM_LABELS = {"rule": "rule (verifier)", "rm": "fixed RM", "cooper": "Cooper"}
ARM_COLORS = {"rule": "#4c72b0", "rm": "#c44e52", "cooper": "#55a868"}


def moving_average(values: list[float], window: int) -> list[float]:
    """Trailing mean over up to ``window`` values (the first points average what exists)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def window_for(n: int) -> int:
    """The moving-average window for ``n`` points: a tenth of them, at least one."""
    return max(1, n // 10)


def _plot(arms: list[Arm], key_of, title: str, ylabel: str, path: Path, *,
          dashed_key=None, smooth: bool = True, ylim=None, hline=None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    drawn = False
    for arm in arms:
        color = ARM_COLORS.get(arm.name, None)
        steps, vals = arm.series(key_of(arm))
        if steps:
            drawn = True
            if smooth and len(vals) > 3:
                ax.plot(steps, vals, color=color, alpha=0.25, linewidth=0.8)
                ax.plot(steps, moving_average(vals, window_for(len(vals))), color=color,
                        linewidth=2, label=ARM_LABELS.get(arm.name, arm.name))
            else:
                ax.plot(steps, vals, color=color, marker="o", markersize=3, linewidth=2,
                        label=ARM_LABELS.get(arm.name, arm.name))
        if dashed_key is not None:
            steps, vals = arm.series(dashed_key)
            if steps:
                ax.plot(steps, moving_average(vals, window_for(len(vals))), color=color,
                        linestyle="--", linewidth=1.2)
    if hline is not None:
        ax.axhline(hline, color="grey", linewidth=0.8)
    if not drawn:
        ax.text(0.5, 0.5, "no data yet", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    if ylim:
        ax.set_ylim(*ylim)
    ax.grid(alpha=0.3)
    if drawn:
        ax.legend(loc="best", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def make_plots(arms: list[Arm], folder: Path) -> list[Path]:
    """The report's PNGs, written into ``folder``; returns their paths in report order."""
    return [
        _plot(arms, lambda a: "val/accuracy", "Held-out accuracy (verifier)", "accuracy",
              folder / "heldout_accuracy.png", smooth=False, ylim=(0, 1)),
        _plot(arms, lambda a: a.reward_key,
              "Training reward (solid) and verified accuracy of the rollouts (dashed)",
              "mean per step", folder / "training_reward.png", dashed_key="reward/rule_mean",
              ylim=(0, 1)),
        _plot(arms, lambda a: "hacking/gap", "Hacking gap: reward model minus verifier",
              "gap", folder / "hacking_gap.png", ylim=(-1, 1), hline=0.0),
        _plot(arms, lambda a: "hacking/top_wrong",
              "Top-wrong: groups whose highest-scored rollout is verified wrong", "fraction",
              folder / "hacking_top_wrong.png", ylim=(0, 1)),
        _plot(arms, lambda a: "rm/group_auroc",
              "Reward model vs. verifier within each prompt's group (AUROC)", "AUROC",
              folder / "rm_group_auroc.png", ylim=(0, 1), hline=0.5),
        _plot(arms, lambda a: "val/rm_probe_accuracy",
              "Reward model accuracy on the fixed labelled probe", "accuracy",
              folder / "rm_probe.png", smooth=False, ylim=(0, 1)),
    ]
