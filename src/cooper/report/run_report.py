"""The report of one training run (``cooper report RUN_DIR``), and which report a folder gets.

A ``cooper train`` run folder (recognised by its ``metrics.jsonl``; the run may still be going)
gets, in ``RUN_DIR/report``: the PNGs of :mod:`cooper.report.run_plots` (the reward paid
against verified accuracy, the hacking signals, the reward-model update, the time per stage,
validation), ``report.md`` and a self-contained ``report.html`` (:mod:`cooper.report.document`).
They lead with the answer: after the title (and a note where the settings or the steps are
missing), **Result** holds one short table (:func:`result_table`: the reward paid against
verified accuracy first and last, held-out accuracy, the hacking signals, and for a run with a
reward model its agreement, pairs and updates) and one sentence per finding
(:func:`cooper.report.run_totals.summary_sentences`). Then, each under its own heading: **How to
read this** (the definitions, :func:`cooper.report.run_totals.definitions`), **Totals** (every
total with its definition), **Curves** and the run's main **Settings**. A metric the run never
logged is left out with a sentence saying so.

:func:`report_folder` decides: an experiment folder (``experiment.yaml``) gets the experiment's
report (:func:`cooper.report.experiment_report.build_report`, unchanged), a run folder this one; an
experiment's arm folders are run folders too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from cooper.errors import UserError
from cooper.report.document import ReportPaths, duration, report_dir, write_report
from cooper.report.experiment_layout import SETTINGS_FILE
from cooper.report.experiment_report import build_report
from cooper.report.run_plots import CAPTIONS, make_run_plots
from cooper.report.run_totals import (
    QUARTER,
    RunTotals,
    definitions,
    read_metrics,
    read_record,
    run_totals,
    summary_sentences,
)

METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.yaml"


def is_run_folder(folder: str | Path) -> bool:
    """A ``cooper train`` output folder: it holds ``metrics.jsonl``."""
    return (Path(folder) / METRICS_FILE).is_file()


def report_folder(folder: str | Path, out: str | Path | None = None) -> ReportPaths:
    """The report a folder calls for: an experiment's, or a training run's."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder; give an experiment folder (`cooper "
                        "experiment hacking --out DIR`) or a training run folder (the "
                        "output_dir of `cooper train`)")
    if (folder / SETTINGS_FILE).is_file():
        return build_report(folder, out)
    if is_run_folder(folder):
        return build_run_report(folder, out)
    raise UserError(f"{folder} is neither an experiment folder (no {SETTINGS_FILE}, written by "
                    f"`cooper experiment hacking --out DIR`) nor a training run folder (no "
                    f"{METRICS_FILE}, written by `cooper train` into its output_dir)")


def read_config(folder: Path) -> dict[str, Any] | None:
    """The run's resolved settings (``config.yaml``), None when absent or unreadable."""
    path = folder / CONFIG_FILE
    if not path.is_file():
        return None
    try:
        cfg = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        return None
    return cfg if isinstance(cfg, dict) else None


def setting(cfg: dict[str, Any] | None, dotted: str) -> Any:
    """``cfg['a']['b']`` for ``'a.b'``; None where any part is missing."""
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _count(x: int | None) -> str | None:
    return None if x is None else str(x)


def _num(x: float | None, signed: bool = False) -> str | None:
    return None if x is None else (f"{x:+.3f}" if signed else f"{x:.3f}")


def _trend(first: float | None, last: float | None) -> str | None:
    return None if first is None or last is None else f"{first:.3f} -> {last:.3f}"


def result_table(t: RunTotals) -> list[list[str]]:
    """The run's answer, one row per figure it logged: verified accuracy and the reward paid
    (first -> last quarter), held-out accuracy (first -> last validation), the hacking signals
    over the second half, and, where a reward model scored, its agreement with the verifier,
    the pairs and its updates (:func:`totals_table` defines each)."""
    paid = t.paid_key != "reward/rule_mean"
    rows = [
        ("training steps", str(t.steps)),
        (f"verified accuracy (reward/rule_mean{'' if paid else ', the reward paid'}), first "
         "-> last quarter",
         _trend(t.verified_first_quarter, t.verified_last_quarter)),
        (f"reward paid ({t.paid_key}), first -> last quarter",
         _trend(t.paid_first_quarter, t.paid_last_quarter) if paid else None),
        ("held-out accuracy (val/accuracy), first -> last validation", _trend(t.val_first, t.val_last)),
        ("hacking/gap, second half", _num(t.gap_second_half, signed=True)),
        ("hacking/top_wrong, second half", _num(t.top_wrong_second_half)),
        ("agreement with the verifier (rm/agreement), first -> last step",
         _trend(t.agreement_first, t.agreement_last)),
        ("pairs made", None if t.pairs is None
         else f"{t.pairs} on {t.steps_with_pairs} of {t.steps} steps"),
        ("reward-model updates", None if t.rm_updates is None
         else f"{t.rm_updates} of {t.steps} steps"),
    ]
    return [["figure", "value"], *[[name, value] for name, value in rows if value is not None]]


def totals_table(t: RunTotals) -> tuple[list[list[str]], list[str]]:
    """Every total the run logged, with its definition (``docs/metrics.md`` defines the
    metrics), and the names of those it did not log."""
    q = f"{QUARTER:.0%}"
    rows = [
        ("steps", str(t.steps), "training steps logged"),
        ("pairs", _count(t.pairs), "(positive, negative) pairs made, all steps (sum of rm/pairs)"),
        ("negatives: rollout", _count(t.negatives_rollout),
         "pairs whose negative is one of the policy's wrong rollouts (sum of rm/pairs_rollout)"),
        ("negatives: assistant", _count(t.negatives_assistant),
         "negatives written by the assistant and accepted (sum of rm/valid_negatives)"),
        ("negatives: fallback", _count(t.negatives_fallback),
         "negatives written by the rule-based fallback (sum of rm/fallback_negatives)"),
        ("positives without a pair", _count(t.dropped), "sum of rm/dropped_pairs"),
        ("reward-model updates", _count(t.rm_updates), "steps with rm/updated = 1"),
        ("agreement, first step", _num(t.agreement_first), "rm/agreement at the first step"),
        ("agreement, last step", _num(t.agreement_last), "rm/agreement at the last step"),
        ("verified, first quarter", _num(t.verified_first_quarter),
         f"reward/rule_mean, mean over the first {q} of the steps (at least one)"),
        ("verified, last quarter", _num(t.verified_last_quarter),
         f"reward/rule_mean, mean over the last {q} of the steps"),
        ("reward paid, first quarter", _num(t.paid_first_quarter),
         f"{t.paid_key}, mean over the first {q} of the steps"),
        ("reward paid, last quarter", _num(t.paid_last_quarter),
         f"{t.paid_key}, mean over the last {q} of the steps"),
        ("gap, second half", _num(t.gap_second_half, signed=True),
         "hacking/gap, mean over the second half of the steps"),
        ("top-wrong, second half", _num(t.top_wrong_second_half),
         "hacking/top_wrong, mean over the second half of the steps that logged it"),
        ("held-out accuracy, first", _num(t.val_first), "val/accuracy at the first validation"),
        ("held-out accuracy, last", _num(t.val_last), "val/accuracy at the last validation"),
        ("seconds per step", None if t.step_seconds is None else f"{t.step_seconds:.1f}",
         "perf/step, mean over the steps"),
    ]
    table = [["total", "value", "definition"]]
    table += [[name, value, definition] for name, value, definition in rows if value is not None]
    return table, [name for name, value, _ in rows if value is None]


SETTINGS = (("reward.mode", "reward mode"), ("policy.model", "policy"),
            ("reward.model", "reward model"), ("data.dataset", "training data"),
            ("max_steps", "max steps"), ("rollout.prompts_per_step", "prompts per step"),
            ("rollout.samples_per_prompt", "samples per prompt"), ("policy.lr", "policy lr"),
            ("policy.kl_coef", "KL coefficient"), ("rm_update.negatives", "negatives"),
            ("rm_update.loss", "reward-model loss"), ("rm_update.lr", "reward-model lr"),
            ("seed", "seed"))


def settings_table(cfg: dict[str, Any] | None, folder: Path,
                   made_pairs: bool) -> list[list[str]]:
    """The run's main settings (all of them: ``config.yaml``) and its training time; those of
    the reward-model update only where the run made pairs."""
    rows = [["setting", "value"]]
    rows += [[f"{label} ({key})", str(setting(cfg, key))] for key, label in SETTINGS
             if setting(cfg, key) is not None and (made_pairs or not key.startswith("rm_"))]
    runtime = (read_record(folder / "train_summary.json") or {}).get("train_runtime")
    if isinstance(runtime, int | float):
        rows.append(["training time (train_summary.json)", duration(runtime)])
    return rows


def build_run_report(folder: str | Path, out: str | Path | None = None) -> ReportPaths:
    """Write the plots, ``report.md`` and ``report.html`` of one run; returns where they went."""
    folder = Path(folder)
    if not is_run_folder(folder):
        raise UserError(f"{folder} is not a training run folder (no {METRICS_FILE}); give the "
                        "output_dir of `cooper train`")
    rows = read_metrics(folder / METRICS_FILE)
    cfg = read_config(folder)
    mode = setting(cfg, "reward.mode")
    totals = run_totals(rows, mode if isinstance(mode, str) else None)
    target = report_dir(folder, out)  # after the reading: a bad file leaves no folder
    plots, left_out = make_run_plots(rows, totals.mode, target)

    blocks: list[tuple] = [("h1", f"Training run: {folder.resolve().name}")]
    if cfg is None:
        blocks.append(("note", f"No readable {CONFIG_FILE} in the run folder: the reward mode "
                               f"is unknown, so the reward paid is read as TRL's "
                               f"'{totals.paid_key}'."))
    no_steps = ("" if totals.steps else "No training step logged yet: rerun `cooper report` "
                "when the run has made progress.")
    if no_steps:
        blocks.append(("note", no_steps))
    table, not_logged = totals_table(totals)
    blocks += [("h2", "Result"), ("table", result_table(totals)),
               ("ul", summary_sentences(totals)),
               ("h2", "How to read this"), ("p", definitions()),
               ("h2", "Totals"),
               ("p", f"Computed from the per-step records ({METRICS_FILE}); each metric is "
                     "defined in docs/metrics.md."),
               ("table", table)]
    if not_logged:
        blocks.append(("p", "Left out, because this run did not log their metrics: "
                            + ", ".join(not_logged) + "."))
    blocks += [("h2", "Curves"),
               *[("figure", p, CAPTIONS.get(p.name, "")) for p in plots]]
    if left_out:
        blocks.append(("p", "Not drawn, because this run logged none of their metrics: "
                            + "; ".join(left_out) + "."))
    blocks += [("h2", "Settings"),
               ("p", f"The main ones; every setting is in {CONFIG_FILE} in the run folder."),
               ("table", settings_table(cfg, folder, totals.pairs is not None))]
    return write_report(blocks, target, plots, no_steps)
