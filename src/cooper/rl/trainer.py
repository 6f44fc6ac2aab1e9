"""Cooper on TRL's GRPOTrainer: reward functions, the Stage-2 callback, timing, checkpoints.

How the pieces meet (verified on trl 1.16):

- TRL calls every reward function once per optimiser step on each process, with that process's
  slice of the rollouts and every dataset column as a keyword argument. Two thin callables wrap
  one :class:`~cooper.rl.step.CooperReward`: ``rule`` (the verifier) and ``reward_model``.
  The one not optimised gets weight 0, so it is logged but not trained on: every run shows the
  verifier next to the reward it optimises. A reward model passed directly in ``reward_funcs``
  would never see the reference answer, hence the callables.
- :class:`Stage2Callback.on_step_end` runs after the policy's optimiser step and before TRL logs,
  so the reward-model update of step t lands in step t's metrics.
- :class:`CooperTrainer` adds per-stage timing (``perf/``), writes each checkpoint into a staging
  folder and renames it into place only once complete (policy, optimiser, RNG states, reward model
  and its optimiser), and restores the reward model on resume.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from trl import GRPOTrainer

from cooper.errors import UserError
from cooper.rl.step import CooperReward

log = logging.getLogger(__name__)

COMPLETE_MARKER = "cooper-checkpoint.json"
RM_FOLDER = "reward_model"
RM_OPTIMIZER = "reward_model_optimizer.pt"
STAGING = ".staging"  # checkpoints are written here, then renamed into the run folder


# ------------------------------------------------------------------ reward functions

def _completion_text(completion: Any) -> str:
    """TRL passes conversational completions as message lists, plain ones as strings."""
    if isinstance(completion, list):
        return "".join(m.get("content", "") for m in completion if isinstance(m, dict))
    return str(completion)


class _Batch:
    """Stage 1 runs once per batch, whichever reward function TRL calls first."""

    def __init__(self, cooper: CooperReward, trainer_ref: dict[str, Any]):
        self.cooper, self.trainer_ref = cooper, trainer_ref
        self._key: tuple | None = None
        self._rollouts: list = []

    def rollouts(self, completions, problem_id, question, reference, log_metric, trainer_state):
        texts = [_completion_text(c) for c in completions]
        key = (tuple(problem_id), tuple(texts))
        if key != self._key:
            rollouts, stats, seconds = self.cooper.score(
                problem_id, question, reference, texts, step=trainer_state.global_step)
            self._key, self._rollouts = key, rollouts
            _log_rollout_stats(log_metric, stats, seconds)
        return self._rollouts


def _log_rollout_stats(log_metric, stats, seconds: dict[str, float]) -> None:
    log_metric("reward/rule_mean", stats.rule_mean)
    if stats.rm_mean is not None:
        log_metric("reward/rm_mean", stats.rm_mean)
        log_metric("hacking/gap", stats.rm_mean - stats.rule_mean)
        log_metric("rm/agreement", stats.agreement)
    if stats.rm_mean is not None or stats.nonfinite_scores:  # counted even when all are
        log_metric("reward/nonfinite", stats.nonfinite_scores)
    log_metric("rm/problems_with_positive", stats.problems_with_positive)
    for name, value in seconds.items():
        log_metric(f"perf/{name}", value)


def reward_functions(batch: _Batch) -> tuple[list, list[float]]:
    """TRL reward callables and their weights for the configured mode."""

    def rule(prompts, completions, problem_id, question, reference, trainer_state, log_metric,
             **_):
        rollouts = batch.rollouts(completions, problem_id, question, reference, log_metric,
                                  trainer_state)
        if cooper.mode == "rule":
            return [float(r.correct) for r in rollouts]
        # The verdict is only logged here (weight 0). Where the reward model's score is not
        # finite the row must be unscorable in *every* column: TRL then gives it zero advantage
        # and leaves it out of its group's mean. A finite verdict beside a NaN score would be
        # summed into a reward of 0 instead, the lowest a probability can be.
        return [float(r.correct) if r.rm_score is not None and math.isfinite(r.rm_score)
                else None for r in rollouts]

    def reward_model(prompts, completions, problem_id, question, reference, trainer_state,
                     log_metric, **_):
        rollouts = batch.rollouts(completions, problem_id, question, reference, log_metric,
                                  trainer_state)
        return batch.cooper.rewards(rollouts)

    cooper = batch.cooper
    if not cooper.use_rm:
        return [rule], [1.0]
    weights = [1.0, 0.0] if cooper.mode == "rule" else [0.0, 1.0]
    return [rule, reward_model], weights


# ------------------------------------------------------------------ Stage 2 callback

class Stage2Callback(TrainerCallback):
    """After each policy optimiser step: the reward-model update and its metrics."""

    def __init__(self, cooper: CooperReward, trainer_ref: dict[str, Any]):
        self.cooper, self.trainer_ref = cooper, trainer_ref

    def on_step_end(self, args, state, control, **kwargs):
        trainer: CooperTrainer = self.trainer_ref["trainer"]
        st = self.cooper.update()
        if st is not None:
            m = {"rm/positives": st.positives, "rm/pairs": st.pairs,
                 "rm/valid_negatives": st.valid_negatives,
                 "rm/fallback_negatives": st.fallback_negatives, "rm/dropped_pairs": st.dropped,
                 "rm/updated": float(st.updated), "rm/skipped_nonfinite": float(st.skipped_nonfinite),
                 "perf/negatives": st.seconds_negatives,
                 "perf/negatives_total": st.seconds_negatives_total,
                 "perf/rm_update": st.seconds_update}
            if st.loss is not None:
                m.update({"rm/loss": st.loss, "rm/pair_acc_before": st.pair_acc_before})
            if st.grad_norm is not None:
                m["rm/grad_norm"] = st.grad_norm
            trainer.record({**m, **self.cooper.source_metrics()})
        trainer.record({"perf/step": time.perf_counter() - trainer.step_started})


class MetricsFileCallback(TrainerCallback):
    """One JSON object per logged step in ``metrics.jsonl`` (main process only)."""

    def __init__(self, path: Path):
        self.path = path

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not (state.is_world_process_zero and logs):
            return
        numbers = {k: v for k, v in logs.items() if isinstance(v, int | float)}
        if "train_runtime" in logs:  # the end-of-training summary, not a step
            (self.path.parent / "train_summary.json").write_text(json.dumps(numbers, indent=1))
            return
        with self.path.open("a") as f:
            f.write(json.dumps({"step": state.global_step, **numbers}) + "\n")


# ------------------------------------------------------------------ the trainer

class CooperTrainer(GRPOTrainer):
    """GRPOTrainer plus stage timing, atomic checkpoints and the reward model's state."""

    def __init__(self, *args, cooper: CooperReward, **kwargs):
        self.cooper = cooper
        self.step_started = time.perf_counter()
        self._staging_root: str | None = None
        super().__init__(*args, **kwargs)

    def record(self, metrics: dict[str, float]) -> None:
        """Add values to this step's logged metrics (averaged by TRL at log time)."""
        for k, v in metrics.items():
            self._metrics["train"][k].append(float(v))

    # -- timing: generation, log-probs (reference and old), rewards, policy update
    def training_step(self, model, inputs, num_items_in_batch):
        if self._step % self.current_gradient_accumulation_steps == 0:
            self.step_started = time.perf_counter()
            self._stage_seconds = {"generation": 0.0, "rewards": 0.0, "score_total": 0.0}
        t = time.perf_counter()
        out = super().training_step(model, inputs, num_items_in_batch)
        self._stage_seconds["train_steps"] = self._stage_seconds.get("train_steps", 0.0) + (
            time.perf_counter() - t)
        return out

    def _generate(self, prompts):
        t = time.perf_counter()
        try:
            return super()._generate(prompts)
        finally:
            self._stage_seconds["generation"] += time.perf_counter() - t

    def _calculate_rewards(self, *args, **kwargs):
        t = time.perf_counter()
        try:
            return super()._calculate_rewards(*args, **kwargs)
        finally:
            self._stage_seconds["rewards"] += time.perf_counter() - t

    def _generate_and_score_completions(self, inputs):
        t = time.perf_counter()
        out = super()._generate_and_score_completions(inputs)
        s = self._stage_seconds
        s["score_total"] += time.perf_counter() - t
        self.record({"perf/generation": s["generation"],
                     "perf/logprobs": s["score_total"] - s["generation"] - s["rewards"]})
        return out

    def optimizer_step_done(self) -> None:
        s = self._stage_seconds
        # forward/backward of every micro-batch plus the optimiser step, minus rollout work
        policy = time.perf_counter() - self.step_started - s["score_total"]
        self.record({"perf/policy_update": policy})

    # -- checkpoints: staged, then renamed into place
    def _get_output_dir(self, trial):
        return self._staging_root or super()._get_output_dir(trial)

    def _save_checkpoint(self, model, trial):
        run_dir = super()._get_output_dir(trial)
        name = f"checkpoint-{self.state.global_step}"
        self._staging_root = os.path.join(run_dir, STAGING)
        staged = os.path.join(self._staging_root, name)
        try:
            # a run killed while staging this very step left files behind: start clean, so
            # none of them can end up in the new checkpoint
            if self.args.should_save and os.path.exists(staged):
                shutil.rmtree(staged)
            self.accelerator.wait_for_everyone()
            super()._save_checkpoint(model, trial)
            self.accelerator.wait_for_everyone()
            if self.args.should_save:
                save_reward_model_state(self.cooper, staged)
                (Path(staged) / COMPLETE_MARKER).write_text(json.dumps(
                    {"step": self.state.global_step, "mode": self.cooper.mode,
                     "files": sorted(p.name for p in Path(staged).iterdir())}))
                final = os.path.join(run_dir, name)
                if os.path.exists(final):  # a rerun of the same step replaces it
                    shutil.rmtree(final)
                os.replace(staged, final)
                with contextlib.suppress(OSError):  # leave no empty staging folder behind
                    os.rmdir(self._staging_root)
                _rotate(run_dir, self.args.save_total_limit)
            self.accelerator.wait_for_everyone()
        finally:
            self._staging_root = None


class _StepTimer(TrainerCallback):
    def __init__(self, trainer_ref):
        self.trainer_ref = trainer_ref

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.trainer_ref["trainer"].optimizer_step_done()


def save_reward_model_state(cooper: CooperReward, folder: str | os.PathLike) -> None:
    """The reward model's weights and (in cooper mode) its optimiser, beside the policy's."""
    import torch

    if cooper.rm is None:
        return
    cooper.rm.save(Path(folder) / RM_FOLDER)
    if cooper.updater is not None:
        torch.save(cooper.updater.state_dict(), Path(folder) / RM_OPTIMIZER)


def load_reward_model_state(cooper: CooperReward, folder: str | os.PathLike) -> None:
    import torch
    from safetensors.torch import load_file

    folder = Path(folder)
    if cooper.rm is None or not (folder / RM_FOLDER).is_dir():
        return
    weights = sorted((folder / RM_FOLDER).glob("*.safetensors"))
    state: dict = {}
    for w in weights:
        state.update(load_file(w))
    missing, unexpected = cooper.rm.model.load_state_dict(state, strict=False)
    if unexpected or [k for k in missing if "lm_head" not in k]:
        raise UserError(f"{folder / RM_FOLDER}: reward-model weights do not match the model "
                        f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    if cooper.updater is not None and (folder / RM_OPTIMIZER).is_file():
        cooper.updater.load_state_dict(torch.load(folder / RM_OPTIMIZER, weights_only=True))


def _rotate(run_dir: str, keep: int) -> None:
    if keep <= 0:
        return
    done = sorted(complete_checkpoints(run_dir), key=lambda p: int(p.name.split("-")[-1]))
    for old in done[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def discard_staged_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """Remove checkpoints left half-written in the staging folder by a run that was stopped
    while saving (they never reached the run folder, so nothing resumes from them); returns
    what was removed, each one reported."""
    staging = Path(run_dir) / STAGING
    if not staging.is_dir():
        return []
    removed = sorted(staging.iterdir())
    for p in removed:
        log.warning("discarding incomplete checkpoint %s (the run was stopped while writing "
                    "it)", p)
    shutil.rmtree(staging)
    return removed


def complete_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """Checkpoints whose completion marker exists, oldest first."""
    run = Path(run_dir)
    if not run.is_dir():
        return []
    found = [p for p in run.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()]
    good = [p for p in found if (p / COMPLETE_MARKER).is_file()]
    for bad in set(found) - set(good):
        log.warning("skipping incomplete checkpoint %s (no %s; the run was stopped while "
                    "writing it)", bad, COMPLETE_MARKER)
    return sorted(good, key=lambda p: int(p.name.split("-")[-1]))
