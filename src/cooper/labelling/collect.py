"""``cooper data collect``: sample K completions per problem from several models, resumably.

Each row is one sample: the problem (``problem_id``, ``source``, ``question``, ``reference``),
the ``completion``, which ``generator`` wrote it and with which sampling settings, its token
count and finish reason. A row's key is (problem, generator, sample index); its ``id`` is
``PROBLEM#GENERATOR#SAMPLE``, unique in the file.

A request that failed after its retries is written as a row with ``status = "failed"``, the
failure kind in ``error`` and the reason in ``error_detail``, and an empty completion: it is
listed, never dropped. A rerun with the same output skips rows that succeeded and tries the
failed and missing ones again (see :mod:`cooper.infra.chunks` for how rows are committed). The
sampling settings of a generator's committed rows must match the rerun's, or the rerun stops:
mixing settings under one generator name would silently change what the data means.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa

from cooper.data.prompts import prompt_messages
from cooper.errors import UserError
from cooper.infra.chunks import ChunkStore, Row
from cooper.infra.endpoint import EndpointGenerator, to_generation
from cooper.infra.endpoint_records import EndpointConfig
from cooper.infra.generation import Generation, SamplingConfig
from cooper.labelling.backends import BackendSpec, LocalOptions, open_generator
from cooper.types import Problem

log = logging.getLogger(__name__)

SCHEMA = pa.schema([
    ("id", pa.string()),  # PROBLEM#GENERATOR#SAMPLE
    ("problem_id", pa.string()),
    ("source", pa.string()),
    ("question", pa.string()),
    ("reference", pa.string()),
    ("completion", pa.string()),  # "" for a failed request
    ("generator", pa.string()),
    ("sample", pa.int32()),  # 0..K-1 within (problem, generator)
    ("temperature", pa.float64()),
    ("top_p", pa.float64()),
    ("max_tokens", pa.int32()),
    ("seed", pa.int64()),
    ("num_tokens", pa.int32()),  # 0 when an endpoint does not report usage
    ("finish_reason", pa.string()),  # stop, length, or error
    ("status", pa.string()),  # ok or failed
    ("error", pa.string()),  # failure kind (infra.endpoint_records.FAILURE_KINDS), null if ok
    ("error_detail", pa.string()),
    ("attempts", pa.int32()),  # requests it took (1 for local models)
])
KEY = ("problem_id", "generator", "sample")
SETTINGS = ("temperature", "top_p", "max_tokens", "seed")


def make_row(problem: Problem, generator: str, sample: int, sampling: SamplingConfig,
             gen: Generation) -> Row:
    kind, _, detail = (gen.failure or "").partition(": ")
    return {
        "id": f"{problem.id}#{generator}#{sample}", "problem_id": problem.id,
        "source": problem.source, "question": problem.question, "reference": problem.reference,
        "completion": gen.text, "generator": generator, "sample": sample,
        "temperature": sampling.temperature, "top_p": sampling.top_p,
        "max_tokens": sampling.max_new_tokens, "seed": sampling.seed,
        "num_tokens": gen.num_tokens, "finish_reason": gen.finish_reason,
        "status": "failed" if gen.failure else "ok", "error": kind or None,
        "error_detail": detail or None, "attempts": gen.attempts}


@dataclass
class GeneratorSummary:
    """What one generator contributed to the output file."""

    rows: int = 0
    ok: int = 0
    failed: int = 0
    new_rows: int = 0
    """rows written by this run (the rest were committed before)"""
    failures: dict[str, int] = field(default_factory=dict)
    """failed rows by failure kind"""
    endpoint: dict[str, int] = field(default_factory=dict)
    """endpoint counters of this run"""


@dataclass
class CollectSummary:
    """Counts of a collect run, printed and saved as JSON next to the output."""

    out: str
    rows: int
    ok: int
    failed: int
    problems: int
    samples_per_problem: int
    generators: dict[str, GeneratorSummary]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)


def _check_settings(existing: dict[tuple, Row], specs: Sequence[BackendSpec],
                    sampling: SamplingConfig, out: Path) -> None:
    wanted = {"temperature": sampling.temperature, "top_p": sampling.top_p,
              "max_tokens": sampling.max_new_tokens, "seed": sampling.seed}
    labels = {s.label for s in specs}
    for row in existing.values():
        if row["generator"] not in labels:
            continue
        differ = [f"{k} {row[k]} (asked: {wanted[k]})" for k in SETTINGS if row[k] != wanted[k]]
        if differ:
            raise UserError(f"{out} already holds rows of '{row['generator']}' sampled with "
                            f"{', '.join(differ)}. Rerun with the same settings to resume, or "
                            "write to another --out (or give the generator another label)")


def collect(problems: Sequence[Problem], specs: Sequence[BackendSpec], sampling: SamplingConfig,
            out: str | Path, *, chunk_rows: int = 64, local: LocalOptions | None = None,
            endpoint: EndpointConfig | None = None, default_key_env: str = "OPENAI_API_KEY",
            progress: bool = False) -> CollectSummary:
    """Sample ``sampling.n`` completions per problem from each spec into ``out`` (parquet)."""
    if chunk_rows < 1:
        raise UserError(f"chunk size must be >= 1 row, got {chunk_rows}")
    store = ChunkStore(out, SCHEMA, KEY)
    existing = store.existing()
    _check_settings(existing, specs, sampling, store.out)
    done = {k for k, r in existing.items() if r["status"] == "ok"}
    if existing:
        log.info("resuming %s: %d row(s) committed, %d ok", store.out, len(existing), len(done))
    k_samples = sampling.n
    summaries: dict[str, GeneratorSummary] = {}
    for spec in specs:
        summary = summaries[spec.label] = GeneratorSummary()
        todo = [(p, [k for k in range(k_samples) if (p.id, spec.label, k) not in done])
                for p in problems]
        todo = [(p, ks) for p, ks in todo if ks]
        n_todo = sum(len(ks) for _, ks in todo)
        if not todo:
            log.info("%s: all %d row(s) already done", spec.label, len(problems) * k_samples)
            continue
        log.info("%s: %d row(s) to sample", spec.label, n_todo)
        gen = open_generator(spec, local=local, endpoint=endpoint, default_key_env=default_key_env)
        try:
            if isinstance(gen, EndpointGenerator):
                units = [(p, k) for p, ks in todo for k in ks]
                for start in range(0, len(units), chunk_rows):
                    chunk = units[start:start + chunk_rows]
                    results = gen.endpoint.chat_many(
                        [prompt_messages(p.question) for p, _ in chunk],
                        temperature=sampling.temperature, top_p=sampling.top_p,
                        max_tokens=sampling.max_new_tokens,
                        seeds=[sampling.seed + k for _, k in chunk], progress=progress)
                    rows = [make_row(p, spec.label, k, sampling, to_generation(r))
                            for (p, k), r in zip(chunk, results, strict=True)]
                    _commit(store, rows, summary, spec.label, start + len(chunk), n_todo)
                summary.endpoint = gen.endpoint.stats.metrics("endpoint")
            else:
                per_chunk = max(1, chunk_rows // k_samples)
                written = 0
                for start in range(0, len(todo), per_chunk):
                    chunk = todo[start:start + per_chunk]
                    gens = gen.generate([prompt_messages(p.question) for p, _ in chunk],
                                        sampling, progress=progress)
                    # all K samples are drawn together; keep the ones this output lacks
                    rows = [make_row(p, spec.label, k, sampling, g[k])
                            for (p, ks), g in zip(chunk, gens, strict=True) for k in ks]
                    written += len(rows)
                    _commit(store, rows, summary, spec.label, written, n_todo)
        finally:
            if isinstance(gen, EndpointGenerator):
                gen.endpoint.close()
            del gen

    order_p = {p.id: i for i, p in enumerate(problems)}
    order_g = {s.label: i for i, s in enumerate(specs)}
    rows = store.finalize(order=lambda r: (order_g.get(r["generator"], len(order_g)),
                                           r["generator"], order_p.get(r["problem_id"], 1 << 60),
                                           r["problem_id"], r["sample"]))
    for spec in specs:
        s = summaries[spec.label]
        mine = [r for r in rows if r["generator"] == spec.label]
        s.rows, s.ok = len(mine), sum(r["status"] == "ok" for r in mine)
        s.failed = s.rows - s.ok
        s.failures = dict(Counter(r["error"] for r in mine if r["status"] != "ok"))
    ok = sum(r["status"] == "ok" for r in rows)
    return CollectSummary(str(store.out), len(rows), ok, len(rows) - ok, len(problems),
                          k_samples, summaries)


def _commit(store: ChunkStore, rows: list[Row], summary: GeneratorSummary, label: str,
            done: int, total: int) -> None:
    store.commit(rows)
    summary.new_rows += len(rows)
    failed = sum(r["status"] != "ok" for r in rows)
    log.info("%s: %d/%d row(s) committed%s", label, done, total,
             f" ({failed} failed in this chunk)" if failed else "")
