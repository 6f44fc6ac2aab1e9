"""``cooper data samples``: the embedded model's shipped completions, and a check that the
command beside each one writes it again (:mod:`cooper.data.embedded_samples`)."""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import tempfile
from pathlib import Path


def register(dsub: argparse._SubParsersAction) -> None:
    s = dsub.add_parser(
        "samples", help="the embedded model's completions that ship with cooper-rl, and a "
                        "check that they regenerate",
        description="List the shipped completions of the embedded default model (the data "
                    "of the demo's reward model, and held-out completions it is scored on) "
                    "with the command that wrote each. --check DATASET/SPLIT runs that command "
                    "again in a temporary folder and compares: the whole file byte for byte, "
                    "or with --problems K its first K problems row for row (minutes instead of "
                    "half an hour). Another CPU may round differently and draw other tokens; "
                    "the check says so when it differs.")
    s.add_argument("--check", metavar="DATASET/SPLIT", default=None,
                   help="sample again and compare with the shipped file")
    s.add_argument("--problems", type=int, default=None, metavar="K",
                   help="with --check: only the first K problems (a multiple of the file's "
                        "chunk; default: all)")
    s.set_defaults(func=_samples)


def _samples(args: argparse.Namespace) -> int:
    from cooper.data.embedded_samples import SHIPPED, shipped_samples
    from cooper.errors import UserError

    if args.check is None:
        if args.problems is not None:
            raise UserError("--problems goes with --check DATASET/SPLIT")
        for s in SHIPPED.values():
            print(f"{s.dataset}/{s.split}: {s.path} ({s.count} problems, sha256 "
                  f"{_sha256(s.path)[:16]})\n  written by: {s.command_for()}")
        return 0
    dataset, _, split = args.check.partition("/")
    shipped = shipped_samples(dataset, split)
    k = shipped.count if args.problems is None else args.problems
    if not 1 <= k <= shipped.count or (k < shipped.count and k % shipped.chunk):
        raise UserError(f"--problems must be a multiple of {shipped.chunk} (the problems of a "
                        f"sampling chunk) up to {shipped.count}, got {k}")
    return check(shipped.command_for(k), shipped.written, shipped.path,
                 None if k == shipped.count else k)


def check(command: str, written: str, shipped: Path, problems: int | None) -> int:
    """Run ``command`` (a ``cooper ...`` line) in a temporary folder and compare the file it
    writes (``written``) with ``shipped``: byte for byte, or with ``problems`` the rows of the
    first that many problems. 0 when identical, 1 when not."""
    import pyarrow.parquet as pq

    from cooper.cli import main

    print(f"sampling again: {command}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        here = os.getcwd()
        os.chdir(tmp)
        try:
            code = main(shlex.split(command)[1:])
        finally:
            os.chdir(here)
        if code:
            return code
        new = Path(tmp) / written
        if problems is None:
            same = new.read_bytes() == shipped.read_bytes()
            what = "byte for byte"
        else:
            got = pq.read_table(new).to_pylist()
            ids = {r["problem_id"] for r in got}
            want = [r for r in pq.read_table(shipped).to_pylist() if r["problem_id"] in ids]
            same = got == want and len(ids) == problems
            what = f"the first {problems} problems' {len(got)} rows"
    if same:
        print(f"identical: {what} of {shipped}")
        return 0
    print(f"DIFFERENT: {what} of {shipped} are not what the command wrote here; on another "
          "CPU sampling can draw other tokens (the shipped file is the one to use)")
    return 1


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
