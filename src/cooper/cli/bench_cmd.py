"""``cooper bench NAME``: performance benchmarks (see :mod:`cooper.bench`)."""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys

# Each name is a module cooper.bench.NAME with add_arguments(parser) and run(args) -> dict.
BENCHMARKS: tuple[str, ...] = ("verify", "rm", "train", "eval", "step", "judge", "twins")


def register(sub: argparse._SubParsersAction) -> None:
    if not BENCHMARKS:
        return
    p = sub.add_parser("bench", help="performance benchmarks that print and save JSON figures")
    bsub = p.add_subparsers(dest="bench_name", metavar="BENCHMARK", required=True)
    for name in BENCHMARKS:
        module = importlib.import_module(f"cooper.bench.{name}")
        bp = bsub.add_parser(name, help=module.__doc__.strip().splitlines()[0],
                             description=module.__doc__)
        bp.add_argument("--out", default=None, help="write the JSON result to this file")
        module.add_arguments(bp)
        bp.set_defaults(func=_run(module))


def _run(module):
    def handler(args: argparse.Namespace) -> int:
        from cooper.bench import save
        from cooper.infra.files import check_out_file

        # every file a benchmark writes, checked before it runs (minutes) rather than after
        for flag in ("--out", "--markdown"):
            if path := getattr(args, flag[2:], None):
                check_out_file(flag, path)
        save(module.run(args), args.out, "cooper " + shlex.join(sys.argv[1:]))
        return 0
    return handler
