"""``cooper data collect`` and ``cooper data label``: build hybrid-labelled reward-model data."""

from __future__ import annotations

import argparse
import os
import sys

from cooper.cli.common import (
    add_endpoint_args,
    add_field_args,
    add_local_args,
    endpoint_base_from_args,
    fields_from_args,
    local_options_from_args,
)
from cooper.data.problems import DATASET_HELP
from cooper.infra.models import DEFAULT_MODEL

SPEC_HELP = ("comma-separated model specs: [LABEL=]hf:MODEL (or just MODEL: the embedded "
             f"'{DEFAULT_MODEL}', a Hugging Face folder or Hub id) or "
             "[LABEL=]api:MODEL@URL[#KEYVAR] (an OpenAI-compatible endpoint; its key is read "
             "from $KEYVAR, default --api-key-env). See docs/data.md")


def register(dsub: argparse._SubParsersAction) -> None:
    c = dsub.add_parser(
        "collect", help="sample K completions per problem from several models into parquet",
        description="Sample --n completions for each of the first --limit problems from every "
                    "generator. Output rows: problem, completion, generator, sampling settings, "
                    "tokens, finish reason, status. Failed requests are rows with status "
                    "'failed' and the reason. Resumable: rerun the same command to skip "
                    "finished rows and retry failed ones; committed chunks survive a crash.")
    c.add_argument("--dataset", required=True, help=DATASET_HELP)
    c.add_argument("--split", default=None, help="split of a bundled dataset (default: test)")
    c.add_argument("--limit", type=int, default=None, help="the first N problems (default: all)")
    c.add_argument("--generators", default=None, metavar="SPECS", help=SPEC_HELP +
                   f" (default: {DEFAULT_MODEL}, or only --endpoint when given)")
    c.add_argument("--endpoint", default=None, metavar="URL",
                   help="shorthand: also sample from api:MODEL@URL with MODEL from --model")
    c.add_argument("--model", default=None, help="the served model name for --endpoint")
    c.add_argument("--n", type=int, default=4, help="samples per problem and generator "
                                                    "(default: %(default)s)")
    c.add_argument("--temperature", type=float, default=1.0, help="(default: %(default)s)")
    c.add_argument("--top-p", type=float, default=1.0, help="(default: %(default)s)")
    c.add_argument("--max-tokens", type=int, default=512,
                   help="most new tokens per completion (default: %(default)s)")
    c.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    c.add_argument("--out", required=True, help="output .parquet file")
    c.add_argument("--chunk-rows", type=int, default=64,
                   help="rows per committed chunk: at most this much work is lost to a crash "
                        "(default: %(default)s)")
    add_local_args(c)
    add_endpoint_args(c)
    add_field_args(c)
    c.set_defaults(func=_collect)

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
    add_local_args(lb)
    add_endpoint_args(lb)
    lb.set_defaults(func=_label)


def _specs(args: argparse.Namespace):
    from cooper.errors import UserError
    from cooper.labelling.backends import parse_spec, parse_specs

    if (args.endpoint is None) != (args.model is None):
        raise UserError("--endpoint URL and --model NAME go together")
    specs = parse_specs(args.generators) if args.generators else []
    if args.endpoint:
        specs.append(parse_spec(f"api:{args.model}@{args.endpoint}"))
    if not specs:
        specs = parse_specs(DEFAULT_MODEL)
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise UserError("--endpoint repeats a generator of --generators")
    return specs


def _collect(args: argparse.Namespace) -> int:
    from cooper.data.problems import load_problems
    from cooper.infra.files import write_atomic
    from cooper.infra.generation import SamplingConfig
    from cooper.labelling.collect import collect

    specs = _specs(args)
    sampling = SamplingConfig(n=args.n, temperature=args.temperature, top_p=args.top_p,
                              max_new_tokens=args.max_tokens, seed=args.seed)
    base = endpoint_base_from_args(args)
    local = local_options_from_args(args)
    problems = load_problems(args.dataset, args.split, fields=fields_from_args(args),
                             limit=args.limit, skip_bad=args.skip_bad,
                             max_row_bytes=args.max_row_bytes)
    summary = collect(problems.problems, specs, sampling, args.out, chunk_rows=args.chunk_rows,
                      local=local, endpoint=base, default_key_env=args.api_key_env,
                      progress=sys.stderr.isatty())
    text = summary.to_json()
    write_atomic(os.path.splitext(args.out)[0] + ".stats.json", text + "\n")
    print(text)
    print(f"{summary.rows} row(s) in {summary.out}: {summary.ok} ok, {summary.failed} failed"
          + (" (rerun the same command to retry the failed ones)" if summary.failed else ""))
    return 0


def _label(args: argparse.Namespace) -> int:
    from cooper.labelling.backends import open_generator, parse_spec
    from cooper.labelling.judge import make_judge
    from cooper.labelling.label import label, side_paths

    judge = None
    if args.judge != "none":
        spec = parse_spec(args.judge)
        gen = open_generator(spec, local=local_options_from_args(args),
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
                      verifier_timeout_s=args.verifier_timeout, progress=sys.stderr.isatty())
    finally:
        if judge is not None:
            judge.close()
    dropped, stats_path = side_paths(args.out)
    print(stats.to_json())
    rate = "n/a" if stats.agreement_rate is None else f"{stats.agreement_rate:.1%}"
    print(f"kept {stats.kept}/{stats.rows} row(s) ({stats.kept_fraction:.1%}) in {args.out}; "
          f"agreement {rate}; unparsed judge replies {stats.unparsed}; dropped rows with "
          f"reasons in {dropped}; statistics in {stats_path}")
    return 0

