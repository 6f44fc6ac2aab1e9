"""The curves of one training run's report: a PNG per question, several metrics on each.

Unlike the experiment's plots (:mod:`cooper.report.plots`: one metric per plot, arms
overlaid), a single run's plots put the metrics that answer one question side by side: what the
policy was paid against what was verified; the hacking signals; what the reward-model update
saw; where a step's time went; held-out accuracy. Per-step curves are drawn raw and thin with a
trailing moving average on top (window: a tenth of the points, as in the experiment report).
A plot none of whose metrics the run logged is not drawn: :func:`make_run_plots` says which
were left out and why. matplotlib is imported only when a plot is drawn (Agg backend).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cooper.report.figures import moving_average, window_for
from cooper.report.run_totals import paid_key, series

# the stages of a step in the order they run (docs/metrics.md); perf/negatives_total overlaps
# the policy update and perf/step is their total, so neither is stacked
STAGES = ("perf/generation", "perf/logprobs", "perf/verify", "perf/rm_score",
          "perf/policy_update", "perf/negatives", "perf/rm_update")
NOT_STACKED = ("perf/step", "perf/negatives_total")
STAGE_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
                "#8c8c8c", "#ccb974", "#64b5cd")


@dataclass(frozen=True)
class Line:
    """One metric on a plot."""

    key: str
    label: str
    color: str
    style: str = "-"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _draw(ax, rows: list[dict[str, Any]], lines: list[Line], *, smooth: bool = True) -> bool:
    drawn = False
    for line in lines:
        steps, vals = series(rows, line.key)
        if not steps:
            continue
        drawn = True
        label = f"{line.label} ({line.key})"
        if smooth and len(steps) > 3:
            ax.plot(steps, vals, color=line.color, alpha=0.3, linewidth=0.8, linestyle=line.style)
            ax.plot(steps, moving_average(vals, window_for(len(vals))), color=line.color,
                    linewidth=2, linestyle=line.style, label=label)
        else:
            ax.plot(steps, vals, color=line.color, marker="o", markersize=3, linewidth=1.5,
                    linestyle=line.style, label=label)
    return drawn


def _finish(fig, ax, title: str, ylabel: str, *, ylim=None, hlines=(), xlabel="step") -> None:
    from matplotlib.ticker import MaxNLocator

    for y in hlines:
        ax.axhline(y, color="grey", linewidth=0.8, linestyle=":")
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    ax.set_ylabel(ylabel)
    if ylim:
        ax.set_ylim(*ylim)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=8)


def _lines_plot(rows, lines: list[Line], title: str, ylabel: str, path: Path, *,
                smooth: bool = True, ylim=None, hlines=()) -> Path | None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    if not _draw(ax, rows, lines, smooth=smooth):
        plt.close(fig)
        return None
    _finish(fig, ax, title, ylabel, ylim=ylim, hlines=hlines)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _rm_update_plot(rows, path: Path) -> Path | None:
    if not any(series(rows, k)[0] for k in ("rm/loss", "rm/pair_acc_before")):
        return None
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 5.5), dpi=100, sharex=True)
    if _draw(top, rows, [Line("rm/loss", "pairwise loss before the update", "#c44e52")]):
        _finish(fig, top, "Reward-model update: loss and accuracy on the step's pairs", "loss",
                xlabel="")
    _draw(bottom, rows, [Line("rm/pair_acc_before", "pairs ranked right", "#4c72b0"),
                         Line("rm/agreement", "agreement with the verifier", "#55a868", "--")])
    _finish(fig, bottom, "", "fraction", ylim=(0, 1.05), hlines=(0.5,))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _step_time_plot(rows, path: Path) -> Path | None:
    present = [k for k in STAGES if series(rows, k)[0]]
    present += sorted({k for r in rows for k in r if k.startswith("perf/")}
                      - set(STAGES) - set(NOT_STACKED))
    steps = sorted({s for k in present for s in series(rows, k)[0]})
    if not steps:
        return None
    by_step = {int(r["step"]): r for r in rows if "step" in r}
    stacks = [[float(by_step.get(s, {}).get(k) or 0.0) for s in steps] for k in present]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.stackplot(steps, stacks, labels=[k.removeprefix("perf/") for k in present],
                 colors=[STAGE_COLORS[i % len(STAGE_COLORS)] for i in range(len(present))],
                 alpha=0.85)
    total_steps, total = series(rows, "perf/step")
    if total_steps:
        ax.plot(total_steps, total, color="black", linewidth=1.2, label="whole step")
    _finish(fig, ax, "Seconds per step, by stage (stacked)", "seconds")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


CAPTIONS = {
    "training_reward.png": "The reward the policy was paid (solid) and the verified accuracy of "
                           "the same rollouts (dashed); in rule mode they are one line, and a "
                           "reward model that only watches is dotted. Hacking shows as solid "
                           "rising while dashed falls. Thin lines: per step; thick: moving "
                           "average over a tenth of the steps.",
    "hacking.png": "hacking/gap: reward-model mean minus verifier mean on each step's rollouts. "
                   "hacking/top_wrong: of the groups with a verified-correct rollout, the "
                   "fraction whose top-scored rollout is wrong. rm/group_auroc: the reward "
                   "model's AUROC against the verifier within each mixed group (0.5: chance).",
    "rm_update.png": "Top: the pairwise loss on the step's pairs, before the update. Bottom: the "
                     "fraction of pairs the reward model ranked right before the update, and "
                     "its agreement with the verifier on the step's rollouts.",
    "step_time.png": "Seconds per step by stage (docs/metrics.md, perf/*), stacked; the black "
                     "line is the whole step (the rest is bookkeeping, and the part of writing "
                     "negatives hidden behind the policy update does not show).",
    "validation.png": "Held-out accuracy of the policy at each validation (step 0: before "
                      "training), and the reward model's accuracy and AUROC on the probe set "
                      "when validation.rm_probe is set.",
}
LEFT_OUT = {
    "hacking.png": "the hacking signals (hacking/gap, hacking/top_wrong, rm/group_auroc): no "
                   "reward model scored the rollouts",
    "rm_update.png": "the reward-model update (rm/loss, rm/pair_acc_before): no pairs were made",
    "step_time.png": "the time per stage (perf/*): not logged",
    "validation.png": "held-out accuracy (val/accuracy): validation was off",
    "training_reward.png": "the training reward: no training step logged yet",
}


def make_run_plots(rows: list[dict[str, Any]], mode: str | None,
                   folder: Path) -> tuple[list[Path], list[str]]:
    """The run's PNGs, written into ``folder``: (paths in report order, what was left out)."""
    paid = paid_key(mode)
    reward = [Line(paid, "reward paid", "#55a868"),
              Line("reward/rule_mean", "verified accuracy", "#4c72b0", "--")]
    if paid == "reward/rule_mean":
        reward = [Line(paid, "reward paid = verified accuracy", "#4c72b0"),
                  Line("reward/rm_mean", "reward model's score, not paid", "#8c8c8c", ":")]
    train = [r for r in rows if r.get("step", 0) >= 1]
    made = {
        "training_reward.png": _lines_plot(
            train, reward, "Training reward and verified accuracy of the rollouts",
            "mean per step", folder / "training_reward.png", ylim=(0, 1.05)),
        "hacking.png": _lines_plot(
            train, [Line("hacking/gap", "gap", "#c44e52"),
                    Line("hacking/top_wrong", "top-wrong", "#8172b3"),
                    Line("rm/group_auroc", "group AUROC", "#64b5cd", "--")],
            "Hacking signals", "value", folder / "hacking.png", ylim=(-1.05, 1.05),
            hlines=(0.0, 0.5)),
        "rm_update.png": _rm_update_plot(train, folder / "rm_update.png"),
        "step_time.png": _step_time_plot(train, folder / "step_time.png"),
        "validation.png": _lines_plot(
            rows, [Line("val/accuracy", "held-out accuracy", "#4c72b0"),
                   Line("val/rm_probe_accuracy", "probe accuracy", "#dd8452"),
                   Line("val/rm_probe_auroc", "probe AUROC", "#937860", "--")],
            "Validation", "fraction", folder / "validation.png", smooth=False, ylim=(0, 1.05)),
    }
    return ([p for p in made.values() if p is not None],
            [LEFT_OUT[name] for name, p in made.items() if p is None])
