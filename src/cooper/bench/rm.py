"""Reward-model scoring throughput: length-sorted batches vs batches in input order.

Scores the same triples twice with :meth:`cooper.rm.model.RewardModel.score`, once with
batches of similar length (the default) and once in input order, and reports sequences per
second of each (``seq_per_s``, ``naive_seq_per_s``) and their ratio (``speedup``), plus the
padding each way. The triples are GSM8K test questions with their gold solutions as
completions (lengths vary as real completions do), or a file of triples given with --data.
Each way runs --repeats times, alternating, and the fastest run counts: the machine may be
shared, and the fastest run is the one least disturbed.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from cooper.infra.models import DEFAULT_MODEL


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help="reward-model folder or causal LM checkpoint (default: %(default)s)")
    p.add_argument("--data", default=None,
                   help="triples file (default: GSM8K test questions with gold solutions)")
    p.add_argument("--n", type=int, default=128, help="triples to score (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=16, help="(default: %(default)s)")
    p.add_argument("--repeats", type=int, default=2,
                   help="timed runs of each way; the fastest counts (default: %(default)s)")
    p.add_argument("--trust-remote-code", action="store_true")


def bench_triples(args: argparse.Namespace) -> list:
    from cooper.types import Triple

    if args.data:
        from cooper.data.triples import load_triples

        return load_triples(args.data, require_label=False, limit=args.n).triples
    from cooper.data.problems import load_problems

    return [Triple(p.question, p.reference, p.solution or "")
            for p in load_problems("gsm8k", "test", limit=args.n)]


def _padded_tokens(lengths: list[int], order: list[int], batch_size: int) -> int:
    return sum(max(lengths[i] for i in order[k:k + batch_size]) * len(order[k:k + batch_size])
               for k in range(0, len(order), batch_size))


def run(args: argparse.Namespace) -> dict[str, Any]:
    from cooper.errors import UserError
    from cooper.rm.model import RewardModel

    if args.n < 1 or args.batch_size < 1 or args.repeats < 1:
        raise UserError("--n, --batch-size and --repeats must be at least 1")
    rm = RewardModel.load(args.model, trust_remote_code=args.trust_remote_code)
    triples = bench_triples(args)
    rm.score(triples[:args.batch_size], batch_size=args.batch_size)  # warm-up, not timed
    best = {True: float("inf"), False: float("inf")}
    results = {}
    for _ in range(args.repeats):
        for sort in (True, False):
            t0 = time.perf_counter()
            results[sort] = rm.score(triples, batch_size=args.batch_size, sort_by_length=sort)
            best[sort] = min(best[sort], time.perf_counter() - t0)
    max_diff = max(abs(a - b) for a, b in zip(results[True], results[False], strict=True))
    lengths = [len(rm.encode(t)) for t in triples]
    by_length = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    n = len(triples)
    return {
        "benchmark": "rm",
        "model": str(args.model),
        "n": n,
        "batch_size": args.batch_size,
        "repeats": args.repeats,
        "seq_per_s": round(n / best[True], 3),
        "naive_seq_per_s": round(n / best[False], 3),
        "speedup": round(best[False] / best[True], 3),
        "seconds": round(best[True], 3),
        "naive_seconds": round(best[False], 3),
        "tokens": sum(lengths),
        "padded_tokens": _padded_tokens(lengths, by_length, args.batch_size),
        "naive_padded_tokens": _padded_tokens(lengths, list(range(n)), args.batch_size),
        # both ways must give the same scores; padding changes only float rounding
        "max_score_difference": max_diff,
    }
