"""What a training run prints: one plain line per step under a progress bar.

TRL's default prints every step's raw metrics dictionary (some 40 keys on one line). The
console shows what a reader of Cooper needs per step instead: the reward the policy was paid,
the verified accuracy of the same rollouts, the hacking signals, the pairs the reward model
learned from and its loss, and the step's seconds; validations get a line of their own. Every
metric still goes to ``metrics.jsonl`` and the ``report_to`` backends; ``cooper -v`` also prints
TRL's dictionary.
"""

from __future__ import annotations

import math
from typing import Any

from tqdm.auto import tqdm
from transformers import TrainerCallback

# (metric, label, format) in the order they are printed; a metric absent this step is skipped
STEP_FIELDS = (
    ("reward", "reward", "{:.3f}"),
    ("reward/rule_mean", "verified", "{:.3f}"),
    ("hacking/gap", "gap", "{:+.3f}"),
    ("hacking/top_wrong", "top-wrong", "{:.2f}"),
    ("rm/pairs", "pairs", "{:.0f}"),
    ("rm/loss", "rm loss", "{:.3f}"),
    ("perf/step", "", "{:.1f} s"),
)
VALIDATION_FIELDS = (
    ("val/accuracy", "held-out accuracy", "{:.3f}"),
    ("val/rm_probe_accuracy", "probe accuracy", "{:.3f}"),
    ("val/rm_probe_auroc", "probe AUROC", "{:.3f}"),
)


def _fields(logs: dict[str, Any], fields) -> list[str]:
    out = []
    for key, label, fmt in fields:
        value = logs.get(key)
        if isinstance(value, int | float) and math.isfinite(value):
            out.append(f"{label} {fmt.format(value)}".strip())
    return out


def step_line(step: int, max_steps: int, logs: dict[str, Any]) -> str | None:
    """The console line for one logged step (None for a record that is not a step's)."""
    parts = _fields(logs, STEP_FIELDS)
    validation = _fields(logs, VALIDATION_FIELDS)
    if not parts and not validation:
        return None
    line = f"step {step}/{max_steps}" + ("  " + "  ".join(parts) if parts else "")
    if validation:
        line += ("\n" if parts else "") + f"  validation at step {step}: " + "  ".join(validation)
    return line


class ConsoleCallback(TrainerCallback):
    """A progress bar over the steps, and :func:`step_line` written above it (main process)."""

    def __init__(self):
        self.bar: tqdm | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.bar = tqdm(total=state.max_steps, initial=state.global_step, unit="step",
                            dynamic_ncols=True, desc="training")

    def on_step_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.update(state.global_step - self.bar.n)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not (state.is_world_process_zero and logs) or "train_runtime" in logs:
            return
        line = step_line(state.global_step, state.max_steps, logs)
        if line:
            (self.bar.write if self.bar is not None else print)(line)

    def on_train_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.close()
            self.bar = None
