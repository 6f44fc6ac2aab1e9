"""Arguments shared by several commands, so each is spelled and documented once."""

from __future__ import annotations

import argparse

from cooper.data import DEFAULT_MAX_ROW_BYTES, Fields
from cooper.models import DEFAULT_MODEL


def add_model_args(p: argparse.ArgumentParser, flag: str = "--model",
                   help_role: str = "model") -> None:
    p.add_argument(flag, default=DEFAULT_MODEL,
                   help=f"{help_role}: '{DEFAULT_MODEL}' (embedded default), a local Hugging "
                        "Face folder, or a Hub id (default: %(default)s)")
    if not any(a.dest == "trust_remote_code" for a in p._actions):
        p.add_argument("--trust-remote-code", action="store_true",
                       help="allow a checkpoint to run its own Python code (off by default)")


def add_field_args(p: argparse.ArgumentParser) -> None:
    """Column mapping and bad-row handling for local dataset files."""
    g = p.add_argument_group("local dataset files (.jsonl/.json/.parquet)")
    g.add_argument("--question-field", default="question", help="column with the question")
    g.add_argument("--answer-field", default="answer",
                   help="column with the reference answer (a GSM8K '#### n' solution is cut "
                        "to its final answer)")
    g.add_argument("--id-field", default=None, help="column with a unique id (default: row number)")
    g.add_argument("--skip-bad", action="store_true",
                   help="skip malformed rows, counting and logging them, instead of stopping")
    g.add_argument("--max-row-bytes", type=int, default=DEFAULT_MAX_ROW_BYTES,
                   help="largest accepted row (default: %(default)s)")


def fields_from_args(args: argparse.Namespace) -> Fields:
    return Fields(question=args.question_field, reference=args.answer_field, id=args.id_field)
