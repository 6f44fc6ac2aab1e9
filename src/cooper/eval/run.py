"""Resumable evaluation runs on disk (``cooper eval``) and their summary table.

What a run evaluates, and the protocol it is identified by, come from
:mod:`cooper.eval.settings`. A run folder holds::

    run.json                  the protocol, written first; a rerun must ask for the same one
    chunks/NAME/00003.json    samples of chunk 3 of benchmark NAME (while NAME is in progress)
    samples/NAME.jsonl        every sample of NAME, one JSON object a line (once NAME is done)
    samples/NAME.done.json    marks NAME complete; written after NAME.jsonl
    results.json              protocol, versions, metrics per benchmark, average, times
    .lock                     held while a process writes the run (two never write one run)

Resume: problems are cut into fixed chunks (:func:`cooper.eval.sampling.chunk_problems`); each chunk
is generated, verified and written to its own file by write-then-rename, so a file exists
only when the whole chunk is done. A rerun with the same protocol keeps every chunk file and
computes only the missing chunks. Chunks are formed the same way each time and
:class:`~cooper.infra.generation.HFGenerator` seeds each batch from its prompts, so a resumed run
gives exactly the samples and numbers of an uninterrupted one. When a benchmark is complete its
chunks are merged into ``samples/NAME.jsonl`` and removed.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from cooper.errors import UserError
from cooper.eval.sampling import (
    BenchmarkMetrics,
    SampleRecord,
    chunk_problems,
    default_ks,
    sample_chunk,
    summarize,
)
from cooper.eval.settings import Benchmark, EvalSettings, load_benchmarks, protocol
from cooper.infra.environment import PACKAGES, environment
from cooper.infra.files import remove_temp_files, write_atomic, write_json
from cooper.infra.generation import Generator, load_generator
from cooper.types import Problem

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    """What ``cooper eval`` computed, as written to ``results.json``."""

    protocol: dict[str, Any]
    metrics: list[BenchmarkMetrics]
    average: dict[str, Any]  # accuracy, majority_accuracy, pass_at_k over benchmarks
    samples_computed: int  # by this invocation
    samples_reused: int  # from earlier invocations
    wall_time_s: float  # this invocation
    compute_time_s: dict[str, float] = field(default_factory=dict)  # per benchmark, all invocations


# ------------------------------------------------------------------ files

def _to_jsonl(records: Sequence[SampleRecord]) -> str:
    return "".join(json.dumps(asdict(r), ensure_ascii=False) + "\n" for r in records)


def _record(row: dict[str, Any], where: str) -> SampleRecord:
    names = {f.name for f in fields(SampleRecord)}
    if set(row) != names:
        raise UserError(f"{where}: not a sample record of this version (fields differ); "
                        "evaluate into a new --out folder")
    return SampleRecord(**row)


def read_samples(path: Path) -> list[SampleRecord]:
    """The records of a ``samples/NAME.jsonl`` file."""
    # split on "\n" only: str.splitlines() would also split inside a completion at U+2028,
    # U+0085 and other line breaks that JSON leaves unescaped
    return [_record(json.loads(line), f"{path}:{i}")
            for i, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1) if line]


def _check_protocol(out: Path, proto: dict[str, Any]) -> bool:
    """True when resuming; raise when ``out`` holds a run with another protocol."""
    path = out / "run.json"
    if not path.exists():
        if any(p.name != ".lock" for p in out.iterdir()):
            raise UserError(f"{out} is not empty and holds no cooper eval run (no run.json); "
                            "pick a new --out folder")
        write_json(path, proto)
        return False
    old = json.loads(path.read_text())
    if old != proto:
        diff = [k for k in sorted(set(old) | set(proto)) if old.get(k) != proto.get(k)]
        raise UserError(f"{out} holds a run with other settings ({', '.join(diff)} differ); "
                        "rerun with the same settings to resume it, or pick a new --out folder")
    return True


# ------------------------------------------------------------------ the run

@dataclass
class _Done:
    """One benchmark's samples and how they came about."""

    samples: list[SampleRecord]
    computed: int
    reused: int
    compute_time_s: float


@contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    """Hold ``out/.lock`` so two processes never write one run; the OS frees it on any exit."""
    import fcntl

    with open(out / ".lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"another cooper eval is writing {out}; wait for it to end, or "
                            "pick another --out folder") from None
        yield


def run_eval(settings: EvalSettings, out_dir: str | os.PathLike, *,
             generator: Generator | Callable[[], Generator] | None = None,
             progress: bool = True) -> RunResult:
    """Evaluate every benchmark into ``out_dir``, resuming whatever an earlier run left there.

    ``generator``: a ready generator, or a factory called only if some chunk must be computed
    (a finished run reruns without loading the model); default: ``settings.backend``.
    """
    t_start = time.perf_counter()
    out = Path(out_dir)
    benchmarks = load_benchmarks(settings)
    proto = protocol(settings, benchmarks)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; pass a folder")
    out.mkdir(parents=True, exist_ok=True)
    ks = list(settings.ks) if settings.ks else default_ks(settings.sampling.n)
    loaded: list[Generator] = []

    def get_generator() -> Generator:
        if not loaded:
            if generator is None:
                if settings.threads is not None:
                    import torch

                    torch.set_num_threads(settings.threads)
                loaded.append(load_generator(settings.backend, settings.model,
                                             trust_remote_code=settings.trust_remote_code,
                                             batch_size=settings.batch_size,
                                             dtype=settings.dtype))
            elif hasattr(generator, "generate"):
                loaded.append(generator)  # type: ignore[arg-type]
            else:
                loaded.append(generator())  # type: ignore[operator]
        return loaded[0]

    with _exclusive(out):
        resuming = _check_protocol(out, proto)
        (out / "samples").mkdir(exist_ok=True)
        done = {b.name: _run_benchmark(b, out, settings, get_generator, resuming, progress)
                for b in benchmarks}
        shutil.rmtree(out / "chunks", ignore_errors=True)
        metrics = [summarize(name, d.samples, ks)[0] for name, d in done.items()]
        result = RunResult(proto, metrics, average(metrics),
                           sum(d.computed for d in done.values()),
                           sum(d.reused for d in done.values()),
                           time.perf_counter() - t_start,
                           {name: d.compute_time_s for name, d in done.items()})
        _write_results(out, result, settings)
    return result


def _run_benchmark(bench: Benchmark, out: Path, settings: EvalSettings,
                   get_generator: Callable[[], Generator], resuming: bool,
                   progress: bool) -> _Done:
    """A complete benchmark from disk, or its missing chunks computed, written and merged."""
    from tqdm.auto import tqdm

    n = settings.sampling.n
    done_path = out / "samples" / f"{bench.name}.done.json"
    samples_path = out / "samples" / f"{bench.name}.jsonl"
    if done_path.exists() and samples_path.exists():
        samples = read_samples(samples_path)
        return _Done(samples, 0, len(samples),
                     json.loads(done_path.read_text())["compute_time_s"])
    chunk_dir = out / "chunks" / bench.name
    chunk_dir.mkdir(parents=True, exist_ok=True)
    remove_temp_files(chunk_dir)  # a write cut short by a kill
    chunks = chunk_problems(bench.problems, settings.chunk_size)
    stored = {i: c for i in range(len(chunks))
              if (c := _read_chunk(chunk_dir, i, chunks[i], n)) is not None}
    before = sum(len(c["samples"]) for c in stored.values())
    if resuming and before:
        log.info("%s: resuming, %d of %d samples already done", bench.name, before,
                 len(bench.problems) * n)
    missing = [i for i in range(len(chunks)) if i not in stored]
    gen = get_generator() if missing else None  # load before the bar starts its clock
    bar = tqdm(total=len(bench.problems) * n, initial=before, desc=bench.name, unit="sample",
               disable=not progress, dynamic_ncols=True)
    computed = 0
    for i in missing:
        t0 = time.perf_counter()
        records = sample_chunk(gen, chunks[i], settings.sampling, benchmark=bench.name,
                               prompt_template=settings.prompt_template,
                               verify_mode=settings.verify_mode,
                               verify_timeout_s=settings.verify_timeout_s,
                               on_samples=bar.update)
        stored[i] = {"chunk": i, "problem_ids": [p.id for p in chunks[i]],
                     "compute_time_s": time.perf_counter() - t0,
                     "samples": [asdict(r) for r in records]}
        write_json(chunk_dir / f"{i:05d}.json", stored[i], indent=None)
        computed += len(records)
    bar.close()
    samples = [_record(r, str(chunk_dir)) for i in range(len(chunks))
               for r in stored[i]["samples"]]
    seconds = sum(c["compute_time_s"] for c in stored.values())
    # samples file first, then the marker: a kill in between leaves the chunks to merge again
    write_atomic(samples_path, _to_jsonl(samples))
    write_json(done_path, {"num_samples": len(samples), "compute_time_s": seconds}, indent=None)
    shutil.rmtree(chunk_dir)
    return _Done(samples, computed, before, seconds)


def _read_chunk(chunk_dir: Path, i: int, problems: Sequence[Problem],
                n: int) -> dict[str, Any] | None:
    """A stored chunk, or None when it is missing or does not belong to this run."""
    path = chunk_dir / f"{i:05d}.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        log.warning("%s is unreadable; computing that chunk again", path)
        return None
    if data.get("problem_ids") != [p.id for p in problems] or len(data["samples"]) != len(problems) * n:
        log.warning("%s does not match this run's chunk %d; computing it again", path, i)
        return None
    return data


def average(metrics: Sequence[BenchmarkMetrics]) -> dict[str, Any]:
    """Unweighted mean over benchmarks, as the paper's "Avg" column (each benchmark counts once)."""
    ks = set.intersection(*(set(m.pass_at_k) for m in metrics))
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return {"accuracy": mean([m.accuracy for m in metrics]),
            "majority_accuracy": mean([m.majority_accuracy for m in metrics]),
            "pass_at_k": {k: mean([m.pass_at_k[k] for m in metrics]) for k in sorted(ks)}}


def _write_results(out: Path, r: RunResult, settings: EvalSettings) -> None:
    packages = (*PACKAGES, "vllm") if settings.backend == "vllm" else PACKAGES
    doc = {
        "protocol": r.protocol,
        "benchmarks": {m.benchmark: {**asdict(m), "compute_time_s": r.compute_time_s[m.benchmark]}
                       for m in r.metrics},
        "average": r.average,
        "samples_computed": r.samples_computed,
        "samples_reused": r.samples_reused,
        "wall_time_s": r.wall_time_s,
        "compute_time_s": sum(r.compute_time_s.values()),
        # no hardware: a finished run is rerun without importing torch
        **environment(packages, hardware=False),
    }
    write_json(out / "results.json", doc)


def format_summary(r: RunResult) -> str:
    """A plain-text table of a run's metrics (percent)."""
    ks = sorted(r.average["pass_at_k"])
    head = ["benchmark", "problems", "n", "accuracy", *(f"pass@{k}" for k in ks), "maj@n",
            "tokens", "cut"]
    rows = [[m.benchmark, str(m.num_problems), str(m.samples_per_problem),
             f"{100 * m.accuracy:.2f}", *(f"{100 * m.pass_at_k[k]:.2f}" for k in ks),
             f"{100 * m.majority_accuracy:.2f}", f"{m.mean_tokens:.0f}",
             f"{100 * m.truncated_fraction:.0f}%"] for m in r.metrics]
    rows.append(["average", "", "", f"{100 * r.average['accuracy']:.2f}",
                 *(f"{100 * r.average['pass_at_k'][k]:.2f}" for k in ks),
                 f"{100 * r.average['majority_accuracy']:.2f}", "", ""])
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)).rstrip()
                     for row in [head, *rows])
