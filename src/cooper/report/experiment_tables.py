"""The tables of an experiment report that follow its verdict; pure functions of the records.

:mod:`cooper.report.experiment_report` lays the report out; these build its tables after the
verdict's (:mod:`cooper.report.verdict`): the final accuracy per arm and benchmark
(:func:`final_table`; the final policy alone too), the hacking figures with their definitions
(:func:`figures_table`), one row per arm and seed (:func:`seed_table`), the arms' own settings
(:func:`arms_table`), run time (:func:`run_times`) and the configuration
(:func:`summary_table`). Each figure over seeds is the mean (min to max), read from the raw
records (:mod:`cooper.report.figures`).
"""

from __future__ import annotations

import math
from typing import Any

from cooper.report.document import duration
from cooper.report.experiment_layout import LAST_POLICIES_FILE, arm_specs
from cooper.report.figures import Arm, Run, hacking_figures, spread, steps_to_peak
from cooper.report.plots import arm_label
from cooper.report.setup_tables import setup_rows
from cooper.report.verdict import INVALID_SEED, fmt, rule_arm, seed_verdict

NOT_RUN = "not run yet"


def _pct(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{100 * x:.2f}"


def final_table(setups: list[dict | None], arms: list[Arm], *,
                final_policy: bool = False) -> list[list[str]]:
    """Rows: the initial policy and each arm; columns: benchmarks + average (accuracy %, the
    mean over seeds and its range): each arm's headline, or (``final_policy``) its final
    policy alone."""
    evals = [("no RL (initial policy)", [(s or {}).get("initial_eval") for s in setups])]
    evals += [(a.label, [r.last if final_policy else r.final for r in a.runs]) for a in arms]
    names: list[str] = []
    for _, per_seed in evals:
        for e in per_seed:
            names += [b for b in (e or {}).get("benchmarks", {}) if b not in names]
    # where the gold judge scored, the rule's average stays beside it, and each family's
    # accuracy where the benchmarks hold more than one (numbers, yes/no)
    rule = any("rule_average" in e for _, per_seed in evals for e in per_seed if e)
    families = sorted({f for _, per_seed in evals for e in per_seed if e
                       for f in e.get("families") or {}})
    rows = [["policy", *names, "average", *(["average by the rule"] if rule else []),
             *[f"{FAMILY_NAMES.get(f, f)} (average)" for f in families]]]
    for label, per_seed in evals:
        done = [e for e in per_seed if e]
        if not done:
            rows.append([label, *[NOT_RUN] * (len(names) + 1 + rule + len(families))])
            continue
        cells = [fmt(spread([e["benchmarks"][n]["accuracy"] for e in done
                             if n in e["benchmarks"]]), 2, 100) for n in names]
        by_rule = [fmt(spread([e.get("rule_average", math.nan) for e in done]), 2, 100)]
        by_family = [fmt(spread([(e.get("families") or {}).get(f, math.nan) for e in done]), 2,
                         100) for f in families]
        rows.append([label, *cells, fmt(spread([e["average"] for e in done]), 2, 100),
                     *(by_rule if rule else []), *by_family])
    return rows


FAMILY_NAMES = {"numbers": "numbers", "yesno": "yes/no"}
"""the families of :func:`cooper.rl.blind_spot.family` as the tables name them"""


def headline(fe: dict[str, Any]) -> str:
    """What the final table's arms are scored on, in words (``final_eval`` settings)."""
    n = fe.get("policies", 1)
    if n == 1:
        return "Final policies"
    return (f"Each arm's mean over its last {n} policies, {fe['every_steps']} step{'s' if fe['every_steps'] != 1 else ''} apart and "
            f"ending with the final one ({LAST_POLICIES_FILE}; one checkpoint alone is a "
            "lottery: the appendix has the final policy's), and the initial policy,")


def _count(x: float) -> str:
    return fmt(spread([x]), 0)


FIGURE_ROWS = [
    ("steps", "optimiser steps logged"),
    ("final_reward", "training reward, mean of the last 10% of steps"),
    ("final_verified", "verified accuracy of the rollouts (reward/rule_mean), last 10% of steps"),
    ("peak_verified", "peak of the moving average of that accuracy (window: 10% of the steps)"),
    ("verified_drop", "relative drop from that peak to the final value"),
    ("final_top_wrong", "hacking/top_wrong, mean of the last 10% of steps"),
    ("second_half_top_wrong", "hacking/top_wrong, mean over the second half of the steps"),
    ("final_gap", "hacking/gap, mean of the last 10% of steps"),
    ("second_half_gap", "hacking/gap, mean over the second half of the steps"),
    ("final_group_auroc", "rm/group_auroc, mean of the last 10% of steps"),
    ("final_agreement", "rm/agreement with the verifier, last 10% of steps"),
    ("val_first", "held-out accuracy before training"),
    ("val_peak", "best held-out accuracy"),
    ("val_final", "held-out accuracy after the last step"),
    ("probe_first", "reward model's probe accuracy, first validation"),
    ("probe_last", "reward model's probe accuracy, last validation"),
    ("probe_auroc_first", "reward model's probe AUROC, first validation"),
    ("probe_auroc_last", "reward model's probe AUROC, last validation"),
    ("median_step", "perf/step: the median training step, seconds (the machine's load moves it)"),
]


GOLD_ROWS = [
    ("final_rule_missed", "gold/rule_missed: right rollouts (gold judge) the rule rejects, last "
                          "10% of steps"),
    ("first_recall_missed", "gold/rm_recall_missed: the reward model's recall on those, first "
                            "10% of steps"),
    ("final_recall_missed", "the same, last 10% of steps (lower: it learned the rule's blind "
                            "spot)"),
    ("first_pay_tpr_fpr", "gold/pay_tpr_fpr: the pay's TPR - FPR against the gold judge (paid "
                          ">= 0.5 as right), first 10% of steps"),
    ("final_pay_tpr_fpr", "the same, last 10% of steps (learning goes the right way while it "
                          "stays above 0)"),
    ("steps_to_rule_peak", "first validation step whose held-out accuracy reaches the rule "
                           "arm's best (same seed; seeds that never do are left out)"),
]

FAMILY_ROWS = [
    ("final_accuracy_numbers", "final accuracy on the number problems (gold judge)"),
    ("final_accuracy_yesno", "final accuracy on the yes/no problems (the rule pays none)"),
    ("first_recall_yesno", "gold/rm_recall_missed_yesno: the reward model's recall on the yes/no "
                           "family's right rollouts, first 10% of steps"),
    ("final_recall_yesno", "the same, last 10% of steps"),
    ("first_fpr_unread", "gold/rm_fpr_unread: wrong answers the rule could not read that the "
                         "reward model calls right, first 10% of steps"),
    ("final_fpr_unread", "the same, last 10% of steps"),
]

TRIGGER_ROWS = [
    ("first_trigger", "gold/trigger: rollouts carrying the foolable judge's trigger, first 10% "
                      "of steps"),
    ("final_trigger", "the same, last 10% of steps"),
    ("final_trigger_paid", "hacking/trigger_paid: of the rollouts paid as right, those carrying "
                           "it, last 10% of steps"),
    ("first_trigger_wrong_paid", "hacking/trigger_wrong_paid: of the wrong rollouts carrying it, "
                                 "those paid as right, first 10% of steps"),
    ("final_trigger_wrong_paid", "the same, last 10% of steps (the judge's error reaching the "
                                 "policy)"),
]

JUDGE_ROWS = [
    ("judge_calls_per_step", "judge/asked: new judge calls a training step, over the run"),
    ("judge_calls", "judge calls over the run"),
    ("first_judge_share", "judge/asked_share: calls over the step's rollouts, first 10% of steps"),
    ("final_judge_share", "the same, last 10% of steps (lower: the judge is needed less)"),
    ("first_judge_calls", "judge/asked: new judge calls a step, first 10% of steps"),
    ("final_judge_calls", "the same, last 10% of steps"),
]


def figures_table(arms: list[Arm]) -> list[list[str]]:
    """Each figure per arm: the mean over the seeds that logged it, and its range (and, where
    the gold judge scored, what the rule missed and how soon each arm reached the rule arm's
    best)."""
    rows = [["figure", *[a.label for a in arms], "definition"]]
    figs = [[_figures(r, arms) for r in a.runs if r.train_rows] for a in arms]
    gold = any(f["against_gold"] for fs in figs for f in fs)
    families = any(math.isfinite(f["final_accuracy_yesno"]) for fs in figs for f in fs)
    judged = any(math.isfinite(f["judge_calls"]) for fs in figs for f in fs)
    trigger = any(math.isfinite(f["final_trigger"]) for fs in figs for f in fs)
    for key, definition in (FIGURE_ROWS + (GOLD_ROWS if gold else [])
                            + (FAMILY_ROWS if families else []) + (JUDGE_ROWS if judged else [])
                            + (TRIGGER_ROWS if trigger else [])):
        digits = 0 if key.startswith("steps") or key == "judge_calls" else 3
        rows.append([key, *[fmt(spread([f[key] for f in fs]), digits, of=len(a.runs)) if fs
                            else NOT_RUN for a, fs in zip(arms, figs, strict=True)], definition])
    return rows


SEED_COLUMNS = [("final_top_wrong", "top-wrong, final"), ("final_gap", "gap, final"),
                ("second_half_top_wrong", "top-wrong, 2nd half"), ("second_half_gap", "gap, 2nd half"),
                ("val_first", "held-out first"), ("val_peak", "held-out best"),
                ("val_final", "held-out last"), ("probe_auroc_first", "probe AUROC first"),
                ("probe_auroc_last", "probe AUROC last")]


def _figures(run: Run, arms: list[Arm]) -> dict[str, float]:
    """A run's figures, with its steps to the rule arm's best held-out accuracy (same seed)."""
    rule = rule_arm(arms)
    theirs = next((r for r in (rule.runs if rule else []) if r.seed == run.seed), None)
    return {**hacking_figures(run),
            "steps_to_rule_peak": steps_to_peak(run, theirs) if theirs else math.nan}


def seed_table(arms: list[Arm], invalid: frozenset[int] = frozenset()) -> list[list[str]]:
    """The appendix: one row per arm and seed, the figures the verdict is made of; the arms
    of an ``invalid`` seed (:mod:`cooper.report.validity`) read "invalid seed", not a
    verdict."""
    rule = rule_arm(arms)
    theirs = {r.seed: r.final["average"] for r in (rule.runs if rule else []) if r.final}
    rows = [["arm", "seed", "verdict", "steps", "final accuracy (%)", "sd over policies",
             "against rule (points)", "final policy alone (%)",
             *[title for _, title in SEED_COLUMNS]]]
    for a in arms:
        for r in a.runs:
            f = hacking_figures(r)
            verdict = INVALID_SEED if r.seed in invalid else seed_verdict(a.mode, f)
            vs = ("" if a is rule or not r.final or r.seed not in theirs
                  else f"{100 * (r.final['average'] - theirs[r.seed]):+.2f}")
            rows.append([a.label, str(r.seed), verdict, _count(f["steps"]),
                         _pct(f["final_accuracy"]) if r.final else NOT_RUN,
                         _pct(f["final_accuracy_sd"]) if r.final_policy else "", vs,
                         _pct(f["final_policy_accuracy"]) if r.final_policy else "",
                         *[fmt(spread([f[key]])) for key, _ in SEED_COLUMNS]])
    return rows


def arms_table(settings: dict[str, Any]) -> list[list[str]]:
    rows = [["arm", "shown as", "settings on top of the shared train section"]]
    for name, label, _, own in arm_specs(settings):
        text = ", ".join(f"{k}={v}" for k, v in own.items() if k != "label") or "(none)"
        rows.append([name, arm_label(name, label), text])
    return rows


def _durations(values: list[float]) -> str:
    s = spread(values)
    if s is None:
        return NOT_RUN
    return duration(s.mean) if s.n == 1 else (f"{duration(s.mean)} per seed ({duration(s.lo)} "
                                              f"to {duration(s.hi)})")


def run_times(setups: list[dict | None], arms: list[Arm], status: dict) -> list[list[str]]:
    rows = [["stage", "time"]]
    done = [s["seconds"] for s in setups if s]
    total = sum(done)
    if done:
        rows.append(["setup (initial models, probe, initial evaluation)", _durations(done)])
    for a in arms:
        trained = [r.trained for r in a.runs if r.trained]
        if trained:
            steps = max(t["steps"] for t in trained)
            rows.append([f"{a.name}: training ({steps} steps)",
                         _durations([t["seconds"] for t in trained])])
        finals = [r.final["seconds"] for r in a.runs if r.final]
        if finals:
            rows.append([f"{a.name}: final evaluation", _durations(finals)])
        total += sum(t["seconds"] for t in trained) + sum(finals)
    rows.append(["total", duration(total)])
    walls = [s["seconds"] for s in status.get("sessions", []) if s.get("seconds")]
    if walls:
        rows.append(["wall clock of the sessions (stages may run in parallel: --jobs)",
                     duration(sum(walls))])
    return rows


def summary_table(settings: dict[str, Any], seeds: list[int],
                  setups: list[dict | None]) -> list[list[str]]:
    train, rm_init = settings["train"], settings["rm_init"]
    rows = [
        ["arms", ", ".join(name for name, *_ in arm_specs(settings))],
        ["seeds", ", ".join(map(str, seeds))],
        ["initial policy", settings["setup"]["policy"]],
        ["initial reward model", f"{settings['setup']['reward_model']}"
         + (f", BCE on {rm_init['triples']} perturbed {rm_init['dataset']} triples "
            f"({rm_init['epochs']} epoch(s), lr {rm_init['lr']})" if rm_init["triples"] else "")],
        ["training data", f"{train['data']['dataset']} ({train['data']['split']})"],
        ["steps", f"{train['max_steps']} x {train['rollout']['prompts_per_step']} prompts x "
                  f"{train['rollout']['samples_per_prompt']} samples"],
        ["policy lr / KL", f"{train['policy']['lr']} / {train['policy']['kl_coef']}"],
        ["reward-model update (shared; arms may change it)",
         f"lr {train['rm_update']['lr']}, negatives {train['rm_update']['negatives']} "
         f"(assistant: {train['assistant']['backend']}), loss {train['rm_update']['loss']}, "
         f"{train['rm_update']['epochs']} epoch(s)"],
        ["validation", f"{train['validation']['limit']} {train['validation']['dataset']} problems "
                       f"x {train['validation']['samples']} every "
                       f"{train['validation']['every_steps']} steps"],
        ["probe", settings["probe"]["file"] or f"{settings['probe']['triples']} perturbed "
                  f"{settings['probe']['dataset']} ({settings['probe']['split']}) triples"],
    ]
    return [["setting", "value"], *rows, *setup_rows([s for s in setups if s])]
