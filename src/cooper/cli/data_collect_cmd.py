"""``cooper data collect``: sample completions from several models, the rows that ``cooper data
label`` (:mod:`.data_label_cmd`) gives hybrid labels."""

from __future__ import annotations

import argparse
import os
import sys

from cooper.cli.common import (
    add_endpoint_args,
    add_field_args,
    add_local_args,
    check_not_input,
    endpoint_base_from_args,
    fields_from_args,
    local_options_from_args,
)
from cooper.data.problems import DATASET_HELP
from cooper.infra.files import check_out_file
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
    from cooper.data.problems import is_local_file, load_problems
    from cooper.errors import UserError
    from cooper.infra.files import write_atomic
    from cooper.infra.generation import SamplingConfig
    from cooper.labelling.collect import collect

    stats_path = os.path.splitext(args.out)[0] + ".stats.json"
    check_out_file("--out", args.out)
    check_not_input({"--out": args.out, "--out's statistics": stats_path},
                    {"--dataset": args.dataset if is_local_file(args.dataset) else None})
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
    write_atomic(stats_path, text + "\n")
    print(text)
    print(f"{summary.rows} row(s) in {summary.out}: {summary.ok} ok, {summary.failed} failed"
          + (" (rerun the same command to retry the failed ones)" if summary.failed else ""))
    if summary.failed and not summary.ok:  # nothing to label: a dead endpoint, a wrong URL
        raise UserError(f"every one of the {summary.failed} request(s) failed "
                        f"({_failure_kinds(summary)}); check that each generator is reachable "
                        "and serves its model, then rerun the same command to retry them")
    return 0


def _failure_kinds(summary) -> str:
    kinds: dict[str, int] = {}
    for g in summary.generators.values():
        for kind, n in g.failures.items():
            kinds[str(kind)] = kinds.get(str(kind), 0) + n
    return ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items()))
