"""The totals of one training run, from its per-step records (``metrics.jsonl``); pure functions.

A ``cooper train`` run logs one record per optimiser step (``docs/metrics.md``). Its report
(:mod:`cooper.report.run_report`) and the demo's summary (:mod:`cooper.experiment.demo_summary`)
both speak of the run as a whole, not of its last step: :func:`run_totals` sums and averages the
records into a :class:`RunTotals`, :func:`summary_sentences` says it in plain language (one
sentence per finding, the answer first), :func:`definitions` how to read it and :func:`headline`
all of it in one line. A metric a run never logged (a rule-mode run has no ``rm/*``) is ``None``
in the totals and a sentence in the summary, never an error or a zero.

Definitions (every one over the *training* records: ``step >= 1`` with ``reward/rule_mean``,
which every mode logs; step 0 holds only the validation before training):

- pairs and negatives by source: the sums of ``rm/pairs``, ``rm/pairs_rollout`` (negatives from
  the policy's own wrong rollouts), ``rm/valid_negatives`` (written by the assistant) and
  ``rm/fallback_negatives`` (the rule-based fallback);
- reward-model updates: the steps with ``rm/updated == 1``;
- first / last step: the first and the last record that logged the metric;
- first / last quarter: the mean over the first / last quarter of the records that logged the
  metric (:data:`QUARTER`, at least one record);
- second half: the mean over the second half of them (as in the experiment report,
  :func:`cooper.report.figures.second_half_mean`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cooper.errors import UserError
from cooper.infra.files import UnreadableJSON, parse_json
from cooper.report.figures import paid_key, second_half_mean

QUARTER = 0.25
"""'first / last quarter' = the first / last 25% of the records that logged a metric (>= 1)"""

PAYERS = {"rule": "the rule-based verifier", "rm": "a fixed reward model",
          "cooper": "Cooper's reward model, updated online"}


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl``; a last line cut short (a run killed mid-write) is
    left out, a bad line elsewhere is an error that names it and says what is wrong."""
    path = Path(path)
    # bytes, decoded line by line: a stray non-UTF-8 byte is then one bad line, named
    lines = path.read_bytes().split(b"\n")
    last = max((i for i, x in enumerate(lines, 1) if x.strip()), default=0)
    rows = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = parse_json(line)
        except UnreadableJSON as e:
            if i == last:
                break
            raise UserError(f"{path}, line {i} is {e}; was the file edited? metrics.jsonl holds "
                            "one JSON object per line") from e
        if not isinstance(row, dict):
            why = f"is {json.dumps(row)[:40]}, not a JSON object"
        elif "step" not in row:
            why = "has no step"
        elif not isinstance(step := row["step"], int) or isinstance(step, bool) or step < 0:
            why = f"has step {step!r}, not a whole number >= 0"
        else:
            rows.append(row)
            continue
        raise UserError(f"{path}, line {i} {why}; was the file edited? metrics.jsonl holds one "
                        "JSON object per line, each with its step")
    return rows


def read_record(path: str | Path) -> dict[str, Any] | None:
    """A JSON object a stage wrote (``final_eval.json``, ``setup.json``, ...), None when the
    file is absent (the stage has not run); a file cut short, edited into something else or
    holding no object is an error that names it."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        doc = parse_json(path.read_bytes())
    except UnreadableJSON as e:
        raise UserError(f"{path} cannot be read ({e}); was it cut short or edited? restore "
                        "it, or redo the step that wrote it into a new folder") from e
    if not isinstance(doc, dict):
        raise UserError(f"{path} holds {json.dumps(doc)[:40]}, not the JSON object its step "
                        "writes; restore it, or redo that step into a new folder")
    return doc


def training_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of training steps (step 0, the validation before training, left out)."""
    return [r for r in rows if r.get("step", 0) >= 1 and "reward/rule_mean" in r]


def series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one metric, in record order, over the records with a finite value."""
    pts = [(int(r.get("step", 0)), float(r[key])) for r in rows
           if isinstance(r.get(key), int | float) and math.isfinite(r[key])]
    return [s for s, _ in pts], [v for _, v in pts]


def values(rows: list[dict[str, Any]], key: str) -> list[float]:
    """The finite values of one metric, in record order (records without it skipped)."""
    return series(rows, key)[1]


def _sum(rows: list[dict[str, Any]], key: str) -> int | None:
    v = values(rows, key)
    return int(round(sum(v))) if v else None


def _mean(v: list[float]) -> float | None:
    return sum(v) / len(v) if v else None


def _quarters(v: list[float]) -> tuple[float | None, float | None]:
    if not v:
        return None, None
    k = max(1, math.ceil(len(v) * QUARTER))
    return _mean(v[:k]), _mean(v[-k:])


@dataclass(frozen=True)
class RunTotals:
    """One training run summed up (``None``: the run never logged that metric)."""

    steps: int
    """training steps logged"""
    mode: str | None
    """reward.mode of the run (from its config.yaml), None when unknown"""
    paid_key: str
    """the metric of the reward the policy was paid"""
    pairs: int | None
    """(positive, negative) pairs made, summed over the steps (rm/pairs)"""
    steps_with_pairs: int | None
    """steps that made at least one pair"""
    negatives_rollout: int | None
    """pairs whose negative is one of the policy's own wrong rollouts (rm/pairs_rollout)"""
    negatives_assistant: int | None
    """negatives written by the assistant and accepted (rm/valid_negatives)"""
    negatives_fallback: int | None
    """negatives written by the rule-based fallback (rm/fallback_negatives)"""
    positives: int | None
    """verified-correct rollouts picked as positives (rm/positives)"""
    dropped: int | None
    """positives that got no pair (rm/dropped_pairs)"""
    rm_updates: int | None
    """steps whose reward-model update was applied (rm/updated == 1)"""
    agreement_first: float | None
    """rm/agreement on the first step"""
    agreement_last: float | None
    """rm/agreement on the last step"""
    verified_first_quarter: float | None
    """reward/rule_mean, mean over the first quarter of the steps"""
    verified_last_quarter: float | None
    """reward/rule_mean, mean over the last quarter of the steps"""
    paid_first_quarter: float | None
    """the paid reward, mean over the first quarter of the steps"""
    paid_last_quarter: float | None
    """the paid reward, mean over the last quarter of the steps"""
    gap_second_half: float | None
    """hacking/gap, mean over the second half of the steps"""
    top_wrong_second_half: float | None
    """hacking/top_wrong, mean over the second half of the steps that logged it"""
    val_first: float | None
    """val/accuracy at the first validation (step 0: before training)"""
    val_last: float | None
    """val/accuracy at the last validation"""
    step_seconds: float | None
    """perf/step, mean seconds per step"""


def _count_positive(rows: list[dict[str, Any]], key: str) -> int | None:
    """Rows whose ``key`` is above 0; None when no row logged it."""
    logged = values(rows, key)
    return sum(v > 0 for v in logged) if logged else None


def run_totals(rows: list[dict[str, Any]], mode: str | None = None) -> RunTotals:
    """The totals of a run from its records (all of them: validations are read from every
    record, everything else from the training steps')."""
    train = training_rows(rows)
    agreement = values(train, "rm/agreement")
    updated = values(train, "rm/updated")
    gap, top_wrong = values(train, "hacking/gap"), values(train, "hacking/top_wrong")
    val = values(rows, "val/accuracy")
    key = paid_key(mode)
    return RunTotals(
        steps=len(train), mode=mode, paid_key=key,
        pairs=_sum(train, "rm/pairs"),
        steps_with_pairs=_count_positive(train, "rm/pairs"),
        negatives_rollout=_sum(train, "rm/pairs_rollout"),
        negatives_assistant=_sum(train, "rm/valid_negatives"),
        negatives_fallback=_sum(train, "rm/fallback_negatives"),
        positives=_sum(train, "rm/positives"), dropped=_sum(train, "rm/dropped_pairs"),
        rm_updates=sum(v == 1 for v in updated) if updated else None,
        agreement_first=agreement[0] if agreement else None,
        agreement_last=agreement[-1] if agreement else None,
        verified_first_quarter=_quarters(values(train, "reward/rule_mean"))[0],
        verified_last_quarter=_quarters(values(train, "reward/rule_mean"))[1],
        paid_first_quarter=_quarters(values(train, key))[0],
        paid_last_quarter=_quarters(values(train, key))[1],
        gap_second_half=second_half_mean(gap) if gap else None,
        top_wrong_second_half=second_half_mean(top_wrong) if top_wrong else None,
        val_first=val[0] if val else None, val_last=val[-1] if val else None,
        step_seconds=_mean(values(train, "perf/step")))


def _f(x: float | None, signed: bool = False) -> str:
    return "n/a" if x is None else (f"{x:+.3f}" if signed else f"{x:.3f}")


def _moved(first: float, last: float) -> str:
    """'rose', 'fell' or 'stayed', as the report prints them (3 decimals)."""
    a, b = _f(first), _f(last)
    return "stayed" if a == b else "rose" if float(b) > float(a) else "fell"


def _hacking_cue(t: RunTotals) -> list[str]:
    """The sign of hacking in the run's totals, when they show it: the reward paid by a model
    rose while verified accuracy fell (first to last quarter)."""
    if (t.paid_key == "reward/rule_mean" or t.paid_first_quarter is None
            or t.verified_first_quarter is None):
        return []
    paid = _moved(t.paid_first_quarter, t.paid_last_quarter)
    verified = _moved(t.verified_first_quarter, t.verified_last_quarter)
    if (paid, verified) != ("rose", "fell"):
        return []
    return ["The reward paid rose while verified accuracy fell: the policy was paid more for "
            "fewer right answers, the sign of reward hacking."]


def _trend_sentences(t: RunTotals) -> list[str]:
    """What the policy was paid against what the verifier found, the hacking signals and
    held-out accuracy."""
    text = (f"Verified accuracy of the rollouts (reward/rule_mean) went from "
            f"{_f(t.verified_first_quarter)} over the first quarter of the steps to "
            f"{_f(t.verified_last_quarter)} over the last quarter")
    if t.paid_key != "reward/rule_mean" and t.paid_first_quarter is not None:
        text += (f"; the paid reward ({t.paid_key}) from {_f(t.paid_first_quarter)} to "
                 f"{_f(t.paid_last_quarter)}")
    out = [text + ".", *_hacking_cue(t)]
    if t.gap_second_half is None:
        out.append("hacking/gap and hacking/top_wrong were not logged: no reward model scored "
                   "the rollouts.")
    else:
        text = (f"Over the second half of the steps, hacking/gap (reward model minus verifier) "
                f"averaged {_f(t.gap_second_half, signed=True)}")
        if t.top_wrong_second_half is None:
            text += ("; hacking/top_wrong was never logged (no group had a verified-correct "
                     "rollout)")
        else:
            text += (f" and hacking/top_wrong (groups whose top-scored rollout is wrong) "
                     f"{_f(t.top_wrong_second_half)}")
        out.append(text + ".")
    if t.val_first is not None:
        out.append(f"Held-out accuracy (val/accuracy) was {_f(t.val_first)} at the first "
                   f"validation and {_f(t.val_last)} at the last.")
    return out


def _reward_model_sentences(t: RunTotals) -> list[str]:
    """The pairs made, the reward model's updates and its agreement with the verifier."""
    out = []
    if t.pairs is None:
        out.append("No reward-model pairs were made (the records have no rm/pairs), so there "
                   "are no negatives, updates or pair accuracy to report.")
    else:
        text = (f"{t.pairs} (positive, negative) pairs made in total, on {t.steps_with_pairs} of "
                f"{t.steps} steps; negatives by source: "
                f"{t.negatives_rollout or 0} from the policy's own wrong rollouts, "
                f"{t.negatives_assistant or 0} written by the assistant, "
                f"{t.negatives_fallback or 0} by the rule-based fallback.")
        if t.dropped:
            text += f" {t.dropped} of {t.positives} positives got no pair."
        out.append(text)
        updates = t.rm_updates or 0
        text = f"The reward model was updated on {updates} of {t.steps} steps"
        if updates == 0 and t.mode in ("rule", "rm", "hybrid"):
            text += f" (frozen in {t.mode} mode: the pairs only measure it)"
        out.append(text + ".")
    if t.agreement_first is None:
        out.append("rm/agreement was not logged: no reward model scored the rollouts.")
    else:
        out.append(f"The reward model agreed with the verifier (rm/agreement) on "
                   f"{_f(t.agreement_first)} of the rollouts at the first step and "
                   f"{_f(t.agreement_last)} at the last.")
    return out


def summary_sentences(t: RunTotals) -> list[str]:
    """The run in plain language, one sentence per finding, the answer first: what paid the
    policy, what it was paid against what the verifier found (and the sign of hacking where
    the totals show it), the hacking signals, held-out accuracy, then the reward model's pairs,
    updates and agreement; a missing metric gets a sentence saying so (the definitions:
    :func:`definitions`)."""
    if not t.steps:
        return ["No training step logged yet (no record with reward/rule_mean in metrics.jsonl)."]
    payer = PAYERS.get(t.mode or "", f"the reward TRL logged as {t.paid_key}")
    return [f"{t.steps} training steps logged; the policy was paid by {payer} ({t.paid_key}).",
            *_trend_sentences(t), *_reward_model_sentences(t)]


def definitions() -> str:
    """How to read the totals, in words (the module's definitions, from :data:`QUARTER`)."""
    q = f"{QUARTER:.0%}"
    return ("Every total is over the training steps' records (step 0 holds only the validation "
            "before training). The reward paid is the metric of the run's reward mode: "
            "reward/rule_mean when the verifier pays (rule), reward/rm_mean when the reward "
            "model does (rm, cooper), reward/hybrid_mean in the hybrid modes (TRL's reward when the "
            "mode is unknown). First / last "
            f"quarter: the mean over the first / last {q} of the steps that logged the metric "
            "(at least one); second half: the mean over the second half of them; first / last "
            "step or validation: the first and the last record that logged it. hacking/gap is "
            "the reward model's mean probability minus the verified accuracy of the same "
            "rollouts (rising while verified accuracy falls: the policy is paid for wrong "
            "answers); hacking/top_wrong is the share of the groups with a verified-correct "
            "rollout whose top-scored rollout is wrong. Pairs exist only where the run's Stage "
            "2 ran (not in rule mode without a reward model, nor in rm mode without "
            "rm_update.pair_metrics); a step without pairs, or whose update had a non-finite "
            "loss, has no reward-model update. docs/metrics.md defines every metric.")


def headline(t: RunTotals) -> str:
    """The run in one line (the demo's summary table)."""
    parts = [f"{t.steps} steps"]
    if t.pairs is not None:
        parts.append(f"{t.pairs} pairs on {t.steps_with_pairs} steps (negatives: "
                     f"{t.negatives_rollout or 0} rollout, {t.negatives_assistant or 0} "
                     f"assistant, {t.negatives_fallback or 0} fallback)")
        parts.append(f"RM updated on {t.rm_updates or 0} of {t.steps} steps")
    if t.agreement_first is not None:
        parts.append(f"agreement {t.agreement_first:.2f} -> {t.agreement_last:.2f} "
                     f"(first -> last step)")
    if t.verified_first_quarter is not None:
        parts.append(f"verified {t.verified_first_quarter:.2f} -> {t.verified_last_quarter:.2f} "
                     f"(first -> last quarter)")
    return "; ".join(parts)
