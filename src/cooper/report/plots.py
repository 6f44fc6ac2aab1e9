"""The curves of a reward-hacking experiment report: one PNG per per-step metric, arms overlaid.

Each arm is drawn as the mean over its seeds with a shaded band from the lowest to the highest
seed (:func:`cooper.report.figures.band`); with one seed the band is empty and the line is
that seed's. Per-step curves are noisy (a step sees a handful of prompts), so they are drawn raw
and thin with a trailing moving average on top (window: a tenth of the points), the band
spanning the seeds' smoothed curves. The three arms of the paper keep their names and colours;
any other arm gets its ``label`` (or its name) and the next colour of :data:`PALETTE`.
matplotlib is imported only when a plot is drawn, with the file-only Agg backend (no display).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from cooper.report.figures import Arm, Run, band, moving_average, window_for

__all__ = ["ARM_COLORS", "ARM_LABELS", "PALETTE", "arm_colors", "arm_label", "make_plots",
           "moving_average", "window_for"]

ARM_LABELS = {"rule": "rule (verifier)", "rm": "fixed RM", "cooper": "Cooper"}
ARM_COLORS = {"rule": "#4c72b0", "rm": "#c44e52", "cooper": "#55a868"}
PALETTE = ("#8172b3", "#dd8452", "#937860", "#da8bc3", "#64b5cd", "#ccb974", "#8c8c8c",
           "#17becf", "#bcbd22", "#7f7f7f")
"""colours of other arms, in order (distinct from the three above and from each other)"""


def arm_label(name: str, label: str | None = None) -> str:
    """An arm's display name: its ``label`` setting, the paper arm's name, or its own name."""
    return label or ARM_LABELS.get(name, name)


LEGEND_INSIDE = 40
"""the longest label a legend inside the axes takes; with a longer one (an arm's ``label`` runs
to 250 characters on the blind-rule testbed) the legend goes under the axes, wrapped, since
inside it covered the curves and ran off the figure"""


def _legend(ax, fontsize: int) -> list:
    """The legend where it fits: inside the axes (matplotlib's best corner) for short labels,
    else under them, wrapped and out of the layout; returns the artists ``savefig`` must take
    in besides the axes (the figure grows to hold the legend under them)."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return []
    if max(map(len, labels)) <= LEGEND_INSIDE:
        ax.legend(loc="best", fontsize=fontsize)
        return []
    legend = ax.legend(handles, [textwrap.fill(text, 100) for text in labels],
                       loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=fontsize - 1,
                       frameon=False)
    legend.set_in_layout(False)  # tight_layout keeps the axes' size; the saved figure grows
    return [legend]


def arm_colors(names: list[str]) -> dict[str, str]:
    """A colour per arm: the paper arms' own, then the palette in order (cycling past ten)."""
    out = {n: ARM_COLORS[n] for n in names if n in ARM_COLORS}
    others = [n for n in names if n not in ARM_COLORS]
    out.update({n: PALETTE[i % len(PALETTE)] for i, n in enumerate(others)})
    return out


def _plot(arms: list[Arm], key_of, title: str, ylabel: str, path: Path, *,
          dashed_key=None, smooth: bool = True, ylim=None, hline=None) -> Path | None:
    """The figure of ``key_of(arm)`` by step for every arm, or None (and no file) where no run
    logged it: an empty frame says nothing (e.g. the reward model's curves of a run with none)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = arm_colors([a.name for a in arms])
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    drawn = False
    for arm in arms:
        color = colors[arm.name]
        key = key_of(arm)
        steps, raw, _, _ = band(arm.runs, key, smooth=False)
        if not steps:
            continue
        drawn = True
        if smooth and len(steps) > 3:
            ax.plot(steps, raw, color=color, alpha=0.25, linewidth=0.8)
            steps, mean, lo, hi = band(arm.runs, key, smooth=True)
            ax.fill_between(steps, lo, hi, color=color, alpha=0.15, linewidth=0)
            ax.plot(steps, mean, color=color, linewidth=2, label=arm.label)
        else:
            steps, mean, lo, hi = band(arm.runs, key, smooth=False)
            ax.fill_between(steps, lo, hi, color=color, alpha=0.15, linewidth=0)
            ax.plot(steps, mean, color=color, marker="o", markersize=3, linewidth=2,
                    label=arm.label)
        if dashed_key is not None:
            steps, mean, _, _ = band(arm.runs, dashed_key, smooth=True)
            if steps:
                ax.plot(steps, mean, color=color, linestyle="--", linewidth=1.2)
    if not drawn:
        plt.close(fig)
        path.unlink(missing_ok=True)  # an earlier report's figure of it is no longer true
        return None
    if hline is not None:
        ax.axhline(hline, color="grey", linewidth=0.8)
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    if ylim:
        ax.set_ylim(*ylim)
    ax.grid(alpha=0.3)
    outside = _legend(ax, 9)
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight", bbox_extra_artists=outside)
    plt.close(fig)
    return path


def last_policies(arms: list[Arm]) -> list[Arm]:
    """Each arm with, per seed, its last policies' test accuracy as the only record
    (``test/accuracy`` at each kept step): what the headline averages, to plot it."""
    return [Arm(a.name, a.label, a.mode, [
        Run(r.name, r.seed, r.mode, [{"step": p["step"], "test/accuracy": p["average"]}
                                     for p in (r.final or {}).get("points", [])]
            if r.final_policy else [], None, None) for r in a.runs]) for a in arms]


def make_plots(arms: list[Arm], folder: Path) -> list[Path]:
    """The report's PNGs, written into ``folder``; returns their paths in report order (the
    last policies' plot only where the experiment scored them; a figure no run logged, none)."""
    last = last_policies(arms)
    scored = any(r.rows for a in last for r in a.runs)
    plots = [*([_plot(last, lambda a: "test/accuracy",
                     "Test accuracy of the last policies (the headline is their mean)",
                     "accuracy", folder / "last_policies.png", smooth=False)] if scored else []),
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
        _plot(arms, lambda a: "val/rm_probe_auroc",
              "Reward model AUROC on the fixed labelled probe", "AUROC",
              folder / "rm_probe_auroc.png", smooth=False, ylim=(0, 1), hline=0.5),
        *(gold_plots(arms, folder) if judged_by_gold(arms) else []),
        *(judge_plots(arms, folder) if asked_a_judge(arms) else []),
    ]
    return [p for p in plots if p is not None]


def judged_by_gold(arms: list[Arm]) -> bool:
    """Whether the gold judge scored these runs (a testbed whose rule misses right answers)."""
    return any(r.series("gold/accuracy")[1] for a in arms for r in a.runs)


def gold_plots(arms: list[Arm], folder: Path) -> list[Path | None]:
    """What the rule misses and whether each arm's reward model sees it (``gold/*``)."""
    return [
        _plot(arms, lambda a: "val/rule_accuracy", "Held-out accuracy by the rule (the gold "
              "judge's is above)", "accuracy", folder / "heldout_rule_accuracy.png",
              smooth=False, ylim=(0, 1)),
        _plot(arms, lambda a: "gold/rule_missed",
              "Right rollouts (gold judge) that the rule rejects", "fraction",
              folder / "rule_missed.png", ylim=(0, 1)),
        _plot(arms, lambda a: "gold/rm_recall_missed",
              "Reward model's recall on the right rollouts the rule rejects", "recall",
              folder / "rm_recall_missed.png", ylim=(0, 1)),
        *([_plot(arms, lambda a: "gold/accuracy_yesno",
                 "Gold accuracy of the rollouts on the yes/no family (the rule pays none)",
                 "accuracy", folder / "gold_accuracy_yesno.png", ylim=(0, 1)),
           _plot(arms, lambda a: "gold/rm_recall_missed_yesno",
                 "Reward model's recall on the yes/no family's right rollouts", "recall",
                 folder / "rm_recall_yesno.png", ylim=(0, 1))] if logged(arms, "gold/accuracy_yesno")
          else []),
        *([_plot(arms, lambda a: "gold/rm_fpr_unread",
                 "Reward model's false positives on wrong answers the rule cannot read",
                 "fraction called right", folder / "rm_fpr_unread.png", ylim=(0, 1))]
          if logged(arms, "gold/rm_fpr_unread") else []),
    ]


def logged(arms: list[Arm], key: str) -> bool:
    """Whether any run of these arms logged ``key``."""
    return any(r.series(key)[1] for a in arms for r in a.runs)


def asked_a_judge(arms: list[Arm]) -> bool:
    return logged(arms, "judge/asked")


def judge_plots(arms: list[Arm], folder: Path) -> list[Path | None]:
    """The judge's cost by step (``judge/asked_share``), and each arm's accuracy against it."""
    asking = [a for a in arms if any(r.series("judge/asked")[1] for r in a.runs)]
    return [_plot(asking, lambda a: "judge/asked_share",
                  "Judge calls a step, as a share of the step's rollouts", "share",
                  folder / "judge_calls.png", ylim=(0, 1)),
            accuracy_against_calls(arms, folder / "accuracy_vs_judge_calls.png")]


def accuracy_against_calls(arms: list[Arm], path: Path) -> Path:
    """Each arm that asked a judge: its final accuracy (mean and range over seeds) against its
    judge calls a step; the rule arm and the ceiling as horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cooper.report.figures import hacking_figures, spread

    colors = arm_colors([a.name for a in arms])
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    for a in arms:
        figs = [hacking_figures(r) for r in a.runs]
        acc = spread([100 * f["final_accuracy"] for f in figs])
        calls = spread([f["judge_calls_per_step"] for f in figs])
        if acc is None:
            continue
        if calls is None:  # an arm without a judge: a line across, if it is the rule or ceiling
            if a.name == "rule" or a.ceiling:
                ax.axhline(acc.mean, color=colors[a.name], linestyle="--", linewidth=1.2,
                           label=f"{a.label} ({acc.mean:.1f}%)")
            continue
        ax.errorbar([calls.mean], [acc.mean], yerr=[[acc.mean - acc.lo], [acc.hi - acc.mean]],
                    xerr=[[calls.mean - calls.lo], [calls.hi - calls.mean]], fmt="o",
                    color=colors[a.name], capsize=3, label=a.label)
    ax.set_title("Final accuracy against judge calls (mean and range over seeds)")
    ax.set_xlabel("judge calls a training step")
    ax.set_xlim(left=0)  # calls on their whole scale: TinyV's 12 a step beside a quarter of it
    ax.set_ylabel("final accuracy (%)")
    ax.grid(alpha=0.3)
    outside = _legend(ax, 8)
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight", bbox_extra_artists=outside)
    plt.close(fig)
    return path
