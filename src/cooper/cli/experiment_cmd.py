"""``cooper experiment hacking``: rule vs. fixed RM vs. Cooper, per seed (see
:mod:`cooper.experiment`); ``cooper experiment rm-check``: each arm's reward model before and
after, on the same answers (:mod:`cooper.experiment.rm_check`)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from cooper.config.experiment import list_experiment_presets

    p = sub.add_parser("experiment", help="experiments that compare training runs side by side",
                       description="Experiments made of several `cooper train` runs.")
    kinds = p.add_subparsers(dest="experiment", metavar="EXPERIMENT", required=True)
    h = kinds.add_parser(
        "hacking", help="reward hacking: rule vs. fixed reward model vs. Cooper",
        description="Train the same initial policy once per arm with the same seed, data, "
                    "initial reward model and step budget; the preset declares the arms, each a "
                    "set of `cooper train` settings (e.g. paid by the verifier, a frozen reward "
                    "model or the reward model updated online). Every arm runs once per seed, "
                    "each seed with its own setup, in OUT/seed-S. A rerun with the same settings "
                    "skips what is complete and resumes an interrupted arm from its last "
                    "checkpoint (it may add seeds). Then `cooper report OUT`.",
        epilog="example: cooper experiment hacking --preset hacking_cpu --out runs/hacking "
               "--seeds 0,1,2 --jobs 2 && cooper report runs/hacking")
    h.add_argument("--preset", required=True,
                   help=f"experiment preset ({', '.join(list_experiment_presets())}) or a YAML file")
    h.add_argument("--out", required=True, help="experiment folder (created; reused on rerun)")
    h.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="settings to change, e.g. train.max_steps=50 setup.reward_model=DIR; "
                        "arms=rm,cooper runs only those of the preset's arms")
    h.add_argument("--seeds", default=None, metavar="S,S,...",
                   help="run every arm once per seed, e.g. 0,1,2 (the setting `seeds`; default: "
                        "train.seed alone)")
    h.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="stages (a seed's setup, an arm's run) at once, each in its own process "
                        "with cores/N torch threads (default 1: one after another, here)")
    h.add_argument("--print-config", action="store_true",
                   help="print the resolved settings as YAML and exit")
    h.add_argument("--setup-only", action="store_true",
                   help="build and check every seed's setup (initial policy, reward model, "
                        "probe), print their figures and stop; a later run without it reuses them")
    h.add_argument("--no-report", action="store_true",
                   help="do not write the report at the end (`cooper report OUT` does it later)")
    h.set_defaults(func=_hacking)
    c = kinds.add_parser(
        "rm-check", help="each arm's reward model before and after, on the same answers",
        description="Score one fixed set of test answers with the seed's initial reward model "
                    "and with each finished arm's final one: recall on the right answers the "
                    "rule rejects and false positives on the wrong answers it cannot read, "
                    "with the answers gained and lost and an exact sign test. The answers: the "
                    "initial policy's and the arm's final policy's samples on the test "
                    "benchmarks, judged by the gold judge (a blind-rule preset such as "
                    "blind_cpu). Writes rm_check.json into each arm's folder; `cooper report "
                    "OUT` then shows it.",
        epilog="example: cooper experiment rm-check runs/blind --arms judged")
    c.add_argument("out", metavar="OUT", help="experiment folder")
    c.add_argument("--arms", default=None, metavar="A,B,...",
                   help="those arms only (default: every finished arm whose reward model is "
                        "updated online)")
    c.add_argument("--seeds", default=None, metavar="S,S,...",
                   help="those seeds only (default: every seed of the folder)")
    c.set_defaults(func=_rm_check)


def _hacking(args: argparse.Namespace) -> int:
    import yaml

    from cooper.config.experiment import load_experiment
    from cooper.experiment.hacking import run_experiment

    overrides = [*args.overrides, *([f"seeds={args.seeds}"] if args.seeds is not None else [])]
    exp = load_experiment(args.preset, overrides)
    if args.print_config:
        print(yaml.safe_dump(exp.to_dict(), sort_keys=False), end="")
        return 0
    results = run_experiment(exp, args.out, jobs=args.jobs, setup_only=args.setup_only)
    if args.setup_only:
        from cooper.experiment.setup import setup_summary

        for seed in exp.seed_list:
            print(f"seed {seed}: {setup_summary(args.out, seed)}")
        return 0
    width = max(len(a) for a in exp.arm_list)
    for seed, arms in results.items():
        for arm, r in arms.items():
            last = r.get("final_eval_last")
            mean = (f", mean of the last {len(last['points'])} policies {last['average']:.3f} "
                    f"(sd {last['sd']:.3f})" if last else "")
            print(f"seed {seed} {arm:>{width}}: {r['train']['steps']} steps, final policy's "
                  f"average accuracy {r['final_eval']['average']:.3f}{mean}")
    if not args.no_report:
        from cooper.report.experiment_report import build_report

        paths = build_report(args.out)
        print(f"report: {paths.html} (also {paths.markdown.name})")
    return 0


def _rm_check(args: argparse.Namespace) -> int:
    from cooper.config.experiment import parse_seeds
    from cooper.experiment.rm_check import run_rm_check
    from cooper.report.rm_check_table import reachable_rows, rm_check_rows, trigger_sentences

    arms = [a.strip() for a in args.arms.split(",") if a.strip()] if args.arms else None
    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    results = run_rm_check(args.out, arms=arms, seeds=seeds)
    flat = [r for by_arm in results.values() for r in by_arm.values()]
    for rows in (rm_check_rows(flat), reachable_rows(flat)):
        if len(rows) < 2:
            continue
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            print("  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)).rstrip())
        print()
    for line in trigger_sentences(flat):
        print(line)
    print(f"written: {args.out}/seed-S/arms/ARM/rm_check.json; `cooper report {args.out}` "
          "shows them")
    return 0
