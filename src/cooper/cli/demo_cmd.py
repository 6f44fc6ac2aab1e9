"""``cooper demo``: the whole pipeline on the embedded model (see :mod:`cooper.experiment.demo`)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from cooper.config.demo import DemoSettings

    d = DemoSettings()
    p = sub.add_parser(
        "demo", help="the whole pipeline on the embedded model in minutes: data, VerifyRM, "
                     "robustness check, Cooper RL, report, verdicts",
        description="Prepare the embedded SmolLM2-135M-Instruct, warm-start it briefly on the "
                    "task's worked solutions (the Cooper stage's policy, right on some rollouts "
                    "and wrong on others), build the reward model's labelled set (the project's "
                    "recipe), train a small VerifyRM, check it against the robustness suite and "
                    "held-out real completions, run a few Cooper steps and write their report "
                    "(as `cooper report`), then print the steps one by one, where every artefact "
                    "went and the verdicts: is the reward model trusted, did Cooper make pairs "
                    "and update it on 5 of every 6 steps, does it agree with the verifier on the "
                    "policy's rollouts. Minutes on a 2-core CPU (README, 'cooper demo').")
    p.add_argument("--out", default=d.out, help="folder for every artefact (default: %(default)s)")
    p.add_argument("--steps", type=int, default=d.steps, help="Cooper steps (default: %(default)s)")
    p.add_argument("--warm-steps", type=int, default=d.warm_steps, metavar="N",
                   help="steps of the policy's warm start on the task's worked solutions before "
                        "Cooper, so that it is right on some rollouts, not most (default: "
                        "%(default)s; 0: the embedded model as it ships, right on 2-6%% of them)")
    p.add_argument("--rm-triples", type=int, default=d.rm_triples,
                   help="labelled triples for the reward model (default: %(default)s)")
    p.add_argument("--rm-trunk", type=int, default=d.rm_trunk, metavar="K",
                   help="the reward model on the embedded model's first K layers, the top "
                        f"{d.rm_train_layers} trained (default: %(default)s; 0: the whole "
                        "model, as the recipe)")
    p.add_argument("--rm-samples", default=d.rm_samples, metavar="embedded|none|FILE",
                   help="the embedded model's own completions in the reward model's data: the "
                        "ones that ship for the task, none (the gold-only mix), or a `cooper "
                        "data collect` file (default: %(default)s)")
    p.add_argument("--dataset", default=d.dataset,
                   help="task of every stage (default: %(default)s, where the embedded model has "
                        "some signal)")
    p.add_argument("--negatives", default=d.negatives, choices=("assistant", "rollouts", "both"),
                   help="rm_update.negatives of the Cooper run (default: %(default)s; the "
                        "paper's: assistant)")
    p.add_argument("--dtype", default=d.dtype, choices=("auto", "float32", "bfloat16"),
                   help="precision of the reward model and the Cooper run: auto is bfloat16 "
                        "where the CPU multiplies it in hardware (AVX512-BF16, AMX), else "
                        "float32 (default: %(default)s)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    from cooper.config.demo import DemoSettings
    from cooper.experiment.demo import run_demo
    from cooper.experiment.demo_summary import verdict_lines

    summary = run_demo(DemoSettings(out=args.out, steps=args.steps, warm_steps=args.warm_steps,
                                    rm_triples=args.rm_triples,
                                    rm_samples=args.rm_samples, rm_trunk=args.rm_trunk or None,
                                    dataset=args.dataset, negatives=args.negatives,
                                    dtype=args.dtype, seed=args.seed))
    print()
    print(summary.text())
    print(f"  every figure: {args.out}/summary.json")
    print(f"  training metrics: {args.out}/cooper/metrics.jsonl")
    print()
    for line in summary.figures["verdicts"]:
        print(verdict_lines(line))
    return 0
