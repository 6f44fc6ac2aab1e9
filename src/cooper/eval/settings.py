"""What ``cooper eval`` evaluates: its settings, the benchmarks they name, and the protocol.

:class:`EvalSettings` is checked when built, so a bad value stops before anything loads;
:func:`load_benchmarks` resolves every benchmark (unknown names and bad files fail before a
model loads); :func:`protocol` is the part of the settings that decides the samples, plus a
digest of each benchmark's problems. The run (:mod:`cooper.eval.run`) writes the protocol to
``run.json`` first, and a rerun must ask for the same one to resume.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cooper.data.problems import (
    BUILTIN_SPLITS,
    DEFAULT_MAX_ROW_BYTES,
    DEFAULT_SPLIT,
    Fields,
    benchmark_label,
    is_local_file,
    load_problems,
    parse_benchmark,
)
from cooper.data.prompts import check_template
from cooper.errors import UserError
from cooper.eval.sampling import (
    DEFAULT_CHUNK_PROBLEMS,
    check_ks,
    check_verify_mode,
)
from cooper.infra.generation import SamplingConfig
from cooper.infra.protocol import PAPER_SAMPLES, PAPER_TEMPERATURE, PAPER_TOP_P
from cooper.types import Problem

BACKENDS = ("hf", "vllm")


@dataclass(frozen=True)
class EvalSettings:
    """What to evaluate and how; all but ``ks``, ``trust_remote_code`` and ``threads`` decide
    the samples (and so go into the protocol)."""

    model: str
    """model to evaluate: the embedded default's name, a local folder or a Hub id"""
    benchmarks: tuple[str, ...]
    """built-in names, each NAME or NAME:SPLIT (default split: test), and/or .jsonl/.json/.parquet paths"""
    sampling: SamplingConfig = SamplingConfig(n=PAPER_SAMPLES, temperature=PAPER_TEMPERATURE,
                                              top_p=PAPER_TOP_P)
    """samples per problem, temperature, top-p, length and seed (default: the paper's protocol)"""
    backend: str = "hf"
    """'hf' (transformers generate, batched and length-sorted) or 'vllm' (GPU)"""
    limit: int | None = None
    """evaluate only the first N problems of each benchmark (None: all)"""
    prompt_template: str | None = None
    """user message with the placeholder {question} (None: the default prompt)"""
    verify_mode: str = "strict"
    """answer extraction of the verifier: 'strict' or 'lenient'"""
    verify_timeout_s: float | None = None
    """hard time limit of one verification (None: the verifier's default)"""
    batch_size: int = 16
    """sequences per generate call (HF); decides batches, hence samples"""
    chunk_size: int = DEFAULT_CHUNK_PROBLEMS
    """problems per resumable chunk"""
    fields: Fields = Fields()
    """column mapping of local files"""
    skip_bad: bool = False
    """skip malformed rows of a local file (counted) instead of stopping"""
    max_row_bytes: int = DEFAULT_MAX_ROW_BYTES
    """largest accepted row of a local file, in bytes (a larger one is a bad row)"""
    dtype: str | None = None
    """model dtype, e.g. bfloat16 (None: the checkpoint's)"""
    ks: tuple[int, ...] | None = None
    """pass@k values (None: powers of two up to n, and n)"""
    trust_remote_code: bool = False
    """allow the checkpoint to run its own Python code"""
    threads: int | None = None
    """torch CPU threads (None: torch's default, one per core)"""

    def __post_init__(self):
        if not self.benchmarks:
            raise UserError("no benchmarks given; pass e.g. --benchmarks gsm8k,svamp,math500")
        if self.backend not in BACKENDS:
            raise UserError(f"unknown backend '{self.backend}'; choose {' or '.join(BACKENDS)}")
        if self.batch_size < 1 or self.chunk_size < 1:
            raise UserError("--batch-size and --chunk-size must be >= 1")
        if self.threads is not None and self.threads < 1:
            raise UserError(f"--threads must be >= 1, got {self.threads}")
        if self.max_row_bytes < 1:
            raise UserError(f"--max-row-bytes must be >= 1 (the largest row of a local file "
                            f"accepted, in bytes), got {self.max_row_bytes}")
        check_verify_mode(self.verify_mode)
        if self.verify_timeout_s is not None and not self.verify_timeout_s > 0:
            raise UserError(f"--verify-timeout must be positive, got {self.verify_timeout_s}")
        if self.prompt_template is not None:
            check_template(self.prompt_template)
        if self.ks is not None:
            check_ks(self.ks, self.sampling.n)


@dataclass(frozen=True)
class Benchmark:
    """A benchmark's problems under the name used in files and tables."""

    name: str
    """built-in name (NAME:SPLIT where a split was given), or a local file's stem"""
    source: str
    """as given on the command line"""
    problems: tuple[Problem, ...]

    def digest(self) -> str:
        """SHA-256 over ids, questions and references: a changed file invalidates a resume."""
        h = hashlib.sha256()
        for p in self.problems:
            for part in (p.id, p.question, p.reference):
                h.update(part.encode("utf-8", "surrogatepass") + b"\0")
        return h.hexdigest()


def load_benchmarks(settings: EvalSettings) -> list[Benchmark]:
    """Resolve every ``--benchmarks`` entry (``NAME[:SPLIT]`` or a file); unknown names and
    splits, bad files and one benchmark named twice fail before any model loads."""
    out: list[Benchmark] = []
    seen: dict[tuple[str, str], str] = {}
    for source in settings.benchmarks:
        dataset, split = parse_benchmark(source)
        if dataset not in BUILTIN_SPLITS and not is_local_file(dataset):
            raise UserError(f"unknown benchmark '{dataset}'. Built-in: "
                            f"{', '.join(BUILTIN_SPLITS)} (NAME or NAME:SPLIT); or a path to a "
                            ".jsonl, .json or .parquet file (see --question-field/--answer-field)")
        if split is not None and dataset not in BUILTIN_SPLITS:
            raise UserError(f"--benchmarks {source}: a file has no splits; name the file "
                            f"alone ({dataset}), one file per split")
        if dataset in BUILTIN_SPLITS:
            splits = BUILTIN_SPLITS[dataset]
            if split is not None and split not in splits:
                raise UserError(f"--benchmarks {source}: {dataset} has no split '{split}'; its "
                                f"splits: {', '.join(splits)} (e.g. {dataset}:{splits[-1]})")
            # gsm8k and gsm8k:test are one benchmark: evaluating it twice only costs time
            key = (dataset, split or DEFAULT_SPLIT)
            if key in seen:
                raise UserError(f"--benchmarks names {dataset}'s {key[1]} split twice "
                                f"({seen[key]} and {source}); drop one")
            seen[key] = source
        problems = load_problems(dataset, split, fields=settings.fields, limit=settings.limit,
                                 skip_bad=settings.skip_bad,
                                 max_row_bytes=settings.max_row_bytes)
        name = (benchmark_label(dataset, split) if dataset in BUILTIN_SPLITS
                else Path(dataset).stem)
        if any(b.name == name for b in out):
            raise UserError(f"two benchmarks are both named '{name}' (a file's name is its "
                            "stem); rename one file or drop the duplicate")
        out.append(Benchmark(name, source, tuple(problems)))
    return out


def protocol(settings: EvalSettings, benchmarks: Sequence[Benchmark]) -> dict[str, Any]:
    """The part of the settings that decides the samples, plus the benchmarks' contents."""
    s = settings
    return {
        "model": s.model, "backend": s.backend, **asdict(s.sampling), "limit": s.limit,
        "prompt_template": s.prompt_template, "verify_mode": s.verify_mode,
        "verify_timeout_s": s.verify_timeout_s, "batch_size": s.batch_size,
        "chunk_size": s.chunk_size, "dtype": s.dtype,
        "benchmarks": [{"name": b.name, "source": b.source, "num_problems": len(b.problems),
                        "sha256": b.digest()} for b in benchmarks],
    }
