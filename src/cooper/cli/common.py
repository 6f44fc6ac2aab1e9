"""Arguments shared by several commands, so each is spelled and documented once."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping
from pathlib import Path

from cooper.data.problems import DEFAULT_MAX_ROW_BYTES, Fields
from cooper.infra.models import DEFAULT_MODEL


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


def add_endpoint_args(p: argparse.ArgumentParser) -> None:
    """Limits shared by every OpenAI-compatible endpoint a command talks to."""
    g = p.add_argument_group("endpoints (api:MODEL@URL specs)")
    g.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                   help="environment variable holding the API key of endpoints whose spec names "
                        "none (unset: a dummy key, fine for local servers) (default: %(default)s)")
    g.add_argument("--concurrency", type=int, default=8,
                   help="requests in flight per endpoint (default: %(default)s)")
    g.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                   help="deadline of one request attempt (default: %(default)s)")
    g.add_argument("--max-retries", type=int, default=3,
                   help="further attempts after a transient failure (default: %(default)s)")
    g.add_argument("--breaker-failures", type=int, default=5, metavar="K",
                   help="consecutive unanswered attempts after which an endpoint is left alone "
                        "for --breaker-cooldown seconds (default: %(default)s)")
    g.add_argument("--breaker-cooldown", type=float, default=30.0, metavar="SECONDS",
                   help="(default: %(default)s)")


def endpoint_base_from_args(args: argparse.Namespace):
    """The EndpointConfig limits of the command line (URL and model come from each spec)."""
    from cooper.infra.endpoint_records import EndpointConfig

    return EndpointConfig(
        "http://unset", "unset", api_key_env=args.api_key_env, concurrency=args.concurrency,
        timeout_s=args.timeout, max_retries=args.max_retries,
        breaker_failures=args.breaker_failures, breaker_cooldown_s=args.breaker_cooldown)


def add_local_args(p: argparse.ArgumentParser) -> None:
    """How local (hf:) models run."""
    g = p.add_argument_group("local models (hf:MODEL specs)")
    g.add_argument("--batch-size", type=int, default=16,
                   help="sequences per generation batch (default: %(default)s)")
    g.add_argument("--dtype", default=None, help="e.g. float32, bfloat16 (default: the model's)")
    g.add_argument("--threads", type=int, default=None,
                   help="CPU threads for torch (default: one per core). On a small or busy CPU, "
                        "--threads 1 can be several times faster")
    if not any(a.dest == "trust_remote_code" for a in p._actions):
        g.add_argument("--trust-remote-code", action="store_true",
                       help="allow a checkpoint to run its own Python code (off by default)")


def local_options_from_args(args: argparse.Namespace):
    from cooper.errors import UserError
    from cooper.infra.models import check_dtype
    from cooper.labelling.backends import LocalOptions

    if args.threads is not None and args.threads < 1:
        raise UserError(f"--threads must be >= 1, got {args.threads}")
    check_dtype(args.dtype)
    return LocalOptions(batch_size=args.batch_size, trust_remote_code=args.trust_remote_code,
                        dtype=args.dtype, threads=args.threads)


def load_solved_problems(args: argparse.Namespace):
    """The problems of ``args.dataset`` that ship a worked solution (``--solution-field`` names
    its column in a local file), for the commands that build reward-model data from gold
    solutions; a clear error when there is none."""
    from dataclasses import replace

    from cooper.data.problems import is_local_file, load_problems
    from cooper.errors import UserError

    fields = fields_from_args(args)
    if args.solution_field:
        if not is_local_file(args.dataset):
            raise UserError("--solution-field is for local files; bundled datasets know "
                            "their solution column")
        fields = replace(fields, solution=args.solution_field)
    problems = load_problems(args.dataset, args.split, fields=fields, skip_bad=args.skip_bad,
                             max_row_bytes=args.max_row_bytes)
    if not any(p.solution for p in problems):
        raise UserError(f"{problems.name} has no worked solutions; for a local file pass "
                        "--solution-field COLUMN (or an --answer-field holding GSM8K-style "
                        "'#### n' solutions)")
    return problems


# ------------------------------------------------------------------ checks before work starts

def check_seconds(flag: str, value: float) -> None:
    """A duration option must be a finite number of seconds above 0 (nan and inf pass a plain
    ``> 0`` or reach a deadline computation as a ValueError)."""
    from cooper.errors import UserError

    if not (math.isfinite(value) and value > 0):
        raise UserError(f"{flag} must be a finite number of seconds > 0, got {value}")


def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:  # another name for one file (a hard link)
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def check_not_input(writes: Mapping[str, str | os.PathLike | None],
                    reads: Mapping[str, str | os.PathLike | None]) -> None:
    """No file a command writes (flag -> path) is one it reads: the input would be overwritten,
    silently, by the command's own output. None entries (an unused option, or a bundled
    dataset's name) are ignored; paths are compared resolved."""
    from cooper.errors import UserError

    for wflag, w in writes.items():
        for rflag, r in reads.items():
            if w is not None and r is not None and _same_file(Path(w).expanduser(),
                                                               Path(r).expanduser()):
                raise UserError(f"{wflag} {w} is the same file as {rflag} {r}: writing it "
                                "would overwrite the input; pick another --out")
