"""``cooper data label``: hybrid labels (the verifier's vote and an LLM judge's) for the rows of
``cooper data collect`` (:mod:`.data_collect_cmd`), kept by a policy."""

from __future__ import annotations

import argparse
import sys

from cooper.cli.common import (
    add_endpoint_args,
    add_local_args,
    check_not_input,
    check_seconds,
    endpoint_base_from_args,
    local_options_from_args,
)
from cooper.infra.files import check_out_file


def register(dsub: argparse._SubParsersAction) -> None:
    lb = dsub.add_parser(
        "label", help="label completions with the verifier and an LLM judge (hybrid labels)",
        description="Give every row the rule-based verifier's vote and an LLM judge's vote and "
                    "keep a label by --policy. Writes OUT (kept rows, trainable by 'cooper rm "
                    "train'), OUT with suffix .dropped.parquet (every other row and why) and "
                    ".stats.json (statistics, also printed). Resumable like collect.")
    lb.add_argument("--in", dest="in_path", required=True, metavar="FILE",
                    help="rows from 'cooper data collect' (or any file with question, "
                         "reference, completion)")
    lb.add_argument("--out", required=True, help="output .parquet file of kept rows")
    lb.add_argument("--judge", required=True, metavar="SPEC",
                    help="the judge model: one spec as in collect's --generators, or 'none' "
                         "(only with --policy verifier)")
    lb.add_argument("--judge-mode", choices=("auto", "generate", "choice"), default="auto",
                    help="generate: the judge writes a reply ending in 'VERDICT: YES|NO', "
                         "parsed; choice (local judges only): compare the model's probabilities "
                         "of the two verdicts; auto: choice for local judges, generate for "
                         "endpoints (default: %(default)s)")
    lb.add_argument("--judge-max-tokens", type=int, default=512,
                    help="longest judge reply in generate mode (default: %(default)s)")
    lb.add_argument("--judge-max-chars", type=int, default=6000,
                    help="longer problems/solutions keep head and tail (default: %(default)s)")
    lb.add_argument("--policy", choices=("agree", "verifier", "judge"), default="agree",
                    help="agree: keep rows where verifier and judge agree; verifier / judge: "
                         "that one's vote (default: %(default)s)")
    lb.add_argument("--verifier-mode", choices=("strict", "lenient"), default="strict",
                    help="answer extraction of the verifier (default: %(default)s)")
    lb.add_argument("--verifier-timeout", type=float, default=5.0, metavar="SECONDS",
                    help="hard deadline per verification (default: %(default)s)")
    lb.add_argument("--chunk-rows", type=int, default=64,
                    help="rows per committed chunk (default: %(default)s)")
    lb.add_argument("--skip-bad", action="store_true",
                    help="skip malformed input rows, counting and logging them, instead of "
                         "stopping")
    add_local_args(lb)
    add_endpoint_args(lb)
    lb.set_defaults(func=_label)


def _label(args: argparse.Namespace) -> int:
    from cooper.errors import UserError
    from cooper.labelling.backends import open_generator, parse_spec
    from cooper.labelling.judge import make_judge
    from cooper.labelling.label import label, read_input, side_paths
    from cooper.verify.verifier import default_workers

    # everything that can be wrong with the input is found before a judge model loads
    check_seconds("--verifier-timeout", args.verifier_timeout)
    if args.chunk_rows < 1:
        raise UserError(f"--chunk-rows must be at least 1, got {args.chunk_rows}")
    check_out_file("--out", args.out)
    dropped, stats_path = side_paths(args.out)
    check_not_input({"--out": args.out, "--out's dropped rows": dropped,
                     "--out's statistics": stats_path}, {"--in": args.in_path})
    local = local_options_from_args(args)
    default_workers()  # a bad $COOPER_VERIFY_WORKERS
    spec = parse_spec(args.judge) if args.judge != "none" else None
    rows, skipped = read = read_input(args.in_path, skip_bad=args.skip_bad)
    judge = None
    if spec is not None:
        gen = open_generator(spec, local=local,
                             endpoint=endpoint_base_from_args(args),
                             default_key_env=args.api_key_env)
        mode = args.judge_mode
        if mode == "auto":  # small local models rarely follow the verdict format when free
            mode = "generate" if spec.is_endpoint else "choice"
        judge = make_judge(gen, mode=mode, max_tokens=args.judge_max_tokens,
                           max_chars=args.judge_max_chars, batch_size=args.batch_size)
    try:
        stats = label(args.in_path, args.out, judge, policy=args.policy,
                      chunk_rows=args.chunk_rows, verifier_mode=args.verifier_mode,
                      verifier_timeout_s=args.verifier_timeout, progress=sys.stderr.isatty(),
                      read=read)
    finally:
        if judge is not None:
            judge.close()
    print(stats.to_json())
    if skipped:
        print(f"skipped {len(skipped)} bad row(s) of {len(rows) + len(skipped)}; first: "
              f"{skipped[0].where}: {skipped[0].reason}")
    rate = "n/a" if stats.agreement_rate is None else f"{stats.agreement_rate:.1%}"
    print(f"kept {stats.kept}/{stats.rows} row(s) ({stats.kept_fraction:.1%}) in {args.out}; "
          f"agreement {rate}; unparsed judge replies {stats.unparsed}; dropped rows with "
          f"reasons in {dropped}; statistics in {stats_path}")
    return 0

