"""What the ``cooper rm`` commands share: argument groups and the loaders of rows and models."""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

from cooper.data.problems import DEFAULT_MAX_ROW_BYTES


def add_input_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("input rows (.jsonl/.json/.parquet)")
    g.add_argument("--skip-bad", action="store_true",
                   help="skip malformed rows, counting and logging them, instead of stopping")
    g.add_argument("--max-row-bytes", type=int, default=DEFAULT_MAX_ROW_BYTES,
                   help="largest accepted row (default: %(default)s)")
    g.add_argument("--source-field", default="source",
                   help="column naming each row's source, for per-source figures "
                        "(default: %(default)s; missing: the file name)")
    g.add_argument("--limit", type=int, default=None, help="use only the first N rows")


def add_model_args(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument("--model", required=required,
                   help="a reward-model folder written by `cooper rm train`")
    p.add_argument("--batch-size", type=int, default=16,
                   help="sequences per forward pass (default: %(default)s)")
    p.add_argument("--max-length", type=int, default=None,
                   help="token budget per triple (default: the one the model was trained with)")
    p.add_argument("--no-reference", action="store_true",
                   help="blank the reference answer, to measure what it adds")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="allow a checkpoint to run its own Python code (off by default)")


def check_positive(name: str, value: int | None) -> None:
    from cooper.errors import UserError

    if value is not None and value < 1:
        raise UserError(f"{name} must be at least 1, got {value}")


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes, read in blocks (a rows file may be large)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def load_rows(args: argparse.Namespace, file: str, require_label: bool):
    from cooper.data.triples import load_triples
    from cooper.types import Triple

    rows = load_triples(file, require_label=require_label, skip_bad=args.skip_bad,
                        max_row_bytes=args.max_row_bytes, limit=args.limit,
                        source_field=args.source_field)
    if getattr(args, "no_reference", False):
        from dataclasses import replace

        rows.rows = [replace(r, triple=Triple(r.triple.question, "", r.triple.completion))
                     for r in rows.rows]
    if rows.skipped:
        print(f"skipped {len(rows.skipped)} bad row(s); first: {rows.skipped[0].where}: "
              f"{rows.skipped[0].reason}", file=sys.stderr)
    return rows


def load_rm(args: argparse.Namespace):
    from cooper.rm.model import RewardModel
    from cooper.rm.spec import is_plain_classifier
    from cooper.rm.template import SPEC_FILE

    check_positive("--batch-size", args.batch_size)
    # a plain one-label classifier (a released VerifyRM) is said by RewardModel.load's notice
    if not (Path(args.model) / SPEC_FILE).is_file() and not is_plain_classifier(args.model):
        print(f"warning: {args.model} has no {SPEC_FILE}: not a trained reward model, its "
              "score head may be untrained", file=sys.stderr)
    return RewardModel.load(args.model, trust_remote_code=args.trust_remote_code,
                            max_length=args.max_length)
