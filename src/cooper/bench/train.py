"""Reward-model training on cached frozen layers: the last layer at the scored token vs whole.

Training the top K layers (``cooper rm train --train-layers K``, the demo's reward model, Cooper's
update with ``rm_update.train_layers``) runs only those layers, forward and backward, on the
cached output of the frozen ones (:mod:`cooper.rm.trunk`). This times that forward and backward
over the same batches two ways: with the last layer run at each row's last token alone
(:mod:`cooper.rm.last_token`, the default) and with the whole last layer. The weights do not
change between batches (no optimiser step), so both ways compute the same logits and gradients:
their largest differences are reported beside the times. The frozen layers run once, untimed.
Triples are a labelled file given with --data (``cooper data build`` writes one; the demo's is
``rm_data.jsonl`` in its output folder) or GSM8K test questions with their gold solutions. Each
way runs --repeats times, alternating, and the fastest run counts: the machine may be shared.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from cooper.bench.rm import bench_triples
from cooper.infra.models import DEFAULT_MODEL


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help="reward-model folder or causal LM checkpoint (default: %(default)s)")
    p.add_argument("--data", default=None,
                   help="triples file (default: GSM8K test questions with gold solutions)")
    p.add_argument("--n", type=int, default=128, help="triples (default: %(default)s)")
    p.add_argument("--train-layers", type=int, default=4,
                   help="top layers trained (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=8, help="(default: %(default)s)")
    p.add_argument("--dtype", default=None,
                   help="float32, bfloat16, ... (default: the model's own)")
    p.add_argument("--repeats", type=int, default=2,
                   help="timed runs of each way; the fastest counts (default: %(default)s)")
    p.add_argument("--trust-remote-code", action="store_true")


def _pass(trunk, states, batch_size: int) -> tuple[float, list, list]:
    """One forward and backward over every batch: (seconds, logits, gradients summed)."""
    import torch

    rm = trunk.rm
    params = [p for p in rm.model.parameters() if p.requires_grad]
    rm.model.zero_grad(set_to_none=True)
    rm.model.train()
    logits = []
    t0 = time.perf_counter()
    for k in range(0, len(states), batch_size):
        out = trunk.logits(states[k:k + batch_size])  # [B]
        out.sum().backward()
        logits.append(out.detach())
    seconds = time.perf_counter() - t0
    grads = [p.grad.clone() for p in params]
    rm.model.zero_grad(set_to_none=True)
    rm.model.eval()
    return seconds, torch.cat(logits).tolist(), grads


def run(args: argparse.Namespace) -> dict[str, Any]:
    from cooper.errors import UserError
    from cooper.rm.last_token import supported
    from cooper.rm.model import RewardModel
    from cooper.rm.trunk import FrozenTrunk, unsupported

    if min(args.n, args.batch_size, args.repeats, args.train_layers) < 1:
        raise UserError("--n, --batch-size, --repeats and --train-layers must be at least 1")
    rm = RewardModel.load(args.model, trust_remote_code=args.trust_remote_code, dtype=args.dtype)
    triples = bench_triples(args)
    ids = [rm.encode(t) for t in triples]
    why = unsupported(rm, args.train_layers, sum(map(len, ids)))
    if why:
        raise UserError(f"the frozen layers of {args.model} cannot be cached: {why}")
    rm.train_top_layers(args.train_layers)
    rm.keep_trainable_in_float32()  # as cooper rm train steps a bfloat16 model's top layers
    short = FrozenTrunk(rm, args.train_layers)
    whole = FrozenTrunk(rm, args.train_layers, last_token=False)
    states = short.states(ids, batch_size=2 * args.batch_size)
    # length-sorted batches, as training groups them: the padding is the same both ways
    order = sorted(range(len(states)), key=lambda i: -len(states[i]))
    states = [states[i] for i in order]
    why_not = supported(rm.model.base_model, max(map(len, states)))
    if why_not:
        raise UserError(f"the last layer of {args.model} is run whole either way: {why_not}")
    _pass(short, states[:args.batch_size], args.batch_size)  # warm-up, not timed
    best = {"last_token": float("inf"), "whole": float("inf")}
    runs: dict[str, tuple[list, list]] = {}
    for _ in range(args.repeats):
        for name, trunk in (("last_token", short), ("whole", whole)):
            seconds, logits, grads = _pass(trunk, states, args.batch_size)
            best[name] = min(best[name], seconds)
            runs[name] = (logits, grads)
    (a_logits, a_grads), (b_logits, b_grads) = runs["last_token"], runs["whole"]
    grad_diff = max(((a - b).abs().max() / b.abs().max().clamp_min(1e-12)).item()
                    for a, b in zip(a_grads, b_grads, strict=True))
    return {
        "benchmark": "train",
        "model": str(args.model),
        "dtype": str(next(rm.model.parameters()).dtype).removeprefix("torch."),
        "n": len(states),
        "tokens": sum(map(len, states)),
        "train_layers": args.train_layers,
        "layers": len(rm.model.base_model.layers),
        "batch_size": args.batch_size,
        "repeats": args.repeats,
        "seconds": round(best["last_token"], 3),
        "whole_layer_seconds": round(best["whole"], 3),
        "speedup": round(best["whole"] / best["last_token"], 3),
        # the same computation both ways: these are float rounding
        "max_logit_difference": max(abs(a - b) for a, b in zip(a_logits, b_logits, strict=True)),
        "max_relative_gradient_difference": grad_diff,
    }
