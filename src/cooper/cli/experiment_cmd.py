"""``cooper experiment hacking``: rule vs. fixed RM vs. Cooper (see :mod:`cooper.experiment`)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from cooper.config.experiment import list_experiment_presets

    p = sub.add_parser("experiment", help="experiments that compare training runs side by side",
                       description="Experiments made of several `cooper train` runs.")
    kinds = p.add_subparsers(dest="experiment", metavar="EXPERIMENT", required=True)
    h = kinds.add_parser(
        "hacking", help="reward hacking: rule vs. fixed reward model vs. Cooper",
        description="Train the same initial policy three times with the same seed, data, initial "
                    "reward model and step budget, paid by the verifier (rule), a frozen reward "
                    "model (rm) or the reward model updated online (cooper). Arms run one after "
                    "another; a rerun with the same settings skips what is complete and resumes "
                    "an interrupted arm from its last checkpoint. Then `cooper report OUT`.",
        epilog="example: cooper experiment hacking --preset hacking_cpu --out runs/hacking "
               "&& cooper report runs/hacking")
    h.add_argument("--preset", required=True,
                   help=f"experiment preset ({', '.join(list_experiment_presets())}) or a YAML file")
    h.add_argument("--out", required=True, help="experiment folder (created; reused on rerun)")
    h.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="settings to change, e.g. train.max_steps=50 arms=rm,cooper "
                        "setup.reward_model=DIR")
    h.add_argument("--print-config", action="store_true",
                   help="print the resolved settings as YAML and exit")
    h.add_argument("--no-report", action="store_true",
                   help="do not write the report at the end (`cooper report OUT` does it later)")
    h.set_defaults(func=_hacking)


def _hacking(args: argparse.Namespace) -> int:
    import yaml

    from cooper.config.experiment import load_experiment
    from cooper.experiment.hacking import run_experiment

    exp = load_experiment(args.preset, args.overrides)
    if args.print_config:
        print(yaml.safe_dump(exp.to_dict(), sort_keys=False), end="")
        return 0
    results = run_experiment(exp, args.out)
    for arm, r in results.items():
        print(f"{arm:>7}: {r['train']['steps']} steps, final average accuracy "
              f"{r['final_eval']['average']:.3f}")
    if not args.no_report:
        from cooper.experiment.report import build_report

        paths = build_report(args.out)
        print(f"report: {paths.html} (also {paths.markdown.name})")
    return 0
