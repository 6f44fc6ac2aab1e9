"""Generation throughput: the batched, length-sorted HF backend vs one problem at a time.

Both sides run the same model on the same problems with the same sampling settings (the
evaluation protocol by default: temperature 0.7, top-p 0.95) through
:class:`cooper.infra.generation.HFGenerator`; the naive side gets one problem per ``generate`` call.
Throughput counts generated tokens only: each completion's tokens up to and including its
end-of-sequence token. Padding, and the steps a finished sequence idles through while the rest
of its batch is still generating, are not counted, so the batched figure is not flattered by
work that produced nothing. One warm-up call precedes the timings.
"""

from __future__ import annotations

import argparse
import time
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    from cooper.infra.models import DEFAULT_MODEL
    from cooper.infra.protocol import PAPER_TEMPERATURE, PAPER_TOP_P

    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"model to generate with: '{DEFAULT_MODEL}' (embedded default), a local "
                        "Hugging Face folder, or a Hub id (default: %(default)s)")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="allow a checkpoint to run its own Python code (off by default)")
    p.add_argument("--benchmark", default="gsm8k",
                   help="problems to prompt with: a built-in name or a local file "
                        "(default: %(default)s)")
    p.add_argument("--problems", type=int, default=16,
                   help="how many problems, the first N (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=16,
                   help="sequences per batched generate call (default: %(default)s)")
    p.add_argument("--n", type=int, default=1, help="samples per problem (default: %(default)s)")
    p.add_argument("--max-new-tokens", type=int, default=128, help="(default: %(default)s)")
    p.add_argument("--temperature", type=float, default=PAPER_TEMPERATURE,
                   help="(default: %(default)s, the evaluation protocol)")
    p.add_argument("--top-p", type=float, default=PAPER_TOP_P,
                   help="(default: %(default)s, the evaluation protocol)")
    p.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads for torch (default: one per core); on a busy CPU, 1 can "
                        "be several times faster")


def _timed(gen, convs, sampling) -> tuple[int, int, float]:
    t0 = time.perf_counter()
    out = gen.generate(convs, sampling)
    seconds = time.perf_counter() - t0
    return sum(g.num_tokens for gs in out for g in gs), sum(len(gs) for gs in out), seconds


def run(args: argparse.Namespace) -> dict[str, Any]:
    from cooper.data.problems import load_problems
    from cooper.data.prompts import prompt_messages
    from cooper.errors import UserError
    from cooper.infra.generation import HFGenerator, SamplingConfig

    if args.threads is not None:
        if args.threads < 1:
            raise UserError(f"--threads must be >= 1, got {args.threads}")
        import torch

        torch.set_num_threads(args.threads)
    problems = load_problems(args.benchmark, limit=args.problems)
    convs = [prompt_messages(p.question) for p in problems]
    sampling = SamplingConfig(n=args.n, temperature=args.temperature, top_p=args.top_p,
                              max_new_tokens=args.max_new_tokens, seed=args.seed)
    batched = HFGenerator.load(args.model, trust_remote_code=args.trust_remote_code,
                               batch_size=args.batch_size)
    # Same weights, one problem (its n samples) per generate call.
    naive = HFGenerator(batched.model, batched.tokenizer, batch_size=args.n,
                        name=batched.name)
    batched.generate(convs[:1], SamplingConfig(max_new_tokens=4, temperature=0))  # warm-up

    tokens, samples, seconds = _timed(batched, convs, sampling)
    naive_tokens, naive_samples, naive_seconds = _timed(naive, convs, sampling)
    tps, naive_tps = tokens / seconds, naive_tokens / naive_seconds
    return {
        "tokens_per_s": round(tps, 2),
        "naive_tokens_per_s": round(naive_tps, 2),
        "speedup": round(tps / naive_tps, 2),
        "batched": {"tokens": tokens, "samples": samples, "seconds": round(seconds, 2)},
        "naive": {"tokens": naive_tokens, "samples": naive_samples,
                  "seconds": round(naive_seconds, 2)},
        "settings": {"model": args.model, "benchmark": args.benchmark,
                     "problems": len(problems), "batch_size": args.batch_size, "n": args.n,
                     "max_new_tokens": args.max_new_tokens, "temperature": args.temperature,
                     "top_p": args.top_p, "seed": args.seed, "threads": args.threads},
    }
