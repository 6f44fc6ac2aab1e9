"""The ``cooper`` command: one sub-command per pipeline stage.

Each command lives in its own module here, named after it (``data_cmd.py`` for ``cooper data``,
``data_build_cmd.py`` for ``cooper data build``; common.py and rm_common.py hold the arguments
several share), with a ``register(subparsers)`` function, and imports torch and transformers
only inside its handlers, so ``cooper --help`` and cache checks start in a fraction of a second.
A :class:`~cooper.errors.UserError` ends the command with its message and exit code 2; anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from cooper import __version__
from cooper.errors import UserError
from cooper.infra.allocator import bound_onednn_caches, keep_freed_memory
from cooper.infra.threads import fixed_math_threads

# Order here is the order in `cooper --help`: the pipeline from data to report.
GROUPS = ("demo_cmd", "models_cmd", "data_cmd", "verify_cmd", "rm_cmd", "train_cmd", "eval_cmd",
          "experiment_cmd", "report_cmd", "bench_cmd")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cooper",
        description="Cooper: RL for LLM reasoning with a reward model trained during RL.",
    )
    parser.add_argument("--version", action="version", version=f"cooper-rl {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in GROUPS:
        importlib.import_module(f"cooper.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # KEY=VALUE settings may stand on both sides of a command's flags (`cooper train
    # reward.mode=rule --print-config max_steps=2`): argparse stops taking positionals at the
    # first flag after them and leaves the rest over; they are appended in the order given
    if extra and hasattr(args, "overrides") and not any(a.startswith("-") for a in extra):
        args.overrides = [*args.overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if not args.verbose:  # one INFO line per HTTP request would bury the progress lines
        for name in ("httpx2", "openai"):
            logging.getLogger(name).setLevel(logging.WARNING)
        # nor a "Loading weights" bar per model load (read when transformers is imported)
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        keep_freed_memory()  # before any tensor exists: steps reuse memory, not fault it in
        bound_onednn_caches()  # before the first oneDNN product reads their capacity
        fixed_math_threads()  # before oneMKL starts: the same numbers on a busy machine
        return int(args.func(args) or 0)
    except UserError as e:
        if os.environ.get("COOPER_DEBUG"):
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
