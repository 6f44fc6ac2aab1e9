"""Labelled triples for the reward model, read from ``.jsonl``, ``.json`` or ``.parquet`` files.

Two row layouts are accepted, told apart row by row:

* ours (what ``cooper data perturbed`` and ``cooper data build`` write): ``question``,
  ``reference``, ``completion``, ``label``, optional ``id``, ``source`` and ``kind`` (how the
  completion was made, for per-kind figures);
* VerifyBench's: ``question``, ``answer`` (the reference), ``completion``, ``gold_correct``.

A label is a boolean or 0/1. A reference may be text or a number (``145.0`` is read as
``145``); a GSM8K worked solution is cut to its final answer, as :mod:`cooper.data` does. Bad
rows stop the load with the file and line, or are skipped and counted with ``skip_bad``,
following :mod:`cooper.data`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cooper.data.problems import (
    DEFAULT_MAX_ROW_BYTES,
    DataError,
    Skip,
    _iter_rows,
    _reference_from_value,
    is_local_file,
    require_file,
)
from cooper.errors import UserError
from cooper.types import LabelledTriple, Triple

log = logging.getLogger(__name__)




@dataclass
class TripleSet:
    """The triples of one file plus the rows that were skipped."""

    name: str
    rows: list[LabelledTriple]
    skipped: list[Skip] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[LabelledTriple]:
        return iter(self.rows)

    @property
    def triples(self) -> list[Triple]:
        return [r.triple for r in self.rows]

    @property
    def labels(self) -> list[bool]:
        if any(r.label is None for r in self.rows):
            raise UserError(f"{self.name} has rows without a label")
        return [bool(r.label) for r in self.rows]


def _label(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    raise ValueError(f"label {value!r} is not a boolean or 0/1")


def _row_to_triple(row: dict, where: str, index: int, path: Path, require_label: bool,
                   source_field: str) -> LabelledTriple:
    verifybench = "reference" not in row and "answer" in row
    ref_col, label_col = ("answer", "gold_correct") if verifybench else ("reference", "label")
    needed = ["question", ref_col, "completion"] + ([label_col] if require_label else [])
    missing = [c for c in needed if c not in row]
    if missing:
        raise DataError(where, f"missing field(s) {', '.join(map(repr, missing))} (row has: "
                        f"{', '.join(map(str, row))})",
                        "rows need question, reference, completion, label (or VerifyBench's "
                        "question, answer, completion, gold_correct); or pass --skip-bad")
    question, completion = row["question"], row["completion"]
    if not isinstance(question, str) or not question.strip():
        raise DataError(where, "empty or non-text 'question'")
    if not isinstance(completion, str):
        raise DataError(where, f"'completion' is a {type(completion).__name__}, expected text")
    try:
        reference, _ = _reference_from_value(row[ref_col])
    except ValueError as e:
        raise DataError(where, f"bad reference in '{ref_col}': {e}") from None
    label = None
    if label_col in row and row[label_col] is not None:
        try:
            label = _label(row[label_col])
        except ValueError as e:
            raise DataError(where, f"bad '{label_col}': {e}") from None
    elif require_label:
        raise DataError(where, f"'{label_col}' is null")
    source = row.get(source_field)
    kind = row.get("kind")
    return LabelledTriple(
        Triple(question.strip(), reference, completion), label,
        str(row["id"]) if row.get("id") is not None else f"{path.stem}-{index}",
        str(source) if source not in (None, "") else path.stem,
        str(kind) if kind not in (None, "") else None)


def load_triples(file: str | os.PathLike, *, require_label: bool = True, skip_bad: bool = False,
                 max_row_bytes: int = DEFAULT_MAX_ROW_BYTES, limit: int | None = None,
                 source_field: str = "source") -> TripleSet:
    """Read labelled triples (our layout or VerifyBench's) from a local file."""
    path = Path(file).expanduser()
    if not is_local_file(path):
        raise UserError(f"{path}: expected a .jsonl, .json or .parquet file of triples")
    require_file(path, "triples file")
    if limit is not None and limit < 1:
        raise UserError(f"limit must be at least 1, got {limit}")
    rows: list[LabelledTriple] = []
    skipped: list[Skip] = []
    for index, (where, row) in enumerate(_iter_rows(path, max_row_bytes)):
        try:
            if isinstance(row, DataError):
                raise row
            rows.append(_row_to_triple(row, where, index, path, require_label, source_field))
        except DataError as e:
            if not skip_bad:
                raise
            skipped.append(Skip(e.where, e.reason))
            continue
        if limit and len(rows) >= limit:
            break
    if skipped:
        log.warning("%s: skipped %d bad row(s), first: %s: %s", path, len(skipped),
                    skipped[0].where, skipped[0].reason)
    if not rows:
        raise DataError(str(path), "no usable triples", "check the file's fields")
    return TripleSet(str(path), rows, skipped)
