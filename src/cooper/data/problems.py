"""Math problems as typed records, from the bundled datasets or any local file; prompt building.

Every loader yields :class:`Problem` records whose ``reference`` is the *final answer* only:
GSM8K's text after ``####`` (commas dropped), SVAMP's float written without a trailing ``.0``,
MATH500's ``answer``. Where the dataset has a worked solution it is kept in ``solution``.

Local files (``.jsonl``, ``.json``, ``.parquet``) are read with a :class:`Fields` mapping. Bad
rows (unreadable JSON, invalid UTF-8, an oversized row, a missing or empty question or
reference, a duplicate id) stop the load with the file and line and a way to fix it; with
``skip_bad=True`` they are skipped, counted in :attr:`ProblemSet.skipped` and logged instead.
Nothing is skipped silently.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cooper.data.synthetic import arithmetic_problems
from cooper.errors import UserError
from cooper.types import Problem
from cooper.verify.extraction import number_to_str

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

# The Qwen2.5-Math instruction: the boxed answer is what the verifier extracts first.
DEFAULT_MAX_ROW_BYTES = 1 << 20




@dataclass(frozen=True)
class Fields:
    """Which columns of a local file hold what (``id`` None: ids are ``<file stem>-<row>``)."""

    question: str = "question"
    reference: str = "answer"
    id: str | None = None
    solution: str | None = None


@dataclass(frozen=True)
class Skip:
    """A row left out with ``skip_bad``: where it was and why."""

    where: str
    reason: str


@dataclass
class ProblemSet:
    """The problems of one dataset split plus the rows that were skipped."""

    name: str
    problems: list[Problem]
    skipped: list[Skip] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.problems)

    def __iter__(self) -> Iterator[Problem]:
        return iter(self.problems)

    def __getitem__(self, i: int) -> Problem:
        return self.problems[i]


class DataError(UserError, ValueError):
    """A bad input row; the message names the file, the row and the fix."""

    def __init__(self, where: str, reason: str, fix: str = ""):
        self.where, self.reason = where, reason
        hint = fix or "fix or remove the row, or pass --skip-bad to skip bad rows and count them"
        super().__init__(f"{where}: {reason} ({hint})")


# ------------------------------------------------------------------ answer normalisation



def gsm8k_final_answer(solution: str) -> str:
    """The text after the last ``####`` of a GSM8K worked solution, without commas."""
    if "####" not in solution:
        raise ValueError("no '####' final-answer marker")
    answer = solution.rsplit("####", 1)[1].strip().replace(",", "")
    if not answer:
        raise ValueError("empty answer after '####'")
    return answer


def _reference_from_value(value: Any) -> tuple[str, str | None]:
    """(final answer, worked solution or None) from a reference cell of a local file."""
    if isinstance(value, bool):
        raise ValueError("reference is a boolean")
    if isinstance(value, int | float):
        return number_to_str(value), None
    if not isinstance(value, str):
        raise ValueError(f"reference is a {type(value).__name__}, expected text or a number")
    text = value.strip()
    if not text:
        raise ValueError("reference is empty")
    if "\n####" in text or text.startswith("####"):  # a GSM8K-style worked solution
        return gsm8k_final_answer(text), text
    return text, None


# ------------------------------------------------------------------ raw row readers

def require_file(path: Path, what: str) -> None:
    """A clear error unless ``path`` is an existing file (a folder named ``x.jsonl`` is said to
    be a folder, not reported missing). ``what`` names the role: "dataset file", ..."""
    if path.is_dir():
        raise UserError(f"{what} {path} is a directory, not a file; pass the .jsonl, .json or "
                        ".parquet file itself")
    if not path.is_file():
        raise UserError(f"{what} not found: {path}")


def read_parquet_rows(path: Path) -> list[dict]:
    """The rows of a parquet file; a file pyarrow cannot read (corrupt, truncated, another
    format under a .parquet name) is a :class:`UserError` naming it, not an Arrow traceback."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path).to_pylist()
    except (pa.ArrowException, OSError) as e:
        # Arrow repeats the path and explains at length: its first sentence is the reason
        detail = re.sub(r"^Could not open Parquet input source '.*?': ", "",
                        " ".join(str(e).split())).split(". ")[0].rstrip(".")[:200]
        raise UserError(f"{path} is not a readable parquet file ({detail}); write it again with "
                        "pyarrow or pandas, or pass a .jsonl file") from None


def _size(n: int) -> str:
    """Bytes as a reader wants them: 312 bytes, 4.0 KiB, 64.0 MiB."""
    return f"{n} bytes" if n < 1024 else f"{n / 1024:.1f} KiB" if n < 2**20 else \
        f"{n / 2**20:.1f} MiB"


def _iter_rows(path: Path, max_row_bytes: int) -> Iterator[tuple[str, dict | DataError]]:
    """Yield (where, row) pairs; a row that cannot be read is yielded as its DataError."""
    if max_row_bytes < 1:  # every reader comes here: one check for every command's option
        raise UserError(f"--max-row-bytes must be >= 1, got {max_row_bytes}")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        with path.open("rb") as f:
            for lineno, raw in enumerate(f, 1):
                where = f"{path}:{lineno}"
                if len(raw) > max_row_bytes:
                    yield where, DataError(where, f"row is {_size(len(raw))}, over the "
                                           f"{_size(max_row_bytes)} limit",
                                           "raise --max-row-bytes, or pass --skip-bad")
                    continue
                if not raw.strip():
                    continue
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    yield where, DataError(where, f"invalid UTF-8 at byte {e.start}")
                    continue
                try:
                    row = json.loads(text)
                except json.JSONDecodeError as e:
                    yield where, DataError(where, f"not valid JSON ({e.msg}, column {e.colno})")
                    continue
                yield where, row if isinstance(row, dict) else DataError(
                    where, f"a JSON {type(row).__name__}, expected an object")
    elif suffix == ".json":
        try:
            data = json.loads(path.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as e:
            raise DataError(str(path), f"invalid UTF-8 at byte {e.start}",
                            "re-encode the file as UTF-8") from e
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{e.lineno}", f"not valid JSON ({e.msg})",
                            "fix the JSON, or convert to .jsonl to skip bad lines") from e
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            data = data["data"]
        if not isinstance(data, list):
            raise DataError(str(path), "expected a JSON list of objects (or {\"data\": [...]})",
                            "write one object per problem in a list")
        for i, row in enumerate(data):
            where = f"{path}: item {i}"
            if not isinstance(row, dict):
                yield where, DataError(where, f"a JSON {type(row).__name__}, expected an object")
            elif len(json.dumps(row)) > max_row_bytes:
                yield where, DataError(where, "row over the size limit", "raise --max-row-bytes")
            else:
                yield where, row
    elif suffix == ".parquet":
        for i, row in enumerate(read_parquet_rows(path)):
            yield f"{path}: row {i}", row
    else:
        raise DataError(str(path), f"unsupported file type '{suffix}'",
                        "use .jsonl, .json or .parquet")


# ------------------------------------------------------------------ loaders

BUILTIN_SPLITS: dict[str, tuple[str, ...]] = {
    "gsm8k": ("train", "test"),
    "svamp": ("test",),
    "math500": ("test",),
    "arith": ("train", "test"),  # synthetic, generated (cooper.data.synthetic)
    "arith_small": ("train", "test"),
    "arith_2x1": ("train", "validation", "test"),
    "arith_2x1_words": ("train", "validation", "test"),  # the rule is blind to some answers
    "arith_2x1_compare": ("train", "validation", "test"),  # and to a family of yes/no ones
}
DATASET_HELP = f"{', '.join(BUILTIN_SPLITS)}, or a .jsonl/.json/.parquet file"
DEFAULT_SPLIT = "test"
"""the split of a bundled dataset when none is named: every bundled dataset has one"""


def _bundled(*parts: str) -> Path:
    return Path(str(resources.files("cooper.data") / "bundled" / Path(*parts)))


def _svamp_question(body: str, question: str) -> str:
    body, question = body.strip(), question.strip()
    # 36% of SVAMP bodies end mid-sentence ("If there is a discount on each pack"): join with
    # a comma so the problem reads as one sentence instead of a fragment.
    if body and body[-1] not in ".?!":
        return f"{body}, {question[:1].lower()}{question[1:]}"
    return f"{body} {question}"


def _builtin_rows(name: str, split: str) -> Iterator[tuple[str, Problem]]:
    if name == "gsm8k":
        path = _bundled("gsm8k", f"{split}.jsonl")
        for i, (where, row) in enumerate(_iter_rows(path, DEFAULT_MAX_ROW_BYTES)):
            assert isinstance(row, dict), row  # bundled data is known to be clean
            yield where, Problem(f"gsm8k-{split}-{i}", row["question"],
                                 gsm8k_final_answer(row["answer"]), "gsm8k", row["answer"])
    elif name == "svamp":
        for row in json.loads(_bundled("svamp", "SVAMP.json").read_text()):
            yield row["ID"], Problem(f"svamp-{row['ID']}", _svamp_question(row["Body"], row["Question"]),
                                     number_to_str(row["Answer"]), "svamp", row["Equation"])
    elif name in ("arith", "arith_small", "arith_2x1", "arith_2x1_words", "arith_2x1_compare"):
        for problem in arithmetic_problems(split, name):
            yield problem.id, problem
    elif name == "math500":
        for where, row in _iter_rows(_bundled("math500", "test.jsonl"), DEFAULT_MAX_ROW_BYTES):
            assert isinstance(row, dict), row
            yield where, Problem(f"math500-{row['unique_id']}", row["problem"], row["answer"],
                                 "math500", row["solution"])


def is_local_file(name: str | os.PathLike) -> bool:
    """Whether a dataset name denotes a local file rather than a bundled dataset."""
    return Path(name).suffix.lower() in (".jsonl", ".json", ".parquet")


def parse_benchmark(item: str) -> tuple[str, str | None]:
    """``NAME[:SPLIT]`` (how ``cooper eval --benchmarks`` and the experiment's
    ``final_eval.benchmarks`` name a benchmark) as ``(NAME, SPLIT)``; SPLIT is None when not
    given (``load_problems`` then takes :data:`DEFAULT_SPLIT`). A local file is taken whole, with no split,
    so a path holding a colon stays a path; whether NAME has SPLIT is checked where it loads."""
    item = item.strip()
    if is_local_file(item):
        return item, None
    name, _, split = item.partition(":")
    return name.strip(), split.strip() or None


def benchmark_label(name: str, split: str | None) -> str:
    """A benchmark's name in files and tables: ``NAME:SPLIT`` where a split was given, so two
    splits of one dataset never share a file or a column; ``NAME`` alone otherwise."""
    return f"{name}:{split}" if split else name


def load_problems(name: str | os.PathLike, split: str | None = None, *,
                  fields: Fields | None = None, limit: int | None = None,
                  skip_bad: bool = False,
                  max_row_bytes: int = DEFAULT_MAX_ROW_BYTES) -> ProblemSet:
    """Load a bundled dataset (``gsm8k``, ``svamp``, ``math500``) or a local file.

    ``split`` defaults to ``test`` for bundled data and is ignored for files. ``limit`` keeps
    the first N problems, in file order.
    """
    text = str(name)
    if limit is not None and limit < 1:
        raise UserError(f"limit must be at least 1, got {limit}")
    if text in BUILTIN_SPLITS:
        split = split or DEFAULT_SPLIT
        if split not in BUILTIN_SPLITS[text]:
            raise UserError(f"{text} has no split '{split}'; splits: "
                             f"{', '.join(BUILTIN_SPLITS[text])}")
        problems = []
        for _, problem in _builtin_rows(text, split):
            problems.append(problem)
            if limit and len(problems) >= limit:
                break
        return ProblemSet(f"{text}/{split}", problems)
    if not is_local_file(text):
        raise UserError(f"unknown dataset '{text}'. Bundled: {', '.join(BUILTIN_SPLITS)}; "
                         "or pass a .jsonl, .json or .parquet file")
    path = Path(text).expanduser()
    require_file(path, "dataset file")
    return _load_file(path, fields or Fields(), limit, skip_bad, max_row_bytes)


def _problem_from_row(row: dict, where: str, index: int, path: Path, fields: Fields) -> Problem:
    def need(col: str) -> Any:
        if col not in row:
            raise DataError(where, f"missing field '{col}' (row has: {', '.join(map(str, row))})",
                            "map your columns with --question-field/--answer-field/--id-field, "
                            "or pass --skip-bad")
        return row[col]

    question = need(fields.question)
    if not isinstance(question, str) or not question.strip():
        raise DataError(where, f"empty or non-text question in '{fields.question}'")
    try:
        reference, solution = _reference_from_value(need(fields.reference))
    except ValueError as e:
        raise DataError(where, f"bad reference in '{fields.reference}': {e}") from None
    if fields.solution:
        solution = need(fields.solution)
    pid = str(need(fields.id)) if fields.id else f"{path.stem}-{index}"
    return Problem(pid, question.strip(), reference, path.stem, solution)


def _load_file(path: Path, fields: Fields, limit: int | None, skip_bad: bool,
               max_row_bytes: int) -> ProblemSet:
    problems: list[Problem] = []
    skipped: list[Skip] = []
    seen: dict[str, str] = {}
    for index, (where, row) in enumerate(_iter_rows(path, max_row_bytes)):
        try:
            if isinstance(row, DataError):
                raise row
            problem = _problem_from_row(row, where, index, path, fields)
            if problem.id in seen:
                raise DataError(where, f"duplicate id '{problem.id}' (first at {seen[problem.id]})",
                                "make ids unique, or pass --skip-bad to keep the first")
        except DataError as e:
            if not skip_bad:
                raise
            skipped.append(Skip(e.where, e.reason))
            continue
        seen[problem.id] = where
        problems.append(problem)
        if limit and len(problems) >= limit:
            break
    if skipped:
        log.warning("%s: skipped %d bad row(s), first: %s: %s", path, len(skipped),
                    skipped[0].where, skipped[0].reason)
    if not problems:
        raise DataError(str(path), "no usable problems", "check the file and the field mapping")
    return ProblemSet(str(path), problems, skipped)
