"""The report of a reward-hacking experiment: PNG plots, ``report.md`` and ``report.html``.

Reads an experiment folder written by :mod:`cooper.experiment.hacking` (complete or not: a run
that has not finished is listed as such; the first round's single-seed folders too,
:mod:`cooper.report.experiment_layout`) and writes, into ``DIR/report``:

- the plots of :mod:`cooper.report.plots` (held-out accuracy, training reward, hacking gap,
  top-wrong, the reward model's group AUROC, its probe accuracy and AUROC), each arm as the mean
  over seeds with a min-max band;
- ``report.md`` (images beside it) and ``report.html`` (images embedded as base64, so the one
  file works offline; both written by :mod:`cooper.report.document`). They lead with the
  verdict (:mod:`cooper.report.verdict`: per arm, hacked or not, final accuracy against the
  rule arm, probe AUROC first and last; a seed whose verifier-paid arm did not learn is invalid
  and judged in no arm, :mod:`cooper.report.validity`), then the final table (arms x
  benchmarks + average, the initial policy as the "no RL" row), the hacking figures, the curves,
  the arms' settings, the configuration, run time, and an appendix with every seed's figures
  and the software versions.

Every figure over seeds is the mean and the range (min to max); every number is computed from
the raw records (:mod:`cooper.report.figures`) with its definition written next to it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from cooper.errors import UserError
from cooper.infra.files import read_json
from cooper.report.document import ReportPaths, duration, write_report
from cooper.report.experiment_layout import (
    LAST_POLICIES_FILE,
    SETTINGS_FILE,
    STATUS_FILE,
    arm_dir,
    read_settings,
    seed_folders,
    setup_dir,
)
from cooper.report.figures import Arm, Run, hacking_figures, spread, steps_to_peak
from cooper.report.plots import arm_label, make_plots
from cooper.report.setup_tables import setup_rows
from cooper.report.validity import (
    invalid_seeds,
    seed_validities,
    validity_notes,
    validity_rule,
    validity_table,
)
from cooper.report.verdict import (
    INVALID_SEED,
    fmt,
    rule_arm,
    seed_verdict,
    verdict_sentences,
    verdict_table,
)

NOT_RUN = "not run yet"


# ------------------------------------------------------------------ reading the folder

def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def arm_specs(settings: dict[str, Any]) -> list[tuple[str, str | None, str, dict[str, Any]]]:
    """(name, label, reward mode, own settings) of each arm that ``experiment.yaml`` lists: the
    mapping form, or the first round's string of modes."""
    arms, shared_mode = settings["arms"], settings["train"]["reward"]["mode"]
    if isinstance(arms, str):
        return [(n, None, n, {"reward.mode": n}) for n in (a.strip() for a in arms.split(","))
                if n]
    return [(name, s.get("label"), s.get("reward.mode", shared_mode), s)
            for name, s in arms.items()]


def _run(name: str, seed: int, mode: str, folder: Path) -> Run:
    """One arm's run in one seed: its headline is the mean over its last policies where the
    experiment scored them (``final_eval_last.json``), else the final policy's scores."""
    final = read_json(folder / "final_eval.json")
    last = read_json(folder / LAST_POLICIES_FILE)
    return Run(name, seed, mode, _read_jsonl(folder / "metrics.jsonl"), last or final,
               read_json(folder / "trained.json"), final if last else None)


def load_arms(settings: dict[str, Any], seeds: list[tuple[int, Path]]) -> list[Arm]:
    """Each arm with one run per seed, read from the seed folders."""
    out = []
    for name, label, mode, _ in arm_specs(settings):
        runs = [_run(name, seed, mode, arm_dir(f, name)) for seed, f in seeds]
        out.append(Arm(name, arm_label(name, label), mode, runs))
    return out


# ------------------------------------------------------------------ tables

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
    # where the gold judge scored, the rule's average stays beside it
    rule = any("rule_average" in e for _, per_seed in evals for e in per_seed if e)
    rows = [["policy", *names, "average", *(["average by the rule"] if rule else [])]]
    for label, per_seed in evals:
        done = [e for e in per_seed if e]
        if not done:
            rows.append([label, *[NOT_RUN] * (len(names) + 1 + rule)])
            continue
        cells = [fmt(spread([e["benchmarks"][n]["accuracy"] for e in done
                             if n in e["benchmarks"]]), 2, 100) for n in names]
        by_rule = [fmt(spread([e.get("rule_average", math.nan) for e in done]), 2, 100)]
        rows.append([label, *cells, fmt(spread([e["average"] for e in done]), 2, 100),
                     *(by_rule if rule else [])])
    return rows


def _headline(fe: dict[str, Any]) -> str:
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
]


GOLD_ROWS = [
    ("final_rule_missed", "gold/rule_missed: right rollouts (gold judge) the rule rejects, last "
                          "10% of steps"),
    ("first_recall_missed", "gold/rm_recall_missed: the reward model's recall on those, first "
                            "10% of steps"),
    ("final_recall_missed", "the same, last 10% of steps (lower: it learned the rule's blind "
                            "spot)"),
    ("steps_to_rule_peak", "first validation step whose held-out accuracy reaches the rule "
                           "arm's best (same seed; seeds that never do are left out)"),
]


def figures_table(arms: list[Arm]) -> list[list[str]]:
    """Each figure per arm: the mean over the seeds that logged it, and its range (and, where
    the gold judge scored, what the rule missed and how soon each arm reached the rule arm's
    best)."""
    rows = [["figure", *[a.label for a in arms], "definition"]]
    figs = [[_figures(r, arms) for r in a.runs if r.train_rows] for a in arms]
    gold = any(f["against_gold"] for fs in figs for f in fs)
    for key, definition in FIGURE_ROWS + (GOLD_ROWS if gold else []):
        digits = 0 if key.startswith("steps") else 3
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


# ------------------------------------------------------------------ the report

TITLE = "Reward hacking: rule vs. fixed reward model vs. Cooper"
SETTINGS_NAME = f"{SETTINGS_FILE} in the experiment folder"
CAPTIONS = {
    "last_policies.png": "Each arm's last policies on the test benchmarks (the final evaluation's "
                         "protocol), by step: the headline is their mean.",
    "heldout_accuracy.png": "Held-out accuracy (verifier-scored, validation protocol) by step.",
    "training_reward.png": "Solid: the reward each arm optimises. Dashed: the verified accuracy "
                           "of the same rollouts. Hacking shows as solid rising while dashed "
                           "falls.",
    "hacking_gap.png": "hacking/gap = reward-model mean minus verifier mean on each step's "
                       "rollouts (the rule arm's reward model is frozen and only watches).",
    "hacking_top_wrong.png": "hacking/top_wrong: of the groups with a verified-correct rollout, "
    "the fraction whose highest reward-model score went to a wrong one. GRPO uses only the "
    "order within a group, so this is the hacking signal a calibration shift cannot hide.",
    "rm_group_auroc.png": "rm/group_auroc: the reward model's AUROC against the verifier within "
                          "each mixed group, averaged (0.5: chance).",
    "rm_probe.png": "The reward model's accuracy on a fixed labelled probe set: does the online "
                    "update make it forget? (frozen reward models: flat).",
    "rm_probe_auroc.png": "The same probe, as AUROC (calibration-free; 0.5: chance).",
    "heldout_rule_accuracy.png": "Held-out accuracy by the rule, on the same samples as the "
                                 "gold judge's above: the gap between the two is what the rule "
                                 "misses.",
    "rule_missed.png": "gold/rule_missed: of each step's rollouts that the gold judge finds "
                       "right, the share the rule rejects.",
    "rm_recall_missed.png": "gold/rm_recall_missed: of those, the share the reward model calls "
                            "right (probability >= 0.5). Falling: the update teaches it the "
                            "rule's blind spot.",
}
BAND = ("Each arm: the mean over its seeds (thick line; per-step curves smoothed with a moving "
        "average over a tenth of the steps, the thin line unsmoothed) and the range from the "
        "lowest to the highest seed (shaded).")


def build_report(folder: str | Path, out: str | Path | None = None) -> ReportPaths:
    """Write the plots, ``report.md`` and ``report.html``; returns where they went."""
    folder = Path(folder)
    settings_file = folder / SETTINGS_FILE
    if not settings_file.is_file():
        raise UserError(f"{folder} is not an experiment folder (no {SETTINGS_FILE}); run "
                        "`cooper experiment hacking --preset NAME --out DIR` first")
    settings = read_settings(folder)
    status = read_json(folder / STATUS_FILE) or {}
    seeds = seed_folders(folder, settings)
    setups = [read_json(setup_dir(f) / "setup.json") for _, f in seeds]
    arms = load_arms(settings, seeds)
    report_dir = Path(out) if out else folder / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    plots = make_plots(arms, report_dir)

    validities = seed_validities(arms, [s for s, _ in seeds], setups)
    invalid = invalid_seeds(validities)
    invalid_notes, unknown_notes = validity_notes(validities)
    sentences = verdict_sentences(arms, [s for s, _ in seeds], invalid)
    missing = [f"{r.name} (seed {r.seed})" for a in arms for r in a.runs if r.final is None]
    missing += [f"setup (seed {s})" for (s, _), st in zip(seeds, setups, strict=True) if not st]
    note = (f"Incomplete: {', '.join(missing)} not finished yet; rerun the experiment command "
            "to continue it." if missing else "")
    gaps = [f"{r.name} (seed {r.seed}): steps {', '.join(map(str, r.final['missing']))}"
            for a in arms for r in a.runs if r.final_policy and r.final.get("missing")]
    if gaps:  # a kept policy that was deleted: its mean is over fewer policies, say so
        note += (" " if note else "") + ("Headlines over fewer policies, their kept policies "
                                         f"missing: {'; '.join(gaps)}.")
    fe = settings["final_eval"]
    scored = ("scored by the gold judge, the strict rule's average beside it"
              if settings.get("train", {}).get("validation", {}).get("judge") == "gold"
              else "verifier-scored")
    versions = [["software", "version"]] + [[k, str(v)] for k, v in status.get("versions", {}).items()]
    blocks: list[tuple] = [("h1", TITLE)]
    if note:
        blocks.append(("note", note))
    blocks += [
        ("h2", "Verdict"), ("p", f"{sentences[0]} {validity_rule()}"),
        *[("note", text) for text in invalid_notes], *[("p", text) for text in unknown_notes],
        ("p", "Where each seed started (the setup's checks, where the preset sets them) and "
              "whether its testbed learned (the verifier-paid arm against the initial policy, "
              "final held-out accuracy):"),
        ("table", validity_table(validities, setups)),
        ("ul", sentences[1:]),
        ("table", verdict_table(arms, invalid)),
        ("h2", "Final accuracy (%)"),
        ("p", f"{_headline(fe)} on the held-out benchmarks ({scored}, {fe['samples']} "
              f"samples per problem, T {fe['temperature']}, top-p {fe['top_p']}); over several "
              "seeds: the mean (min to max)."),
        ("table", final_table(setups, arms)),
        ("h2", "Hacking figures"),
        ("p", "From the raw per-step records (metrics.jsonl of each run); over several seeds: "
              "the mean (min to max) of the seeds' figures."),
        ("table", figures_table(arms)),
        ("h2", "Curves"), ("p", BAND),
        *[("figure", p, CAPTIONS.get(p.name, "")) for p in plots],
        ("h2", "Arms"), ("table", arms_table(settings)),
        ("h2", "Configuration"), ("p", f"Full settings: {SETTINGS_NAME}."),
        ("table", summary_table(settings, [s for s, _ in seeds], setups)),
        ("h2", "Run time"), ("table", run_times(setups, arms, status)),
        *([("h2", "Appendix: the final policy alone"),
           ("p", "The policy each arm ended with, scored once as above (the figure this report "
                 "gave before it scored the last policies). One checkpoint moves by several "
                 "points between steps, so this table is not the result."),
           ("table", final_table(setups, arms, final_policy=True))]
          if any(r.final_policy for a in arms for r in a.runs) else []),
        ("h2", "Appendix: every seed"),
        ("p", "One row per arm and seed: the figures the verdict is made of."),
        ("table", seed_table(arms, invalid)),
        ("h2", "Versions"), ("table", versions),
    ]
    return write_report(blocks, report_dir, plots)
