"""``cooper demo``: the whole pipeline on the embedded model (see :mod:`cooper.experiment.demo`)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from cooper.config.demo import DemoSettings

    d = DemoSettings()
    p = sub.add_parser(
        "demo", help="the whole pipeline on the embedded model in minutes: data, VerifyRM, "
                     "Cooper RL, evaluation",
        description="Prepare the embedded SmolLM2-135M-Instruct, build a labelled set, train a "
                    "small VerifyRM, evaluate the policy, run a few Cooper steps and write "
                    "their report (as `cooper report`), evaluate again, and print where every "
                    "artefact went. About 5.5 minutes on an idle 2-core CPU, longer when the "
                    "cores are shared.")
    p.add_argument("--out", default=d.out, help="folder for every artefact (default: %(default)s)")
    p.add_argument("--steps", type=int, default=d.steps, help="Cooper steps (default: %(default)s)")
    p.add_argument("--rm-triples", type=int, default=d.rm_triples,
                   help="labelled triples for the reward model (default: %(default)s)")
    p.add_argument("--dataset", default=d.dataset,
                   help="task of every stage (default: %(default)s, where the embedded model has "
                        "some signal)")
    p.add_argument("--eval-problems", type=int, default=d.eval_problems,
                   help="test problems evaluated before and after (default: %(default)s)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    from cooper.config.demo import DemoSettings
    from cooper.experiment.demo import run_demo

    summary = run_demo(DemoSettings(out=args.out, steps=args.steps, rm_triples=args.rm_triples,
                                    dataset=args.dataset, eval_problems=args.eval_problems,
                                    seed=args.seed))
    print()
    print(summary.table())
    print(f"\nsummary: {args.out}/summary.json; training metrics: {args.out}/cooper/metrics.jsonl; "
          f"report of the Cooper run: {args.out}/cooper/report/report.html")
    return 0
