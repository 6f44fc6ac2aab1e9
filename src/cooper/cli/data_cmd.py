"""``cooper data``: inspect datasets; collect and label reward-model data (:mod:`.data_build`)."""

from __future__ import annotations

import argparse
import json

from cooper.cli.common import add_field_args, add_model_args, fields_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="show datasets and build labelled reward-model data")
    dsub = p.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    show = dsub.add_parser("show", help="print a few problems with their reference answers")
    show.add_argument("dataset", help="gsm8k, svamp, math500, or a .jsonl/.json/.parquet file")
    show.add_argument("--split", default=None, help="split of a bundled dataset (default: test)")
    show.add_argument("--n", type=int, default=3, help="how many problems (default: %(default)s)")
    show.add_argument("--prompt", action="store_true",
                      help="also print the prompt as the model will see it (chat template)")
    show.add_argument("--json", action="store_true", help="one JSON object per problem")
    add_model_args(show, help_role="model whose chat template renders --prompt")
    add_field_args(show)
    show.set_defaults(func=_show)

    from cooper.cli import data_build

    data_build.register(dsub)


def _show(args: argparse.Namespace) -> int:
    from cooper.data import load_problems, render_prompt

    problems = load_problems(args.dataset, args.split, fields=fields_from_args(args),
                             limit=args.n, skip_bad=args.skip_bad,
                             max_row_bytes=args.max_row_bytes)
    tokenizer = None
    if args.prompt:
        from cooper.models import load_tokenizer

        tokenizer = load_tokenizer(args.model, trust_remote_code=args.trust_remote_code)
    for pr in problems:
        prompt = render_prompt(tokenizer, pr.question) if tokenizer else None
        if args.json:
            row = {"id": pr.id, "source": pr.source, "question": pr.question,
                   "reference": pr.reference}
            if prompt is not None:
                row["prompt"] = prompt
            print(json.dumps(row, ensure_ascii=False))
            continue
        print(f"[{pr.id}] ({pr.source})")
        print(f"question : {pr.question}")
        print(f"reference: {pr.reference}")
        if prompt is not None:
            print(f"prompt   :\n{prompt}")
        print()
    if problems.skipped:
        print(f"skipped {len(problems.skipped)} bad row(s); first: "
              f"{problems.skipped[0].where}: {problems.skipped[0].reason}")
    return 0
