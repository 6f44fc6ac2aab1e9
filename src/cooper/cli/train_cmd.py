"""``cooper train``: GRPO with a rule, fixed-RM or Cooper reward (see :mod:`cooper.rl.runner`)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from cooper.config import list_presets

    p = sub.add_parser(
        "train", help="RL training: GRPO with a rule, fixed reward-model or Cooper reward",
        description="Train a policy with GRPO (TRL). reward.mode=rule uses the verifier, rm a "
                    "fixed reward model, cooper a reward model updated every step on verified "
                    "positives and assistant-written negatives. Settings come from a preset "
                    "(--config) and key=value overrides; `cooper train --settings` lists them.",
        epilog="example: cooper train --config demo_cpu reward.mode=cooper "
               "reward.model=runs/rm max_steps=2 output_dir=runs/try")
    p.add_argument("--config", default=None,
                   help=f"preset name ({', '.join(list_presets())}) or a YAML file")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="settings to change, e.g. reward.mode=rm rollout.samples_per_prompt=8")
    p.add_argument("--resume", action="store_true",
                   help="continue from the last complete checkpoint in output_dir")
    p.add_argument("--skip-bad", action="store_true",
                   help="skip malformed training rows, counting and logging them, instead of "
                        "stopping (same as data.skip_bad=true)")
    p.add_argument("--print-config", action="store_true",
                   help="print the resolved settings as YAML and exit")
    p.add_argument("--settings", action="store_true",
                   help="list every setting with its default and meaning, and exit")
    p.set_defaults(func=_train)


def _train(args: argparse.Namespace) -> int:
    import yaml

    from cooper.config import TrainConfig, get_key, load_config
    from cooper.config.train import field_docs, recorded_grpo

    if args.settings:
        from cooper.config.train import experimental_settings

        defaults, docs, apart = TrainConfig(), field_docs(), experimental_settings()
        for key in [k for k in docs if k not in apart]:
            print(f"{key} = {get_key(defaults, key)!r}\n    {docs[key]}")
        print("\n# experimental: testbed stand-ins and finer choices of the method, rarely changed")
        for key in [k for k in docs if k in apart]:
            print(f"{key} = {get_key(defaults, key)!r}\n    {docs[key]}")
        return 0
    # a bad row's error message names --skip-bad, so the flag must exist here too
    overrides = [*args.overrides, "data.skip_bad=true"] if args.skip_bad else args.overrides
    cfg = load_config(args.config, overrides)
    recorded = recorded_grpo(args.config)
    if recorded is not None:  # a run's config.yaml: its record must match its own settings
        from cooper.rl.trainer import check_recorded_grpo

        check_recorded_grpo(load_config(args.config), recorded, args.config)
    if args.print_config:
        from cooper.rl.trainer import pinned_grpo_settings

        cfg.validate()
        print(yaml.safe_dump({**cfg.to_dict(), "grpo": pinned_grpo_settings(cfg)},
                             sort_keys=False), end="")
        return 0
    from cooper.infra.collective import leave_process_group
    from cooper.rl.runner import run

    result = run(cfg, resume=args.resume)
    # the trainer is out of reach now: under accelerate launch, end the process group (without
    # it, or in the other order, a finished process can abort or hang at exit)
    leave_process_group()
    steps = f"{result.steps} step{'s' * (result.steps != 1)}"
    if result.already_finished:
        from cooper.rl.checkpoints import complete_checkpoints

        on = ("raise max_steps to train on from its last checkpoint"
              if complete_checkpoints(result.output_dir) else
              "it kept no checkpoint (save_steps=0), so training on needs another output_dir")
        print(f"nothing to resume: {result.output_dir} finished its {steps} (its policy is in "
              f"policy/); {on}")
        return 0
    print(f"trained {steps} in {result.seconds:.0f} s; run folder: {result.output_dir}")
    return 0
