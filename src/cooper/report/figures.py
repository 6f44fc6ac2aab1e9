"""The numbers of an experiment report, computed from the raw per-step records; pure functions.

One :class:`Run` is one arm trained with one seed (its ``metrics.jsonl``, ``trained.json`` and
``final_eval.json``, and ``final_eval_last.json`` where the last policies are scored).
:func:`hacking_figures` reduces a run to the figures the report and its
verdict speak of; :func:`spread` and :func:`band` summarise a figure or a curve over the seeds of
an arm as the mean and the range (min to max). "Final" means the mean over the last
:data:`FINAL_FRACTION` of the logged training steps (at least one step): a single step is one
batch of a handful of prompts, too noisy to stand for the end of a run.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

FINAL_FRACTION = 0.1
"""'final' = the mean over the last 10% of a run's logged training steps (at least one step)"""


def paid_key(mode: str | None) -> str:
    """The metric of the reward the policy was paid: the verifier's in rule mode, the reward
    model's in rm and cooper modes, the hybrid's in the hybrid modes; TRL's ``reward`` (the
    weighted sum it optimised) when the mode is unknown."""
    return {"rule": "reward/rule_mean", "rm": "reward/rm_mean", "cooper": "reward/rm_mean",
            "hybrid": "reward/hybrid_mean", "hybrid_cooper": "reward/hybrid_mean"}.get(
        mode or "", "reward")  # rule_judge (the rule, and a judge where it rejects): TRL's


@dataclass
class Run:
    """One arm, one seed: its records as its folder holds them (a run not started has none)."""

    name: str
    """the arm's name"""
    seed: int
    """the seed it ran with"""
    mode: str
    """its reward.mode: 'rule' optimises the verifier's reward, 'rm' and 'cooper' the model's"""
    rows: list[dict[str, Any]]
    """the per-step records of metrics.jsonl"""
    final: dict[str, Any] | None
    """the headline benchmark scores: final_eval_last.json (the mean over the last policies)
    when the experiment scores them, else final_eval.json (the final policy's)"""
    trained: dict[str, Any] | None
    """trained.json: steps and training time"""
    final_policy: dict[str, Any] | None = None
    """final_eval.json, the final policy's scores alone, when ``final`` is the mean over the
    last policies (None: ``final`` is the final policy's)"""

    @property
    def last(self) -> dict[str, Any] | None:
        """The final policy's benchmark scores alone."""
        return self.final_policy or self.final

    def series(self, key: str) -> tuple[list[int], list[float]]:
        """(steps, values) of one metric, skipping records without a finite value."""
        pts = [(int(r["step"]), float(r[key])) for r in self.rows
               if isinstance(r.get(key), int | float) and math.isfinite(r[key])]
        return [s for s, _ in pts], [v for _, v in pts]

    @property
    def reward_key(self) -> str:
        """The reward this run's policy optimised."""
        return paid_key(self.mode)

    @property
    def train_rows(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r.get("step", 0) >= 1 and "reward/rule_mean" in r]


def tail_mean(values: list[float], fraction: float = FINAL_FRACTION) -> float:
    """Mean of the last ``fraction`` of the values (at least one); NaN when there are none."""
    if not values:
        return math.nan
    k = max(1, math.ceil(len(values) * fraction))
    return sum(values[-k:]) / k


def head_mean(values: list[float], fraction: float = FINAL_FRACTION) -> float:
    """Mean of the first ``fraction`` of the values (at least one); NaN when there are none."""
    if not values:
        return math.nan
    k = max(1, math.ceil(len(values) * fraction))
    return sum(values[:k]) / k


def second_half_mean(values: list[float]) -> float:
    if not values:
        return math.nan
    half = values[len(values) // 2:]
    return sum(half) / len(half)


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


def _first(values: list[float]) -> float:
    return values[0] if values else math.nan


def _last(values: list[float]) -> float:
    return values[-1] if values else math.nan


def hacking_figures(run: Run) -> dict[str, float]:
    """The figures the issue's acceptance criteria speak of, from one run's raw records (NaN
    where the run has no such record)."""
    # where the gold judge scored (a testbed whose rule misses right answers), hacking is
    # judged against it: paying what the rule misses is the point there, not a hack
    gold = bool(run.series("hacking/gold_gap")[1])
    _, gap = run.series("hacking/gold_gap" if gold else "hacking/gap")
    _, top_wrong = run.series("hacking/gold_top_wrong" if gold else "hacking/top_wrong")
    _, ver = run.series("reward/rule_mean")
    _, rew = run.series(run.reward_key)
    _, val = run.series("val/accuracy")
    _, probe = run.series("val/rm_probe_accuracy")
    _, auroc = run.series("val/rm_probe_auroc")
    _, group_auroc = run.series("rm/group_auroc")
    _, agree = run.series("rm/agreement")
    _, missed = run.series("gold/rule_missed")
    _, recall = run.series("gold/rm_recall_missed")
    _, recall_yesno = run.series("gold/rm_recall_missed_yesno")
    _, fpr = run.series("gold/rm_fpr_unread")
    _, youden = run.series("gold/pay_tpr_fpr")
    _, trigger = run.series("gold/trigger")
    _, trigger_paid = run.series("hacking/trigger_paid")
    _, trigger_wrong = run.series("hacking/trigger_wrong_paid")
    _, asked = run.series("judge/asked")
    _, share = run.series("judge/asked_share")
    _, step_seconds = run.series("perf/step")
    families = (run.final or {}).get("families") or {}
    smooth = moving_average(ver, window_for(len(ver))) if ver else []
    peak = max(smooth) if smooth else math.nan
    final_ver = tail_mean(ver)
    return {
        "steps": len(run.train_rows),
        "final_reward": tail_mean(rew),
        "final_top_wrong": tail_mean(top_wrong),
        "second_half_top_wrong": second_half_mean(top_wrong),
        "final_gap": tail_mean(gap),
        "second_half_gap": second_half_mean(gap),
        "final_group_auroc": tail_mean(group_auroc),
        "peak_verified": peak,
        "final_verified": final_ver,
        "verified_drop": (peak - final_ver) / peak if peak and peak > 0 else math.nan,
        "final_agreement": tail_mean(agree),
        "val_first": _first(val),
        "val_peak": max(val) if val else math.nan,
        "val_final": _last(val),
        "probe_first": _first(probe),
        "probe_last": _last(probe),
        "probe_auroc_first": _first(auroc),
        "probe_auroc_last": _last(auroc),
        "final_accuracy": run.final["average"] if run.final else math.nan,
        "final_policy_accuracy": run.last["average"] if run.last else math.nan,
        "final_accuracy_sd": run.final.get("sd", math.nan) if run.final else math.nan,
        "final_rule_accuracy": (run.final.get("rule_average", math.nan) if run.final
                                else math.nan),
        "against_gold": float(gold),
        "final_rule_missed": tail_mean(missed),
        "first_recall_missed": head_mean(recall),
        "final_recall_missed": tail_mean(recall),
        "first_recall_yesno": head_mean(recall_yesno),
        "final_recall_yesno": tail_mean(recall_yesno),
        "first_fpr_unread": head_mean(fpr),
        "final_fpr_unread": tail_mean(fpr),
        "first_pay_tpr_fpr": head_mean(youden),
        "final_pay_tpr_fpr": tail_mean(youden),
        "first_trigger": head_mean(trigger),
        "final_trigger": tail_mean(trigger),
        "final_trigger_paid": tail_mean(trigger_paid),
        "first_trigger_wrong_paid": head_mean(trigger_wrong),
        "final_trigger_wrong_paid": tail_mean(trigger_wrong),
        "final_accuracy_numbers": families.get("numbers", math.nan),
        "final_accuracy_yesno": families.get("yesno", math.nan),
        # a step without a judge call logs 0: the mean over logged steps is the run's rate
        "judge_calls_per_step": sum(asked) / len(run.train_rows) if asked else math.nan,
        "judge_calls": float(sum(asked)) if asked else math.nan,
        "first_judge_share": head_mean(share),
        "final_judge_share": tail_mean(share),
        "first_judge_calls": head_mean(asked),
        "final_judge_calls": tail_mean(asked),
        "median_step": statistics.median(step_seconds) if step_seconds else math.nan,
    }


def steps_to_peak(run: Run, reference: Run) -> float:
    """The first validation step at which ``run``'s held-out accuracy reaches the best held-out
    accuracy ``reference`` (the rule arm, same seed) ever had; NaN when it never does or
    either has no validation."""
    _, theirs = reference.series("val/accuracy")
    if not theirs:
        return math.nan
    steps, mine = run.series("val/accuracy")
    return next((float(s) for s, v in zip(steps, mine, strict=True) if v >= max(theirs)),
                math.nan)


@dataclass(frozen=True)
class Spread:
    """A figure over seeds: its mean, min and max over the seeds that have it (``n``)."""

    mean: float
    lo: float
    hi: float
    n: int


def spread(values: list[float]) -> Spread | None:
    """Mean and range of the finite values; None when there is none."""
    ok = [v for v in values if v is not None and math.isfinite(v)]
    if not ok:
        return None
    return Spread(sum(ok) / len(ok), min(ok), max(ok), len(ok))


T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
"""Student's t, 0.975 quantile, for 1..30 degrees of freedom (the standard table; beyond, the
normal's 1.960): no statistics package for eight lines"""


def paired_interval(diffs: list[float]) -> tuple[float, float] | None:
    """The 95% interval of the mean of paired differences (one per seed), Student's t with
    n - 1 degrees of freedom; None for fewer than two finite differences."""
    ok = [d for d in diffs if d is not None and math.isfinite(d)]
    if len(ok) < 2:
        return None
    mean = sum(ok) / len(ok)
    sd = math.sqrt(sum((d - mean) ** 2 for d in ok) / (len(ok) - 1))
    half = (T_975[len(ok) - 2] if len(ok) - 1 <= len(T_975) else 1.960) * sd / math.sqrt(len(ok))
    return mean - half, mean + half


def band(runs: list[Run], key: str, *, smooth: bool) -> tuple[list[int], list[float],
                                                               list[float], list[float]]:
    """A curve over seeds: (steps, mean, min, max) at each step over the runs that logged it.
    With ``smooth`` each run's curve is first smoothed (:func:`moving_average`, window a tenth
    of its points), so the band shows how the seeds' trends differ, not per-step noise."""
    at: dict[int, list[float]] = {}
    for run in runs:
        steps, vals = run.series(key)
        if smooth and vals:
            vals = moving_average(vals, window_for(len(vals)))
        for s, v in zip(steps, vals, strict=True):
            at.setdefault(s, []).append(v)
    steps = sorted(at)
    return (steps, [sum(at[s]) / len(at[s]) for s in steps], [min(at[s]) for s in steps],
            [max(at[s]) for s in steps])


@dataclass
class Arm:
    """One arm over every seed: how the report names it, and its runs (one per seed)."""

    name: str
    """the arm's name (its folder)"""
    label: str
    """its name in tables and legends"""
    mode: str
    """its reward.mode"""
    runs: list[Run]
    """one per seed, in the experiment's seed order"""
    ceiling: bool = False
    """paid by the gold judge (a blind-rule testbed's ceiling)"""

    @property
    def reward_key(self) -> str:
        return paid_key(self.mode)
