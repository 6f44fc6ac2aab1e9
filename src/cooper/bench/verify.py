"""Verifier throughput and agreement vs. plain math-verify, and hang-safety on hostile input.

Items (non-adversarial): GSM8K test gold solutions against their reference, the same solutions
against a perturbed (wrong) reference, and MATH500 solutions against their answer.

* Baseline: plain math-verify, single process, called in a loop exactly as its README shows:
  ``verify(parse("$" + reference + "$"), parse(completion))`` with its default settings
  (SIGALRM timeouts on; the benchmark runs in the main thread, where they work).
* Ours: :class:`cooper.verify.verifier.Verifier` on the same pairs, in RL-sized batches
  (``--batch-size``), with a fresh cache. Both sides are warmed up before timing (imports,
  worker start-up and math-verify's first-call set-up are not timed on either side).
* ``speedup_without_fast_path`` repeats our run with the in-process fast path off, to show what
  the worker pool alone gives.
* Adversarial: hostile completions (towers, huge factorials, 1 MB texts, invalid UTF-8,
  unbalanced braces, deep nesting), each verified with one ``verify()`` call **from a non-main
  thread**; ``max_item_latency_s`` is the slowest call. The baseline is not run on them: plain
  math-verify with its timeouts off hangs, and with them on it cannot run in a thread at all.

Every disagreement with the baseline is listed with both extractions; ``docs/verifier.md``
explains each kind.
"""

from __future__ import annotations

import argparse
import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from cooper.errors import UserError
from cooper.verify.verifier import Verifier, VerifierStats

HOSTILE_TIMEOUT_NOTE = "one verify() call per item, from a non-main thread"


@dataclass(frozen=True)
class Item:
    set: str
    id: str
    completion: Any
    reference: str


def add_arguments(p: argparse.ArgumentParser) -> None:
    from cooper.verify.verifier import DEFAULT_TIMEOUT_S

    p.add_argument("--limit", type=int, default=None,
                   help="use the first N problems of each data set (default: all)")
    p.add_argument("--workers", type=int, default=None,
                   help="verifier worker processes (default: up to 4 cores)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                   help="seconds per check (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=64,
                   help="pairs per verify_batch call, like one RL step of 4 prompts x 16 "
                        "samples (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the perturbed references")
    p.add_argument("--skip-adversarial", action="store_true", help="skip the hostile set")


def items(limit: int | None, seed: int) -> list[Item]:
    """The non-adversarial pairs: GSM8K gold, GSM8K vs. a perturbed reference, MATH500."""
    from cooper.data.perturb import wrong_answer
    from cooper.data.problems import load_problems

    rng = random.Random(seed)
    out: list[Item] = []
    gsm8k = load_problems("gsm8k", "test", limit=limit)
    for p in gsm8k:
        out.append(Item("gsm8k_gold", p.id, p.solution, p.reference))
    for p in gsm8k:
        out.append(Item("gsm8k_perturbed_reference", p.id, p.solution,
                        wrong_answer(p.reference, rng) or p.reference + "1"))
    for p in load_problems("math500", "test", limit=limit):
        out.append(Item("math500", p.id, p.solution, p.reference))
    return out


def adversarial() -> list[Item]:
    """Hostile completions; each must come back within the timeout, none may hang."""
    nest = 400
    cases = {
        "tower_9^9^9^9": r"The answer is \boxed{9^{9^{9^{9}}}}",
        "tower_10^10^10": r"\boxed{10^{10^{10}}}",
        "factorial_(10^10)!": r"\boxed{(10^{10})!}",
        "factorial_10^7": r"\boxed{10000000!}",
        "tower_2^2^2^2^2^2": r"\boxed{2^{2^{2^{2^{2^{2}}}}}}",
        "nested_frac_400": r"\boxed{" + r"\frac{1}{" * nest + "2" + "}" * (nest + 1),
        "nested_parens_5000": r"\boxed{" + "(" * 5000 + "1" + ")" * 5000 + "}",
        "unbalanced_braces_1MB": r"\boxed{" + "{" * 1_000_000,
        "text_1MB_then_answer": "x " * 500_000 + r"\boxed{3}",
        "digits_100k": "The answer is " + "9" * 100_000,
        "invalid_utf8_bytes": b"\xff\xfe\xfa \\boxed{3}",
        "lone_surrogates": "\ud800\udfff \\boxed{3}",
        "empty": "",
        "none": None,
        "division_by_zero": r"\boxed{\frac{1}{0}}",
        "left_right_mismatch": r"\boxed{\left(\left(\left(}",
        "matrix_power": r"\boxed{\begin{pmatrix}1&1\\1&0\end{pmatrix}^{10^{9}}}",
    }
    return [Item("adversarial", name, text, "3") for name, text in cases.items()]


def _baseline(pairs: list[Item]) -> tuple[list[bool], list[str], float]:
    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # its timeout warnings, per item
    parse("$1$"), verify(parse("$1$"), parse(r"\boxed{1}"))  # warm-up, as for ours
    results, extracted = [], []
    t0 = time.perf_counter()
    for it in pairs:
        pred = parse(it.completion)
        results.append(bool(verify(parse(f"${it.reference}$"), pred)))
        extracted.append(pred[-1] if pred and isinstance(pred[-1], str) else "")
    return results, extracted, time.perf_counter() - t0


def _ours(v: Verifier, pairs: list[Item], args: argparse.Namespace,
          fast_path: bool) -> tuple[list, float, dict]:
    v.fast_path = fast_path
    v.clear_cache()
    v.stats = VerifierStats()
    t0 = time.perf_counter()
    verdicts = []
    for start in range(0, len(pairs), args.batch_size):
        chunk = pairs[start:start + args.batch_size]
        verdicts += v.verify_batch([it.completion for it in chunk],
                                   [it.reference for it in chunk], timeout_s=args.timeout)
    took = time.perf_counter() - t0
    return verdicts, took, v.stats.as_dict() | {"workers": v.workers}


def _adversarial(v: Verifier, args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    with ThreadPoolExecutor(1) as thread:
        for it in adversarial():
            t0 = time.perf_counter()
            verdict = thread.submit(v.verify, it.completion, it.reference,
                                    timeout_s=args.timeout).result()
            rows.append({"id": it.id, "latency_s": round(time.perf_counter() - t0, 3),
                         "reason": verdict.reason, "correct": verdict.correct})
    return {
        "items": rows,
        "max_item_latency_s": max(r["latency_s"] for r in rows),
        "timeouts": sum(r["reason"] == "timeout" for r in rows),
        "how": HOSTILE_TIMEOUT_NOTE,
    }


def _kind(it: Item, ours_correct: bool, reason: str) -> str:
    """Who is right (gold solutions are correct by construction, perturbed references wrong)
    and which extraction rule our side used: ``ours_right_gsm8k`` = ours is right and read the
    ``####`` marker. docs/verifier.md explains each kind."""
    from cooper.verify.extraction import find_answer

    if reason in ("timeout", "error"):
        return f"ours_{reason}"
    expected = it.set != "gsm8k_perturbed_reference"
    span = find_answer(it.completion)
    rule = span.kind if span else "no_answer"
    return f"{'ours' if ours_correct == expected else 'baseline'}_right_{rule}"


def run(args: argparse.Namespace) -> dict[str, Any]:
    for name in ("limit", "workers", "batch_size"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UserError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if not args.timeout > 0:
        raise UserError(f"--timeout must be positive, got {args.timeout}")

    pairs = items(args.limit, args.seed)
    base, base_extracted, base_s = _baseline(pairs)
    # Worker start-up is not timed (nor is math-verify's import and warm-up in the baseline).
    with Verifier(workers=args.workers).start() as verifier:
        verdicts, ours_s, stats = _ours(verifier, pairs, args, fast_path=True)
        _, ours_nofast_s, _ = _ours(verifier, pairs, args, fast_path=False)
        adv = None if args.skip_adversarial else _adversarial(verifier, args)

    disagreements = []
    per_set: dict[str, dict[str, int]] = {}
    for it, b, bx, v in zip(pairs, base, base_extracted, verdicts, strict=True):
        s = per_set.setdefault(it.set, {"items": 0, "agree": 0, "ours_correct": 0,
                                        "baseline_correct": 0})
        s["items"] += 1
        s["agree"] += v.correct == b
        s["ours_correct"] += v.correct
        s["baseline_correct"] += b
        if v.correct != b:
            disagreements.append({
                "set": it.set, "id": it.id, "reference": it.reference,
                "ours": v.correct, "ours_reason": v.reason, "ours_extracted": v.extracted,
                "baseline": b, "baseline_extracted": bx[:200],
                "kind": _kind(it, v.correct, v.reason)})
    n = len(pairs)
    result: dict[str, Any] = {
        "items": n,
        "baseline_items_per_s": round(n / base_s, 1),
        "items_per_s": round(n / ours_s, 1),
        "speedup": round(base_s / ours_s, 2),
        "items_per_s_without_fast_path": round(n / ours_nofast_s, 1),
        "speedup_without_fast_path": round(base_s / ours_nofast_s, 2),
        "agreement_with_baseline": round(1 - len(disagreements) / n, 4),
        "timeout_s": args.timeout,
        "batch_size": args.batch_size,
        "per_set": per_set,
        "ours_stats": stats,
        "disagreements": disagreements,
        "disagreement_kinds": {k: sum(d["kind"] == k for d in disagreements)
                               for k in sorted({d["kind"] for d in disagreements})},
    }
    if adv is not None:
        result["max_item_latency_s"] = adv["max_item_latency_s"]
        result["timeouts"] = adv["timeouts"] + stats["timeouts"]
        result["adversarial"] = adv
    else:
        result["timeouts"] = stats["timeouts"]
    result["timeouts_non_adversarial"] = stats["timeouts"]
    return result
