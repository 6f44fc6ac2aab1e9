"""``cooper data``: inspect datasets, perturbed triples; the mixed reward-model set (``cooper
data build``, :mod:`.data_build_cmd`); collect and label reward-model data (``cooper data
collect``, :mod:`.data_collect_cmd`; ``cooper data label``, :mod:`.data_label_cmd`); the embedded
model's shipped completions (``cooper data samples``, :mod:`.data_samples_cmd`)."""

from __future__ import annotations

import argparse
import json
import math

from cooper.cli.common import (
    add_field_args,
    add_model_args,
    check_not_input,
    fields_from_args,
    load_solved_problems,
)
from cooper.data.problems import DATASET_HELP
from cooper.infra.files import check_out_file


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

    pert = dsub.add_parser(
        "perturbed", help="labelled triples: gold solutions (1) and the same with a wrong "
                          "final answer (0)",
        description="Write a balanced .jsonl of reward-model triples (question, reference, "
                    "completion, label, id, source): for N/2 problems drawn with --seed, the "
                    "gold worked solution (label 1) and a copy whose final answer was changed "
                    "consistently everywhere it is stated (label 0). Gold solutions are checked "
                    "with the verifier first; problems that fail or cannot be perturbed are "
                    "skipped and counted. SVAMP's equation is turned into a one-line solution; "
                    "local files need --solution-field.")
    pert.add_argument("--dataset", required=True, help=DATASET_HELP)
    pert.add_argument("--split", default=None, help="split of a bundled dataset (default: test)")
    pert.add_argument("--n", type=int, required=True,
                      help="number of triples to write (even: half gold, half perturbed)")
    pert.add_argument("--min-change", type=float, default=0.0, metavar="D",
                      help="keep only wrong answers further than D from a numeric reference "
                           "(a set without near misses; default 0: any change)")
    pert.add_argument("--out", required=True, help="output .jsonl file")
    pert.add_argument("--seed", type=int, default=0, help="sampling seed (default: %(default)s)")
    pert.add_argument("--solution-field", default=None,
                      help="column of a local file with the worked solution")
    add_field_args(pert)
    pert.set_defaults(func=_perturbed)

    eq = dsub.add_parser(
        "equivalence", help="labelled answer-equivalence rows, to train a learned judge",
        description="Write a balanced .jsonl of answer-equivalence rows (question, reference, "
                    "completion, label, id, source, kind): for N/2 problems drawn with --seed, "
                    "a bare answer statement with the reference's value (label 1) and with "
                    "another value (label 0), each in a form drawn from digits, words, other "
                    "cases and spellings, and yes/no against True/False; labelled by "
                    "construction and checked with the gold judge (integer and truth-value "
                    "references only). Train a judge on them with `cooper rm train`, use it with "
                    "judge.backend=verifier (docs/training.md, \"A judge that errs\").")
    eq.add_argument("--dataset", default="arith_2x1_compare",
                    help="a bundled dataset whose references are integers or truth values "
                         "(default: %(default)s)")
    eq.add_argument("--split", default="train", help="(default: %(default)s)")
    eq.add_argument("--n", type=int, required=True,
                    help="number of rows to write (even: half equivalent, half different)")
    eq.add_argument("--out", required=True, help="output .jsonl file")
    eq.add_argument("--seed", type=int, default=0, help="sampling seed (default: %(default)s)")
    eq.add_argument("--working", type=float, default=0.0, metavar="P",
                    help="share of the rows that open with one line of working agreeing with "
                         "their answer (62 + 9 = 81.), as the arithmetic testbeds' policies write "
                         "(default: %(default)s: none)")
    eq.add_argument("--numbers", type=float, default=None, metavar="P",
                    help="share of the problems drawn from those with an integer reference "
                         "(default: as the dataset has them)")
    eq.set_defaults(func=_equivalence)

    from cooper.cli import data_build_cmd, data_collect_cmd, data_label_cmd, data_samples_cmd

    data_build_cmd.register(dsub)
    data_collect_cmd.register(dsub)
    data_label_cmd.register(dsub)
    data_samples_cmd.register(dsub)


def _show(args: argparse.Namespace) -> int:
    from cooper.data.problems import load_problems
    from cooper.data.prompts import render_prompt

    problems = load_problems(args.dataset, args.split, fields=fields_from_args(args),
                             limit=args.n, skip_bad=args.skip_bad,
                             max_row_bytes=args.max_row_bytes)
    tokenizer = None
    if args.prompt:
        from cooper.infra.models import load_tokenizer

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


def _equivalence(args: argparse.Namespace) -> int:
    import random
    from pathlib import Path

    from cooper.data.equivalence import equivalence_rows
    from cooper.data.problems import load_problems
    from cooper.errors import UserError
    from cooper.infra.files import atomic_open

    if args.n < 2 or args.n % 2:
        raise UserError(f"--n must be a positive even number (equivalent and different answers "
                        f"come in pairs), got {args.n}")
    if not 0.0 <= args.working <= 1.0:
        raise UserError(f"--working is a share of the rows in [0, 1], got {args.working}")
    if args.numbers is not None and not 0.0 <= args.numbers <= 1.0:
        raise UserError(f"--numbers is a share of the problems in [0, 1], got {args.numbers}")
    check_out_file("--out", args.out)
    rows = equivalence_rows(list(load_problems(args.dataset, args.split)), args.n,
                            random.Random(args.seed), working=args.working,
                            numbers=args.numbers)
    if len(rows) < args.n:
        raise UserError(f"only {len(rows)} of the {args.n} rows could be made from "
                        f"{args.dataset}/{args.split} (its references must be integers or truth "
                        f"values); lower --n or use a larger split")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(out, "w") as f:
        for t in rows:
            f.write(json.dumps(t.to_json(), ensure_ascii=False) + "\n")
    right = sum(bool(t.label) for t in rows)
    print(f"wrote {len(rows)} rows ({right} equivalent, {len(rows) - right} different) from "
          f"{args.dataset}/{args.split} to {out}")
    return 0


def _perturbed(args: argparse.Namespace) -> int:
    import random
    from pathlib import Path

    from cooper.data.perturb import perturbed_triples
    from cooper.data.problems import is_local_file
    from cooper.errors import UserError
    from cooper.infra.files import atomic_open

    if not math.isfinite(args.min_change) or args.min_change < 0:
        raise UserError(f"--min-change must be a finite number >= 0 (0: any change), got "
                        f"{args.min_change:g}")
    if args.n < 2 or args.n % 2:
        raise UserError(f"--n must be a positive even number (gold and perturbed come in "
                        f"pairs), got {args.n}")
    check_out_file("--out", args.out)
    check_not_input({"--out": args.out},
                    {"--dataset": args.dataset if is_local_file(args.dataset) else None})
    problems = load_solved_problems(args)
    if args.n > 2 * len(problems):
        raise UserError(f"{problems.name} has {len(problems)} problems, so at most "
                        f"{2 * len(problems)} triples; lower --n")
    triples, skipped = perturbed_triples(problems, args.n, random.Random(args.seed),
                                         min_change=args.min_change)
    if skipped:
        reasons: dict[str, int] = {}
        for s in skipped:
            reasons[s.reason] = reasons.get(s.reason, 0) + 1
        print(f"skipped {len(skipped)} problem(s): "
              + ", ".join(f"{k}: {n}" for k, n in sorted(reasons.items())))
    if len(triples) < args.n:
        raise UserError(f"only {len(triples)} of the {args.n} triples could be made from "
                        f"{problems.name}; lower --n or use a larger split"
                        + (" or a smaller --min-change" if args.min_change > 0 else ""))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(out, "w") as f:
        for t in triples:
            f.write(json.dumps(t.to_json(), ensure_ascii=False) + "\n")
    print(f"wrote {len(triples)} triples ({len(triples) // 2} gold, {len(triples) // 2} "
          f"perturbed) from {problems.name} to {out}")
    return 0
