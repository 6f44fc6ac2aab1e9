"""``cooper verify``: check completions against reference answers with the rule-based verifier."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from cooper.errors import UserError

FIELDS = ("completion", "reference")
CHUNK = 512


def register(sub: argparse._SubParsersAction) -> None:
    from cooper.verify.extraction import MODES
    from cooper.verify.verifier import DEFAULT_TIMEOUT_S

    p = sub.add_parser(
        "verify", help="check completions' final answers against references (math-verify)",
        description="Extract each completion's final answer (last \\boxed{}, '#### n', 'the "
                    "answer is ...'; with --mode lenient also the last number) and check it "
                    "against the reference with math-verify, in worker processes with a hard "
                    "timeout. Prints one JSON object per pair: correct, extracted, reason "
                    "(correct, wrong, no_answer, timeout, error).")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--completion", help="one completion text (with --reference)")
    src.add_argument("--file", help="a .jsonl file with 'completion' and 'reference' per line")
    p.add_argument("--reference", help="the reference answer for --completion (LaTeX, a "
                                       "number, or a GSM8K '#### n' solution)")
    p.add_argument("--mode", choices=MODES, default="strict",
                   help="strict: boxed / #### / 'answer is' only; lenient: also the last "
                        "number (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                   help="seconds per check before it is reported as 'timeout' "
                        "(default: %(default)s)")
    p.add_argument("--workers", type=int, default=None,
                   help="verifier worker processes (default: $COOPER_VERIFY_WORKERS or up "
                        "to 4 cores)")
    p.add_argument("--summary", action="store_true",
                   help="also print counts per reason to stderr")
    p.set_defaults(func=_verify)


def _read_pairs(path: Path) -> Iterator[tuple[str, str]]:
    """(completion, reference) per line; a bad line stops with its file:line and the fix."""
    if path.is_dir():
        raise UserError(f"--file {path} is a directory; pass the .jsonl file itself")
    if not path.is_file():
        raise UserError(f"file not found: {path}")
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, 1):
            where = f"{path}:{lineno}"
            if not raw.strip():
                continue
            try:
                row = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                raise UserError(f"{where}: invalid UTF-8 at byte {e.start} (re-encode the "
                                "file as UTF-8)") from None
            except json.JSONDecodeError as e:
                raise UserError(f"{where}: not valid JSON ({e.msg}, column {e.colno}); write "
                                'one object per line: {"completion": ..., "reference": ...}'
                                ) from None
            if not isinstance(row, dict):
                raise UserError(f"{where}: a JSON {type(row).__name__}, expected an object "
                                'with "completion" and "reference"')
            for name in FIELDS:
                if name not in row:
                    raise UserError(f"{where}: missing field '{name}' (row has: "
                                    f"{', '.join(map(str, row)) or 'nothing'})")
                if not isinstance(row[name], str | int | float) or isinstance(row[name], bool):
                    raise UserError(f"{where}: field '{name}' must be text (or a number for "
                                    f"the reference), got {type(row[name]).__name__}")
            yield row["completion"], row["reference"]


def _verify(args: argparse.Namespace) -> int:
    from cooper.cli.common import check_seconds
    from cooper.verify.verifier import Verifier, default_workers

    check_seconds("--timeout", args.timeout)
    if args.workers is not None and args.workers < 1:
        raise UserError(f"--workers must be at least 1, got {args.workers}")
    if args.workers is None:
        default_workers()  # a bad $COOPER_VERIFY_WORKERS, said before a long file is read
    if args.completion is not None:
        if args.reference is None:
            raise UserError("--completion needs --reference (the expected final answer)")
        pairs = [(args.completion, args.reference)]
    else:
        if args.reference is not None:
            raise UserError("--reference goes with --completion; with --file each line "
                            "carries its own 'reference'")
        pairs = list(_read_pairs(Path(args.file)))
    counts: dict[str, int] = {}
    with Verifier(workers=args.workers) as verifier:
        for start in range(0, len(pairs), CHUNK):  # print as we go on long files
            chunk = pairs[start:start + CHUNK]
            for v in verifier.verify_batch([c for c, _ in chunk], [r for _, r in chunk],
                                           mode=args.mode, timeout_s=args.timeout):
                counts[v.reason] = counts.get(v.reason, 0) + 1
                print(json.dumps({"correct": v.correct, "extracted": v.extracted,
                                  "reason": v.reason}, ensure_ascii=False), flush=True)
    if args.summary:
        total = len(pairs)
        parts = ", ".join(f"{k}: {n}" for k, n in sorted(counts.items()))
        print(f"{total} pair(s); {parts}", file=sys.stderr)
    return 0
