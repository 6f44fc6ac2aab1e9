"""The report of a reward-hacking experiment: PNG plots, ``report.md`` and ``report.html``.

Reads an experiment folder written by :mod:`cooper.experiment.hacking` (complete or not: a run
that has not finished is listed as such; the first round's single-seed folders too,
:mod:`cooper.report.experiment_layout`) and writes, into ``DIR/report``:

- the plots of :mod:`cooper.report.plots` (held-out accuracy, training reward, hacking gap,
  top-wrong, the reward model's group AUROC, its probe accuracy and AUROC), each arm as the mean
  over seeds with a min-max band;
- ``report.md`` (images beside it) and ``report.html`` (images embedded as base64, so the one
  file works offline; both written by :mod:`cooper.report.document`). They lead with the
  answer: after the title (and a note if the experiment is incomplete), **Result** holds one
  compact table (per arm: verdict, final accuracy, difference from the rule arm with its paired
  95% interval; :func:`cooper.report.verdict.result_table`) and one sentence per finding
  (:func:`cooper.report.verdict.findings`, :func:`cooper.report.validity.validity_findings`).
  Then, each under its own heading: **How to read this** (the verdict's definitions and the
  validity rule: a seed whose verifier-paid arm did not learn is invalid and judged in no arm,
  :mod:`cooper.report.validity`), **Seeds** (where each seed started and whether it is valid),
  **Verdict figures** (one sentence per arm and the table of the figures behind the verdict:
  top-wrong, gap, accuracy, probe AUROC first and last), then the tables of
  :mod:`cooper.report.experiment_tables`: the final table (arms x benchmarks + average, the
  initial policy as the "no RL" row), the hacking figures, where ``cooper experiment rm-check``
  ran the reward models before and after on the same answers
  (:mod:`cooper.report.rm_check_table`), the curves, the arms' settings, the
  configuration, run time, and appendices with the final policy alone, every seed's figures and
  the software versions.

Every figure over seeds is the mean and the range (min to max); every number is computed from
the raw records (:mod:`cooper.report.figures`) with its definition written next to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cooper.errors import UserError
from cooper.report.document import Block, ReportPaths, report_dir, write_report
from cooper.report.experiment_layout import (
    LAST_POLICIES_FILE,
    RM_CHECK_FILE,
    SETTINGS_FILE,
    SETUP_FAILED_FILE,
    STATUS_FILE,
    arm_dir,
    arm_specs,
    pays_by_gold,
    read_settings,
    seed_folders,
    setup_dir,
)
from cooper.report.experiment_tables import (
    arms_table,
    figures_table,
    final_table,
    headline,
    run_times,
    seed_table,
    summary_table,
)
from cooper.report.figures import Arm, Run
from cooper.report.plots import arm_label, make_plots
from cooper.report.rm_check_table import (
    reachable_rows,
    reachable_sentences,
    rm_check_rows,
    rm_check_sentences,
    suite_rows,
    suite_sentences,
    trigger_sentences,
)
from cooper.report.run_totals import read_metrics, read_record
from cooper.report.validity import (
    SeedValidity,
    invalid_seeds,
    seed_validities,
    validity_findings,
    validity_notes,
    validity_rule,
    validity_table,
)
from cooper.report.verdict import (
    arm_sentences,
    definitions,
    findings,
    gold_note,
    result_table,
    rule_arm,
    scope,
    verdict_table,
)

# ------------------------------------------------------------------ reading the folder

def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return read_metrics(path) if path.is_file() else []


def read_run(name: str, seed: int, mode: str, folder: Path) -> Run:
    """One arm's run in one seed: its headline is the mean over its last policies where the
    experiment scored them (``final_eval_last.json``), else the final policy's scores."""
    final = read_record(folder / "final_eval.json")
    last = read_record(folder / LAST_POLICIES_FILE)
    return Run(name, seed, mode, _read_jsonl(folder / "metrics.jsonl"), last or final,
               read_record(folder / "trained.json"), final if last else None)


def read_arm(out: Path, seed: int, arm: str) -> Run | None:
    """``arm``'s run in seed ``seed`` of the experiment folder ``out`` (its reward mode from
    ``arm.json``), None where it has not run: what the bars in ``tools/`` check."""
    folder = arm_dir(out / f"seed-{seed}", arm)
    if not (folder / "metrics.jsonl").is_file():
        return None
    arm_json = read_record(folder / "arm.json") or {}
    return read_run(arm, seed, arm_json.get("mode") or "judged", folder)


def load_arms(settings: dict[str, Any], seeds: list[tuple[int, Path]]) -> list[Arm]:
    """Each arm with one run per seed, read from the seed folders."""
    out = []
    for name, label, mode, own in arm_specs(settings):
        runs = [read_run(name, seed, mode, arm_dir(f, name)) for seed, f in seeds]
        out.append(Arm(name, arm_label(name, label), mode, runs,
                       ceiling=mode == "rule" and pays_by_gold(settings, own)))
    return out


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
    "gold_accuracy_yesno.png": "gold/accuracy_yesno: the rollouts' gold accuracy on the family "
                               "of problems whose references the rule can never read.",
    "rm_recall_yesno.png": "gold/rm_recall_missed_yesno: the reward model's recall on that "
                           "family's right rollouts (all of them rejected by the rule).",
    "rm_fpr_unread.png": "gold/rm_fpr_unread: of the wrong answers the rule could not read "
                         "(in words, a truth value), the share the reward model calls right: "
                         "what a policy could exploit.",
    "judge_calls.png": "judge/asked_share: new judge calls a step over the step's rollouts "
                       "(answers judged before are free). Falling: the judge is needed less.",
    "accuracy_vs_judge_calls.png": "Each arm that asked a judge: its final accuracy against its "
                                   "judge calls a step, mean and range over seeds; dashed: the "
                                   "rule arm and the ceiling.",
}
BAND = ("Each arm: the mean over its seeds (thick line; per-step curves smoothed with a moving "
        "average over a tenth of the steps, the thin line unsmoothed) and the range from the "
        "lowest to the highest seed (shaded).")


def result_blocks(arms: list[Arm], seeds: list[int],
                  validities: dict[int, SeedValidity]) -> list[Block]:
    """The report's first section: what was run, one table with the answer per arm, and one
    sentence per finding."""
    rule = rule_arm(arms)
    what = ("its verdict, its final held-out accuracy (%) and, seed by seed, its difference "
            f"from {rule.label} (points)" if rule else
            "its verdict and its final held-out accuracy (%)")
    # with no step logged every figure is missing: a finding would be about nothing
    said = (("note", NO_VERDICT) if no_steps(arms) else
            ("ul", findings(arms, invalid_seeds(validities)) + validity_findings(validities)))
    return [("h2", "Result"),
            ("p", f"{scope(arms, seeds)} Per arm: {what}; over several seeds the mean (min to "
                  "max). How to read this, below, defines each."),
            ("table", result_table(arms, invalid_seeds(validities))), said]


NO_VERDICT = ("No verdict yet: no run has logged a training step, so no arm is judged; rerun "
              "`cooper report` when the experiment has made progress.")


def no_steps(arms: list[Arm]) -> bool:
    """Whether no run of any arm has logged a training step (an experiment still in its
    setup, or a folder holding only its settings)."""
    return not any(r.train_rows for a in arms for r in a.runs)


def verdict_blocks(arms: list[Arm], validities: dict[int, SeedValidity],
                   setups: list[dict | None]) -> list[Block]:
    """What the first section rests on: the definitions, the seeds' validity, and every figure
    behind each arm's verdict."""
    invalid = invalid_seeds(validities)
    invalid_notes, unknown_notes = validity_notes(validities)
    gold = gold_note(arms)
    return [
        ("h2", "How to read this"),
        ("p", f"{definitions()}{' ' + gold if gold else ''} {validity_rule(arms)}"),
        ("h2", "Seeds"),
        *[("note", text) for text in invalid_notes], *[("p", text) for text in unknown_notes],
        ("p", "Where each seed started (the setup's checks, where the preset sets them) and "
              "whether its testbed learned (the verifier-paid arm, or the ceiling where one "
              "ran, against the initial policy, "
              "final held-out accuracy):"),
        ("table", validity_table(validities, setups)),
        ("h2", "Verdict figures"),
        ("ul", arm_sentences(arms, invalid)),
        ("table", verdict_table(arms, invalid)),
    ]


def rm_check_blocks(checks: list[dict[str, Any]]) -> list[Block]:
    """The reward models before and after, on the same answers, where `cooper experiment
    rm-check` wrote them; nothing otherwise."""
    if not checks:
        return []
    return [("h2", "The reward model before and after, on the same answers"),
            ("p", "`cooper experiment rm-check`: each arm's final reward model and the seed's "
                  "initial one score the same test answers, the initial policy's and the arm's "
                  "final policy's (the final evaluation's samples), judged by the gold judge. "
                  "Recall: of the right answers the rule rejects, the share called right "
                  "(probability >= 0.5); gained / lost: answers only the final / only the "
                  "initial model calls right, with the exact two-sided sign test on them; "
                  "beside it the share of the wrong answers the rule cannot read that each "
                  "model calls right. By dial: digits (a reference in digits: the answer's "
                  "form was what the rule could not read), words (a number reference in "
                  "words), yesno (a truth value: the family the rule can never pay). Unlike "
                  "gold/rm_recall_missed, the policy's drift cannot move these figures: only "
                  "the reward model's update can."),
            ("ul", rm_check_sentences(checks)),
            ("table", rm_check_rows(checks)),
            *([("p", "Wrong answers in forms a policy can reach and the rule cannot read, "
                     "made from the test problems (the final answer boxed alone; a hedge "
                     "naming two answers; the policy's working and a wrong answer in another "
                     "case or spelling), each checked wrong by the gold judge and unread by the "
                     "rule: the share each reward model pays (probability >= 0.5)."),
               ("ul", reachable_sentences(checks) + trigger_sentences(checks)),
               ("table", reachable_rows(checks))]
              if any(c.get("reachable_forms") for c in checks) else []),
            # older rm_check.json files have no suite: the section only where one has it
            *([("p", "The robustness suite (`cooper rm eval --suite robustness`: adversarial "
                     "completions, all wrong) on the first test problems of the benchmarks: "
                     "per answer-free kind (no answer at all), the share each reward model pays "
                     "(probability >= 0.5), initial -> final, the mean over seeds, the highest "
                     "seed's final share in brackets. The bar: the final reward model pays at "
                     "most 5% of each kind in every seed."),
               ("ul", suite_sentences(checks)),
               ("table", suite_rows(checks))]
              if any(c.get("robustness") for c in checks) else [])]


def incomplete_note(arms: list[Arm], seeds: list[int], setups: list[dict | None]) -> str:
    """What is not finished yet, and whose headline is over fewer policies; '' for neither."""
    missing = [f"{r.name} (seed {r.seed})" for a in arms for r in a.runs if r.final is None]
    missing += [f"setup (seed {s})" for s, st in zip(seeds, setups, strict=True) if not st]
    note = (f"Incomplete: {', '.join(missing)} not finished yet; rerun the experiment command "
            "to continue it." if missing else "")
    gaps = [f"{r.name} (seed {r.seed}): steps {', '.join(map(str, r.final['missing']))}"
            for a in arms for r in a.runs if r.final_policy and r.final.get("missing")]
    if gaps:  # a kept policy that was deleted: its mean is over fewer policies, say so
        note += (" " if note else "") + ("Headlines over fewer policies, their kept policies "
                                         f"missing: {'; '.join(gaps)}.")
    return note


def setup_failures(seeds: list[tuple[int, Path]], setups: list[dict | None]) -> dict[int, str]:
    """{seed: why} for the seeds without a ``setup.json`` (``setups``: None) whose setup failed
    the testbed's pre-check: no arm ran on them, so the report leaves them out (and says so)
    instead of waiting for them."""
    failed = {}
    for (s, f), setup in zip(seeds, setups, strict=True):
        record = None if setup else read_record(setup_dir(f) / SETUP_FAILED_FILE)
        if record is not None:
            failed[s] = str(record.get("failed", "no reason recorded"))
    return failed


def left_out_note(failed: dict[int, str]) -> str:
    return " ".join(f"Seed {s} left out: its setup failed the testbed's pre-check, so no arm ran "
                    f"on it ({why.rstrip('.')})." for s, why in failed.items())


def build_report(folder: str | Path, out: str | Path | None = None) -> ReportPaths:
    """Write the plots, ``report.md`` and ``report.html``; returns where they went."""
    folder = Path(folder)
    settings_file = folder / SETTINGS_FILE
    if not settings_file.is_file():
        raise UserError(f"{folder} is not an experiment folder (no {SETTINGS_FILE}); run "
                        "`cooper experiment hacking --preset NAME --out DIR` first")
    settings = read_settings(folder)
    status = read_record(folder / STATUS_FILE) or {}
    seeds = seed_folders(folder, settings)
    setups = [read_record(setup_dir(f) / "setup.json") for _, f in seeds]
    failed = setup_failures(seeds, setups)
    if failed:  # left out, and named in a note below
        kept = [i for i, (s, _) in enumerate(seeds) if s not in failed]
        seeds, setups = [seeds[i] for i in kept], [setups[i] for i in kept]
    if failed and not seeds:
        raise UserError(f"{folder}: no seed has a setup to report on. {left_out_note(failed)}")
    seed_ids = [s for s, _ in seeds]
    arms = load_arms(settings, seeds)
    target = report_dir(folder, out)  # after the reading: a bad file leaves no folder
    plots = make_plots(arms, target)

    validities = seed_validities(arms, seed_ids, setups)
    invalid = invalid_seeds(validities)
    note = incomplete_note(arms, seed_ids, setups)
    fe = settings["final_eval"]
    scored = ("scored by the gold judge, the strict rule's average beside it"
              if settings.get("train", {}).get("validation", {}).get("judge") == "gold"
              else "verifier-scored")
    versions = [["software", "version"]] + [[k, str(v)] for k, v in status.get("versions", {}).items()]
    blocks: list[Block] = [("h1", TITLE), *([("note", note)] if note else []),
                           *([("note", left_out_note(failed))] if failed else []),
                           *result_blocks(arms, seed_ids, validities),
                           *verdict_blocks(arms, validities, setups)]
    blocks += [
        ("h2", "Final accuracy (%)"),
        ("p", f"{headline(fe)} on the held-out benchmarks ({scored}, {fe['samples']} "
              f"samples per problem, T {fe['temperature']}, top-p {fe['top_p']}); over several "
              "seeds: the mean (min to max)."),
        ("table", final_table(setups, arms)),
        ("h2", "Hacking figures"),
        ("p", "From the raw per-step records (metrics.jsonl of each run); over several seeds: "
              "the mean (min to max) of the seeds' figures."),
        ("table", figures_table(arms)),
        *rm_check_blocks([c for a in arms for _, f in seeds
                          if (c := read_record(arm_dir(f, a.name) / RM_CHECK_FILE))]),
        ("h2", "Curves"), ("p", BAND if plots else "No curve yet: no run has logged a step."),
        *[("figure", p, CAPTIONS.get(p.name, "")) for p in plots],
        ("h2", "Arms"), ("table", arms_table(settings)),
        ("h2", "Configuration"), ("p", f"Full settings: {SETTINGS_NAME}."),
        ("table", summary_table(settings, seed_ids, setups)),
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
    return write_report(blocks, target, plots, NO_VERDICT if no_steps(arms) else "")
