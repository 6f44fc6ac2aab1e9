"""``cooper data label``: hybrid labels from the rule-based verifier and an LLM judge.

Each row gets two votes: the verifier's (``yes`` correct, ``no`` wrong or no final answer,
``undecided`` on a verifier timeout or error) and the judge's (``yes``, ``no``, ``unparsed``,
``failed``; see :mod:`cooper.labelling.judge`). A row whose completion was never produced (a failed
request in ``cooper data collect``) is voted on by neither and dropped as
``collect_failed:KIND``. The kept label follows a policy (:func:`decide`):

- ``agree`` (default, ours: the paper does not publish its rule): keep a row only when both
  votes are yes/no and equal. A judge fooled by a solution that writes "VERDICT: YES" cannot
  make a positive on its own: the verifier must also say yes.
- ``verifier``: the verifier's vote (the judge, if any, is recorded for the statistics).
- ``judge``: the judge's vote.

Outputs: ``OUT`` holds the kept rows, trainable by ``cooper rm train`` as is (``question``,
``reference``, ``completion``, ``label``, ``id``, ``source``); ``OUT.dropped.parquet`` holds
every other row with its ``drop_reason``; ``OUT.stats.json`` the statistics
(:class:`LabelStats`). Both votes and the judge's reply stay on every row. The votes are
committed in chunks (:mod:`cooper.infra.chunks`), so a rerun skips rows already voted on (rows whose
judge request failed or whose verification timed out are asked again); the policy is applied
when the files are assembled, so rerunning with another ``--policy`` costs nothing.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cooper.data.problems import DataError, Skip, _iter_rows, is_local_file, require_file
from cooper.errors import UserError
from cooper.infra.chunks import ChunkStore, Row
from cooper.infra.files import write_atomic
from cooper.labelling import collect
from cooper.labelling.judge import JudgeItem
from cooper.verify.verifier import verify_batch

if TYPE_CHECKING:
    from cooper.labelling.judge import Judge

log = logging.getLogger(__name__)

POLICIES = ("agree", "verifier", "judge")
NO_JUDGE = "none"

SCHEMA = pa.schema([
    ("row", pa.int64()),  # position in the input file: the resume key
    *collect.SCHEMA,
    ("verifier_vote", pa.string()),  # yes, no, undecided, skipped
    ("verifier_reason", pa.string()),  # the verifier's reason (correct, wrong, no_answer, ...)
    ("verifier_extracted", pa.string()),
    ("judge", pa.string()),  # which judge voted (label and mode)
    ("judge_vote", pa.string()),  # yes, no, unparsed, failed, skipped
    ("judge_output", pa.string()),
    ("judge_error", pa.string()),
    ("judge_p_yes", pa.float64()),
    ("label", pa.bool_()),  # null on dropped rows
    ("drop_reason", pa.string()),  # null on kept rows
])


def decide(policy: str, row: Row) -> tuple[bool | None, str | None]:
    """(label, None) to keep a row, or (None, reason) to drop it. Pure; see the module."""
    if row["status"] != "ok":
        return None, f"collect_failed:{row['error']}"
    verifier, judge = row["verifier_vote"], row["judge_vote"]
    if policy in ("agree", "verifier") and verifier not in ("yes", "no"):
        return None, f"verifier_{verifier}"
    if policy in ("agree", "judge") and judge not in ("yes", "no"):
        return None, f"judge_{judge}"
    if policy == "verifier":
        return verifier == "yes", None
    if policy == "judge":
        return judge == "yes", None
    if verifier != judge:
        return None, "disagree"
    return verifier == "yes", None


def verifier_vote(correct: bool, reason: str) -> str:
    if correct:
        return "yes"
    return "no" if reason in ("wrong", "no_answer") else "undecided"


@dataclass
class LabelStats:
    """What labelling did, as printed and saved next to the output."""

    policy: str
    judge: str
    rows: int
    kept: int
    kept_fraction: float
    dropped: dict[str, int]
    """dropped rows by drop reason"""
    agreement_rate: float | None
    """how often the votes agree, among rows where both are yes/no (None: no such row)"""
    both_voted: int
    unparsed: int
    """judge replies without a verdict marker"""
    label_balance: dict[str, float]
    """positive, negative and positive_fraction of the kept rows"""
    verifier_votes: dict[str, int]
    judge_votes: dict[str, int]
    confusion: dict[str, int]
    """rows per vote pair ('verifier_yes/judge_no', ...), among rows both voted on"""
    failures: dict[str, int]
    """failed requests by 'collect:KIND' and 'judge:KIND'"""
    judge_endpoint: dict[str, int] = field(default_factory=dict)
    """the judge endpoint's counters of this run"""
    skipped: int = 0
    """malformed input rows left out with --skip-bad (logged, first one named)"""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)


def compute_stats(rows: list[Row], policy: str, judge: str) -> LabelStats:
    kept = [r for r in rows if r["label"] is not None]
    both = [r for r in rows if r["verifier_vote"] in ("yes", "no")
            and r["judge_vote"] in ("yes", "no")]
    agree = sum(r["verifier_vote"] == r["judge_vote"] for r in both)
    pos = sum(bool(r["label"]) for r in kept)
    failures = Counter(f"collect:{r['error']}" for r in rows if r["status"] != "ok")
    failures.update(f"judge:{(r['judge_error'] or '').partition(':')[0]}"
                    for r in rows if r["judge_vote"] == "failed")
    return LabelStats(
        policy=policy, judge=judge, rows=len(rows), kept=len(kept),
        kept_fraction=len(kept) / len(rows) if rows else 0.0,
        dropped=dict(Counter(r["drop_reason"] for r in rows if r["label"] is None)),
        agreement_rate=agree / len(both) if both else None, both_voted=len(both),
        unparsed=sum(r["judge_vote"] == "unparsed" for r in rows),
        label_balance={"positive": pos, "negative": len(kept) - pos,
                       "positive_fraction": pos / len(kept) if kept else 0.0},
        verifier_votes=dict(Counter(r["verifier_vote"] for r in rows)),
        judge_votes=dict(Counter(r["judge_vote"] for r in rows)),
        confusion=dict(Counter(f"verifier_{r['verifier_vote']}/judge_{r['judge_vote']}"
                               for r in both)),
        failures=dict(failures))


def side_paths(out: str | os.PathLike) -> tuple[Path, Path]:
    """(dropped rows, statistics) next to ``out``."""
    out = Path(out)
    return out.with_suffix(".dropped.parquet"), out.with_suffix(".stats.json")


def _typed(raw: dict, name: str, kind: pa.DataType, where: str) -> Any:
    """``raw[name]`` if it fits its column of :data:`collect.SCHEMA` (or is missing/null), else a
    DataError naming the row: a number where text belongs would otherwise stop the run when the
    chunk is written, as an Arrow traceback."""
    value = raw.get(name)
    if value is None:
        return None
    if pa.types.is_string(kind):
        ok, want = isinstance(value, str), "text"
    elif pa.types.is_integer(kind):
        ok, want = isinstance(value, int) and not isinstance(value, bool), "an integer"
    else:
        ok, want = isinstance(value, int | float) and not isinstance(value, bool), "a number"
    if not ok:
        raise DataError(where, f"'{name}' must be {want}, got {type(value).__name__}")
    return value


def _input_row(raw: dict, where: str, i: int, path: Path) -> Row:
    missing = [c for c in ("question", "reference", "completion") if c not in raw]
    if missing:
        raise DataError(where, f"missing field(s) {', '.join(missing)}",
                        "label rows written by 'cooper data collect', or rows with "
                        "question, reference and completion; or pass --skip-bad")
    reference = raw["reference"]
    if isinstance(reference, int | float) and not isinstance(reference, bool):
        reference = str(reference)  # a numeric reference is an answer too
    untyped = ("id", "reference")  # any id is made text; the reference is checked above
    row: dict[str, Any] = {name: raw.get(name) if name in untyped else _typed(raw, name, t, where)
                           for name, t in zip(collect.SCHEMA.names, collect.SCHEMA.types,
                                              strict=True)}
    if not isinstance(reference, str) or not reference.strip():
        raise DataError(where, "'reference' must be non-empty text or a number")
    if not isinstance(row["question"], str) or not row["question"].strip():
        raise DataError(where, "'question' must be non-empty text")
    row["id"] = str(raw["id"]) if raw.get("id") is not None else f"{path.stem}-{i}"
    row["problem_id"] = row["problem_id"] or row["id"]
    row["source"] = row["source"] or path.stem
    row["status"] = row["status"] or "ok"
    row["completion"] = row["completion"] or ""
    row["reference"] = reference
    row["row"] = i
    return row


def read_input(path: str | os.PathLike, *, skip_bad: bool = False) -> tuple[list[Row], list[Skip]]:
    """Rows to label: ``cooper data collect`` output, or any file with question, reference
    and completion (other collect columns get defaults: status ok, id from the row number);
    with the rows skipped as malformed (``skip_bad``; without it a bad row stops the read with
    its file and line). A row's ``row`` is its position in the file, skipped rows counted."""
    path = Path(path)
    if path.is_dir():
        require_file(path, "input file")  # says it is a directory
    if not is_local_file(path) or not path.is_file():
        raise UserError(f"input {path} must be an existing .parquet, .jsonl or .json file")
    rows: list[Row] = []
    skipped: list[Skip] = []
    for i, (where, raw) in enumerate(_iter_rows(path, 64 << 20)):
        try:
            if isinstance(raw, DataError):
                raise raw
            rows.append(_input_row(raw, where, i, path))
        except DataError as e:
            if not skip_bad:
                raise
            skipped.append(Skip(e.where, e.reason))
    if skipped:
        log.warning("%s: skipped %d bad row(s), first: %s: %s", path, len(skipped),
                    skipped[0].where, skipped[0].reason)
    if not rows:
        raise UserError(f"{path} has no {'usable ' if skipped else ''}rows")
    return rows, skipped


def read_rows(path: str | os.PathLike, *, skip_bad: bool = False) -> list[Row]:
    """The rows of :func:`read_input` (skipped rows are logged there)."""
    return read_input(path, skip_bad=skip_bad)[0]


def sampled_completions(path: str | os.PathLike, generator: str | None = None, *,
                        skip_bad: bool = False) -> dict[str, list[str]]:
    """Problem id -> the completions of one generator in a ``cooper data collect`` file, in
    file order; failed requests are left out (they wrote nothing). ``cooper data build`` reads
    sampled completions through this, whether it has just sampled them or was given a file, so
    both give the same rows."""
    every = read_rows(path, skip_bad=skip_bad)
    rows = [r for r in every if r["status"] == "ok"]
    if len(rows) < len(every):  # said, never silently lost
        log.warning("%s: %d of %d row(s) are failed requests with no completion; left out",
                    path, len(every) - len(rows), len(every))
    generators = sorted({r["generator"] or "" for r in rows})
    if generator is None and len(generators) > 1:
        raise UserError(f"{path} holds completions of {len(generators)} generators "
                        f"({', '.join(generators)}); a reward-model mix takes one model's: "
                        "collect one into its own file")
    sampled: dict[str, list[str]] = {}
    for row in rows:
        if generator is None or row["generator"] == generator:
            sampled.setdefault(row["problem_id"], []).append(row["completion"])
    return sampled


def label(in_path: str | os.PathLike, out: str | os.PathLike, judge: Judge | None, *,
          policy: str = "agree", chunk_rows: int = 64, verifier_mode: str = "strict",
          verifier_timeout_s: float = 5.0, progress: bool = False, skip_bad: bool = False,
          read: tuple[list[Row], list[Skip]] | None = None) -> LabelStats:
    """Vote on every row of ``in_path`` and write kept / dropped rows and statistics.
    ``read``: what :func:`read_input` returned for ``in_path`` when the caller has read it
    already (the CLI does, so a bad row stops it before a judge model loads)."""
    if policy not in POLICIES:
        raise UserError(f"--policy must be one of {', '.join(POLICIES)}, got '{policy}'")
    if judge is None and policy != "verifier":
        raise UserError(f"policy '{policy}' needs a judge: pass --judge SPEC (or use "
                        "--policy verifier with --judge none)")
    if chunk_rows < 1:
        raise UserError(f"chunk size must be >= 1 row, got {chunk_rows}")
    if not (math.isfinite(verifier_timeout_s) and verifier_timeout_s > 0):
        raise UserError(f"the verifier timeout must be a finite number of seconds > 0, got "
                        f"{verifier_timeout_s}")
    out = Path(out)
    if out.resolve() == Path(in_path).resolve():
        raise UserError("--out must differ from --in")
    dropped_path, stats_path = side_paths(out)
    judge_name = f"{judge.name} ({judge.mode})" if judge else NO_JUDGE
    rows, skipped = read or read_input(in_path, skip_bad=skip_bad)
    by_position = {r["row"]: r for r in rows}  # skipped rows leave gaps in the positions
    store = ChunkStore(out, SCHEMA, ("row",), extra_outputs=[dropped_path])
    existing = store.existing()
    for r in existing.values():
        if r["judge"] != judge_name:
            raise UserError(f"{out} holds votes of judge '{r['judge']}', not '{judge_name}'. "
                            "Use the same judge to resume, or another --out")
        if r["row"] not in by_position or by_position[r["row"]]["id"] != r["id"]:
            raise UserError(f"{out} was labelled from a different input (row {r['row']} does "
                            f"not match {in_path}); use another --out")
    # a failed judge request or a verifier timeout is not a vote: ask again on a rerun
    todo = [r for r in rows if (r["row"],) not in existing
            or existing[(r["row"],)]["judge_vote"] == "failed"
            or existing[(r["row"],)]["verifier_reason"] == "timeout"]
    if existing:
        log.info("resuming %s: %d of %d row(s) already voted on", out, len(existing), len(rows))
    for start in range(0, len(todo), chunk_rows):
        chunk = todo[start:start + chunk_rows]
        live = [r for r in chunk if r["status"] == "ok"]
        verdicts = verify_batch([r["completion"] for r in live], [r["reference"] for r in live],
                                mode=verifier_mode, timeout_s=verifier_timeout_s)
        votes = (judge.judge([JudgeItem(r["question"], r["reference"], r["completion"])
                              for r in live], progress=progress) if judge else None)
        done: list[Row] = []
        for r in chunk:
            done.append({**r, "verifier_vote": "skipped", "verifier_reason": None,
                         "verifier_extracted": None, "judge": judge_name, "judge_vote": "skipped",
                         "judge_output": None, "judge_error": None, "judge_p_yes": None,
                         "label": None, "drop_reason": None})
        by_row = {d["row"]: d for d in done}
        for i, r in enumerate(live):
            d = by_row[r["row"]]
            v = verdicts[i]
            d.update(verifier_vote=verifier_vote(v.correct, v.reason), verifier_reason=v.reason,
                     verifier_extracted=v.extracted)
            if votes is not None:
                j = votes[i]
                d.update(judge_vote=j.verdict, judge_output=j.output, judge_error=j.error,
                         judge_p_yes=j.p_yes)
        for d in done:
            d["label"], d["drop_reason"] = decide(policy, d)
        store.commit(done)
        log.info("labelled %d/%d row(s)", start + len(chunk), len(todo))

    def apply_policy(r: Row) -> Row:  # the policy of *this* run, also for resumed rows
        r = dict(r)
        r["label"], r["drop_reason"] = decide(policy, r)
        return r

    final = store.finalize(order=lambda r: r["row"], update=apply_policy,
                           route=lambda r: 0 if r["label"] is not None else 1)
    stats = compute_stats(final, policy, judge_name)
    stats.skipped = len(skipped)
    if judge is not None:
        stats.judge_endpoint = judge.metrics()
    write_atomic(stats_path, stats.to_json() + "\n")
    return stats
