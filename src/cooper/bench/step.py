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
          "rm_update")
# what a Cooper step does beyond each baseline (the waits, so work hidden in the background
# does not count)
EXTRA_STAGES = {"rule": ("rm_score", "negatives", "rm_update"), "rm": ("negatives", "rm_update")}
PLAIN = {"rule": ["reward.monitor=false", "rm_update.pair_metrics=false"],
         "rm": ["rm_update.pair_metrics=false"], "cooper": []}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="bench_cpu", help="training preset (default: %(default)s)")
    p.add_argument("--steps", type=int, default=3, help="measured steps per mode (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=1, help="steps excluded first (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=1,
                   help="runs per mode, alternating modes; medians pool every measured step "
                        "(default: %(default)s)")
    p.add_argument("--modes", default="rule,rm,cooper", help="modes to run (default: %(default)s)")
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


def _run_mode(mode: str, args: argparse.Namespace, rm: str, out: Path) -> tuple[list[dict], float]:
    """One ``cooper train`` run: its measured steps' metrics and its peak RSS (MB)."""
    cmd = [sys.executable, "-m", "cooper", "train", "--config", args.preset,
           f"reward.mode={mode}", f"reward.model={rm}", f"output_dir={out}",
           f"max_steps={args.warmup + args.steps}", "validation.enabled=false", "report_to=none",
           *PLAIN[mode], *args.overrides]
    print(f"[bench step] {mode}: {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
    stop, peak = threading.Event(), []
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
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


def _summary(steps: list[dict], peak_mb: float, per_step: int) -> dict[str, Any]:
    """Medians over the measured steps (of every repeat) of one mode."""
    med = {s: statistics.median(r.get(f"perf/{s}", 0.0) for r in steps) for s in STAGES}
    gen_tps = statistics.median(
        r["completions/mean_length"] * per_step / r["perf/generation"] for r in steps)
    return {"stages_median_s": med,
            "step_median_s": statistics.median(r["perf/step"] for r in steps),
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
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(PLAIN)
    if unknown or args.steps < 1 or args.warmup < 0 or args.repeats < 1:
        from cooper.errors import UserError

        raise UserError(f"--modes takes rule,rm,cooper (got {args.modes}); --steps >= 1, "
                        "--warmup >= 0, --repeats >= 1")
    with tempfile.TemporaryDirectory(prefix="cooper-bench-step-") as tmp:
        work = Path(tmp)
        rm = args.rm or _default_rm(args.preset, work)
        steps: dict[str, list[dict]] = {m: [] for m in modes}
        peaks: dict[str, float] = {m: math.nan for m in modes}  # NaN: never sampled
        per_step = 0
        # modes alternate within each repeat, so a slow spell of the machine does not land on
        # one mode alone
        for r in range(args.repeats):
            for m in modes:
                run_dir = work / f"{m}-{r}"
                rows, peak = _run_mode(m, args, rm, run_dir)
                steps[m] += rows
                peaks[m] = max((p for p in (peaks[m], peak) if not math.isnan(p)),
                               default=math.nan)
                per_step = _completions_per_step(run_dir)
        results = {m: _summary(steps[m], peaks[m], per_step) for m in modes}
    out: dict[str, Any] = {"preset": args.preset, "steps": args.steps, "warmup": args.warmup,
                           "repeats": args.repeats,
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
    rows.append("| **step** | " + " | ".join(f"**{result['modes'][m]['step_median_s']:.2f}**"
                                             for m in modes) + " |")
    rows.append("| generated tokens/s | " + " | ".join(
        f"{result['modes'][m]['generated_tokens_per_s']:.1f}" for m in modes) + " |")
    rows.append("| peak RSS (MB) | " + " | ".join(
        "n/a" if result["modes"][m]["peak_rss_mb"] is None
        else f"{result['modes'][m]['peak_rss_mb']:.0f}" for m in modes) + " |")
    ratios = ", ".join(f"`{k}` = {v:.3f}" for k, v in result.items() if k.startswith("cooper_over"))
    return head + "\n".join(rows) + f"\n\n{ratios}\n"
