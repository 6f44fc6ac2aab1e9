"""Step time of rule, fixed-RM and Cooper training on identical workloads, stage by stage.

Each mode runs ``cooper train`` in its own process with the same preset, seed, prompts, samples
per prompt and lengths; the first ``--warmup`` steps (model loading, the verifier pool starting,
allocator warm-up) are excluded. The preset sets the policy's learning rate to 0: the optimiser
still does all its work, but the policy stays the same, so every mode samples exactly the same
rollouts and the comparison is not blurred by policies drifting apart. The ``rule`` and ``rm``
modes run as plain GRPO (no reward-model monitoring, no pair measurement), so the ratios are
Cooper's cost over what a user would otherwise run.

Per stage it reports the median over measured steps of the ``perf/`` metrics the trainer logs
(see docs/metrics.md), the step median, generated tokens per second and the peak resident memory
of the training process tree (verifier workers included), sampled every 0.2 s. Besides the
ratios of step medians it gives each ratio from the stages Cooper adds to the baseline
(``cooper_over_rm_from_stages``: the baseline's step plus the median of Cooper's negatives wait
and reward-model update), which the machine's drift between runs does not move. ``--repeats``
runs every mode several times, alternating, and pools the measured steps.

An experiment preset (``--preset hacking_cpu``) times its arms instead of the three modes, each
with the arm's own ``cooper train`` settings on one seed's setup (``--setup OUT/seed-S`` reuses
an experiment's; without it one is built first, minutes), and the settings after the options
are the experiment's (``train.rollout.prompts_per_step=2``, ``setup.policy=DIR``). Every mode
or arm also reports its step split in two: the policy's side (generation, log-probabilities and
the policy's update) and the reward model's (scoring, negatives and its update), so that a
change to either is measured the same way. ``--threads 1`` runs each as one arm of
``cooper experiment hacking --jobs 2`` on two cores does.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

STAGES = ("generation", "logprobs", "verify", "rm_score", "policy_update", "negatives",
          "rm_update", "judge")
# a step in two: what the policy costs and what the reward model costs (waits, as timed)
POLICY_SIDE = ("generation", "logprobs", "policy_update")
RM_SIDE = ("rm_score", "negatives", "rm_update", "judge")  # the judge labels beyond the rule
# what a Cooper step does beyond each baseline (the waits, so work hidden in the background
# does not count)
EXTRA_STAGES = {"rule": ("rm_score", "negatives", "rm_update"), "rm": ("negatives", "rm_update")}
PLAIN = {"rule": ["reward.monitor=false", "rm_update.pair_metrics=false"],
         "rm": ["rm_update.pair_metrics=false"], "cooper": []}
# Settings the bench gives each run itself, and why; a user's value is refused. The bench's
# own come after the user's on the `cooper train` line (_bench_settings), so they would
# override it unseen, and a user's reward.mode would run every mode alike under three names.
# An experiment preset's settings hold the first four under train.
RESERVED = {"max_steps": "each run takes --warmup + --steps steps",
            "output_dir": "each run writes into the bench's temporary folder",
            "validation.enabled": "the bench times training steps, without validation",
            "report_to": "the bench reads only metrics.jsonl"}
MODE_RESERVED = {"reward.mode": "each mode sets its own; choose them with --modes",
                 "reward.model": "give the reward model with --rm"}
ARM_RESERVED = {"seeds": "the bench times one seed; give it with --seed",
                "train.seed": "the bench times one seed; give it with --seed",
                "train.keep_policy_steps": "a few timed steps keep no policy"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="bench_cpu", help="training preset (default: %(default)s)")
    p.add_argument("--steps", type=int, default=3, help="measured steps per mode (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=1, help="steps excluded first (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=1,
                   help="runs per mode, alternating modes; medians pool every measured step "
                        "(default: %(default)s)")
    p.add_argument("--modes", default=None,
                   help="modes to run (default: rule,rm,cooper), or with an experiment preset "
                        "the arms to run (default: all of them)")
    p.add_argument("--setup", default=None,
                   help="experiment presets: a seed's folder of that experiment (OUT/seed-S) "
                        "whose setup is reused (default: build one, minutes)")
    p.add_argument("--seed", type=int, default=None, help="experiment presets: the seed whose "
                   "setup is built and trained (default: the one of --setup's seed-S folder, "
                   "else 0)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads of each run (default: torch's; 1 matches an arm of "
                        "`cooper experiment hacking --jobs 2` on 2 cores)")
    p.add_argument("--rm", default=None,
                   help="reward-model folder (default: one built from the policy checkpoint; its "
                        "quality does not change the work a step does)")
    p.add_argument("--markdown", default=None, help="also write a markdown table to this file")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="extra training settings")


def _peak_rss_mb(proc: subprocess.Popen, stop: threading.Event, out: list[float]) -> None:
    import psutil

    peak = 0
    try:
        root = psutil.Process(proc.pid)
        while not stop.is_set():
            try:
                tree = [root, *root.children(recursive=True)]
                peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
            except psutil.Error:
                pass
            time.sleep(0.2)
    except psutil.Error:
        pass
    out.append(peak / 2**20)


def _run_mode(mode: str, args: argparse.Namespace, settings: list[str],
              out: Path) -> tuple[list[dict], float]:
    """One ``cooper train`` run with ``settings`` (a preset or settings file and the mode's
    keys): its measured steps' metrics and its peak RSS (MB)."""
    import os

    cmd = [sys.executable, "-m", "cooper", "train", *settings, f"output_dir={out}",
           *_bench_settings(args)]
    env = dict(os.environ)
    if args.threads is not None:
        env.update(OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    print(f"[bench step] {mode}: {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
    stop, peak = threading.Event(), []
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env)
    watcher = threading.Thread(target=_peak_rss_mb, args=(proc, stop, peak), daemon=True)
    watcher.start()
    _, err = proc.communicate()
    stop.set()
    watcher.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} run failed ({proc.returncode}):\n{err[-3000:]}")
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "loss" in r and r["step"] > args.warmup]
    return steps, peak[0] if peak else math.nan


def _bench_settings(args: argparse.Namespace) -> list[str]:
    """The settings every run gets after the user's (its output_dir aside)."""
    return [f"max_steps={args.warmup + args.steps}", "validation.enabled=false",
            "report_to=none"]


def check_overrides(overrides: list[str], experiment: bool) -> None:
    """Refuse a setting the bench gives each run itself (:data:`RESERVED`, and those of the
    preset's kind), saying why, before anything runs."""
    from cooper.errors import UserError

    reserved = ({**{f"train.{k}": why for k, why in RESERVED.items()}, **ARM_RESERVED}
                if experiment else {**RESERVED, **MODE_RESERVED})
    for item in overrides:
        key = item.split("=", 1)[0].strip()
        # a section set whole (validation={...}) holds the reserved key too
        hit = next((k for k in reserved if k == key or k.startswith(key + ".")), None)
        if hit:
            raise UserError(f"{item}: the bench sets {hit} itself ({reserved[hit]}); drop it")


def _mode_settings(args: argparse.Namespace, work: Path) -> dict[str, list[str]]:
    """What each mode's ``cooper train`` run gets: a training preset with the mode's reward
    settings and the overrides, or an experiment preset's arms as settings files. The
    overrides are checked first, so a bad one fails before a reward model or setup is built."""
    from cooper.config.experiment import list_experiment_presets
    from cooper.config.train import load_config

    preset = Path(args.preset)
    experiment = args.preset in list_experiment_presets() or (
        preset.suffix in (".yaml", ".yml") and preset.is_file()
        and "arms" in (_yaml(preset) or {}))
    check_overrides(args.overrides, experiment)
    if experiment:
        return _arm_settings(args, work)
    modes = [m for m in (args.modes or "rule,rm,cooper").split(",") if m]
    unknown = set(modes) - set(PLAIN)
    if unknown:
        from cooper.errors import UserError

        raise UserError(f"--modes takes rule,rm,cooper with a training preset (got "
                        f"{args.modes}); an experiment preset takes its arms")
    settings = {m: [f"reward.mode={m}", *PLAIN[m], *args.overrides] for m in modes}
    for keys in settings.values():  # what `cooper train` would refuse, refused here
        load_config(args.preset, [*keys, f"reward.model={args.rm or 'RM'}",
                                  *_bench_settings(args)]).validate()
    rm = args.rm or _default_rm(args.preset, work)
    return {m: ["--config", args.preset, f"reward.model={rm}", *keys]
            for m, keys in settings.items()}


def _yaml(path: Path) -> Any:
    import yaml

    return yaml.safe_load(path.read_text())


def setup_seed(setup: str | None, seed: int | None) -> int:
    """The seed an experiment preset's arms are timed with: ``--seed``, else the one of the
    ``--setup`` folder's name (``seed-S``: the seed its setup was built for), else 0. A
    ``--seed`` that differs from the folder's would train another seed's arms on that setup,
    which no experiment does: refused."""
    from cooper.errors import UserError

    name = Path(setup).name if setup else ""
    folder = int(name[5:]) if name.startswith("seed-") and name[5:].isdigit() else None
    if seed is not None and folder is not None and seed != folder:
        raise UserError(f"--setup {setup} is seed {folder}'s setup and --seed is {seed}: drop "
                        "--seed (it follows the folder) or give the same seed")
    return seed if seed is not None else folder if folder is not None else 0


def _arm_settings(args: argparse.Namespace, work: Path) -> dict[str, list[str]]:
    """An experiment preset's arms on one seed's setup, each as a ``cooper train`` settings
    file written into ``work``: what ``cooper experiment hacking`` runs for that arm."""
    import yaml

    from cooper.config.experiment import load_experiment
    from cooper.errors import UserError
    from cooper.experiment.hacking import arm_config
    from cooper.experiment.setup import run_setup

    args.seed = setup_seed(args.setup, args.seed)
    exp = load_experiment(args.preset, args.overrides).for_seed(args.seed).validate()
    arms = [a for a in (args.modes or ",".join(exp.arms)).split(",") if a]
    unknown = sorted(set(arms) - set(exp.arms))
    if unknown:
        raise UserError(f"{args.preset} has no arm {', '.join(unknown)}; its arms: "
                        f"{', '.join(exp.arms)}")
    seed_dir = Path(args.setup) if args.setup else work / f"seed-{args.seed}"
    if args.setup and not (seed_dir / "setup" / "setup.json").is_file():
        raise UserError(f"--setup {seed_dir} holds no built setup (setup/setup.json): give an "
                        "experiment's OUT/seed-S folder, or leave --setup out to build one")
    setup = run_setup(exp, seed_dir)
    settings = {}
    for arm in arms:
        path = work / f"arm-{arm}.yaml"
        cfg = arm_config(exp, arm, seed_dir, setup)
        cfg.keep_policy_steps = None  # a few timed steps: none of the final evaluation's
        path.write_text(yaml.safe_dump(cfg.to_dict()))
        settings[arm] = ["--config", str(path)]
    return settings


def _summary(steps: list[dict], peak_mb: float, per_step: int) -> dict[str, Any]:
    """Medians over the measured steps (of every repeat) of one mode."""
    med = {s: statistics.median(r.get(f"perf/{s}", 0.0) for r in steps) for s in STAGES}

    def side(stages: tuple[str, ...]) -> float:
        return statistics.median(sum(r.get(f"perf/{s}", 0.0) for s in stages) for r in steps)

    gen_tps = statistics.median(
        r["completions/mean_length"] * per_step / r["perf/generation"] for r in steps)
    return {"stages_median_s": med,
            "step_median_s": statistics.median(r["perf/step"] for r in steps),
            "policy_side_median_s": side(POLICY_SIDE),
            "rm_side_median_s": side(RM_SIDE),
            # what the run's wall time pays: a stage run every Nth step only (the rule arm's
            # reward.monitor_every) shows in the mean, not in the median
            "step_mean_s": statistics.mean(r["perf/step"] for r in steps),
            "rm_side_mean_s": statistics.mean(sum(r.get(f"perf/{s}", 0.0) for s in RM_SIDE)
                                              for r in steps),
            "generated_tokens_per_s": gen_tps,
            "mean_completion_tokens": statistics.mean(r["completions/mean_length"] for r in steps),
            "pairs_per_step": statistics.mean(r.get("rm/pairs", 0.0) for r in steps),
            "peak_rss_mb": None if math.isnan(peak_mb) else peak_mb,
            "measured_steps": len(steps),
            # every measured step, so the spread behind each median can be seen
            "per_step": [{k: round(r.get(f"perf/{k}", 0.0), 3)
                          for k in (*STAGES, "negatives_total", "step")} for r in steps]}


def _completions_per_step(run: Path) -> int:
    import yaml

    cfg = yaml.safe_load((run / "config.yaml").read_text())
    return cfg["rollout"]["prompts_per_step"] * cfg["rollout"]["samples_per_prompt"]


def _default_rm(preset: str, work: Path) -> str:
    """A reward model with a fresh score head on the preset's policy checkpoint."""
    from cooper.config.train import load_config
    from cooper.rm.model import RewardModel

    policy = load_config(preset).policy.model
    path = work / "rm"
    RewardModel.load(policy).save(path)
    return str(path)


def run(args: argparse.Namespace) -> dict[str, Any]:
    if (args.steps < 1 or args.warmup < 0 or args.repeats < 1
            or (args.threads is not None and args.threads < 1)):
        from cooper.errors import UserError

        raise UserError("--steps >= 1, --warmup >= 0, --repeats >= 1, --threads >= 1")
    with tempfile.TemporaryDirectory(prefix="cooper-bench-step-") as tmp:
        work = Path(tmp)
        settings = _mode_settings(args, work)
        modes = list(settings)
        steps: dict[str, list[dict]] = {m: [] for m in modes}
        peaks: dict[str, float] = {m: math.nan for m in modes}  # NaN: never sampled
        per_step = 0
        # modes alternate within each repeat, so a slow spell of the machine does not land on
        # one mode alone
        for r in range(args.repeats):
            for m in modes:
                run_dir = work / f"{m}-{r}"
                rows, peak = _run_mode(m, args, settings[m], run_dir)
                steps[m] += rows
                peaks[m] = max((p for p in (peaks[m], peak) if not math.isnan(p)),
                               default=math.nan)
                per_step = _completions_per_step(run_dir)
        results = {m: _summary(steps[m], peaks[m], per_step) for m in modes}
    out: dict[str, Any] = {"preset": args.preset, "steps": args.steps, "warmup": args.warmup,
                           "repeats": args.repeats, "threads": args.threads,
                           "setup": args.setup, "seed": args.seed,
                           "overrides": args.overrides, "modes": results}
    step = {m: r["step_median_s"] for m, r in results.items()}
    if "cooper" in step:
        cooper = results["cooper"]["per_step"]
        for base in ("rule", "rm"):
            if base in step:
                out[f"cooper_over_{base}"] = step["cooper"] / step[base]
                # The same ratio from the stages Cooper adds to this baseline: the shared
                # stages do the same work on the same rollouts, so their run-to-run drift (large
                # on a busy machine) cancels out.
                extra = statistics.median(sum(r[s] for s in EXTRA_STAGES[base]) for r in cooper)
                out[f"cooper_over_{base}_from_stages"] = (step[base] + extra) / step[base]
    if args.markdown:
        Path(args.markdown).write_text(markdown_table(out))
    return out


def markdown_table(result: dict[str, Any]) -> str:
    modes = list(result["modes"])
    head = "| stage (median s) | " + " | ".join(modes) + " |\n|---|" + "---|" * len(modes) + "\n"
    rows = [f"| {s} | " + " | ".join(f"{result['modes'][m]['stages_median_s'][s]:.2f}"
                                     for m in modes) + " |" for s in STAGES]
    rows.append("| policy's side | " + " | ".join(
        f"{result['modes'][m]['policy_side_median_s']:.2f}" for m in modes) + " |")
    rows.append("| reward model's side | " + " | ".join(
        f"{result['modes'][m]['rm_side_median_s']:.2f}" for m in modes) + " |")
    rows.append("| **step** | " + " | ".join(f"**{result['modes'][m]['step_median_s']:.2f}**"
                                             for m in modes) + " |")
    rows.append("| step, mean | " + " | ".join(f"{result['modes'][m]['step_mean_s']:.2f}"
                                               for m in modes) + " |")
    rows.append("| generated tokens/s | " + " | ".join(
        f"{result['modes'][m]['generated_tokens_per_s']:.1f}" for m in modes) + " |")
    rows.append("| peak RSS (MB) | " + " | ".join(
        "n/a" if result["modes"][m]["peak_rss_mb"] is None
        else f"{result['modes'][m]['peak_rss_mb']:.0f}" for m in modes) + " |")
    ratios = ", ".join(f"`{k}` = {v:.3f}" for k, v in result.items() if k.startswith("cooper_over"))
    return head + "\n".join(rows) + f"\n\n{ratios}\n"
