"""Build and run one training job from a :class:`~cooper.config.train.TrainConfig`.

The run folder holds everything a run produces: ``config.yaml`` (the resolved settings),
``metrics.jsonl`` (one JSON object per step), ``checkpoint-N/`` folders, TensorBoard events
when enabled, and at the end ``policy/`` and ``reward_model/``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from accelerate import PartialState
from datasets import Dataset

from cooper.config.train import TrainConfig
from cooper.data.problems import Fields, load_problems
from cooper.data.prompts import prompt_messages, render_prompt
from cooper.errors import UserError
from cooper.infra import collective
from cooper.infra.models import load_tokenizer, resolve
from cooper.rl.checkpoints import (
    complete_checkpoints,
    discard_staged_checkpoints,
    load_reward_model_state,
    step_of,
)
from cooper.rl.trainer import CooperTrainer, pinned_grpo_settings
from cooper.rm import update as rm_update
from cooper.rm.model import RewardModel
from cooper.rm.update import PairwiseUpdater

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainResult:
    output_dir: Path
    steps: int
    seconds: float
    resumed_from: Path | None
    already_finished: bool = False  # --resume found the run finished: nothing was trained


def build_dataset(cfg: TrainConfig, tokenizer) -> Any:
    """Training problems as a ``datasets.Dataset`` with the columns the reward functions read.

    TRL no longer cuts long prompts, so prompts over ``rollout.max_prompt_length`` tokens are
    left out here, counted and logged; if none is left the run stops with the fix.
    """

    d = cfg.data
    problems = load_problems(d.dataset, d.split, limit=d.limit, skip_bad=d.skip_bad,
                             fields=Fields(d.question_field, d.answer_field, d.id_field))
    rows, too_long = [], 0
    for p in problems:
        n = len(tokenizer(render_prompt(tokenizer, p.question), add_special_tokens=False)["input_ids"])
        if n > cfg.rollout.max_prompt_length:
            too_long += 1
            continue
        rows.append({"prompt": prompt_messages(p.question), "problem_id": p.id, "question": p.question,
                     "reference": p.reference})
    if too_long:
        log.warning("left out %d of %d problems whose prompt exceeds rollout.max_prompt_length=%d",
                    too_long, len(problems), cfg.rollout.max_prompt_length)
    if not rows:
        raise UserError(f"no training problem fits rollout.max_prompt_length="
                        f"{cfg.rollout.max_prompt_length}; raise it")
    return Dataset.from_list(rows)


def load_reward_model(cfg: TrainConfig, device=None) -> tuple[RewardModel | None,
                                                              PairwiseUpdater | None]:
    """The reward model (``reward.model``) and, when Stage 2 updates it, its updater."""
    return rm_update.load_reward_model(cfg.reward.model or None, plan=cfg.plan(),
                                  update=cfg.rm_update.resolved(cfg.reward.mode),
                                  max_length=cfg.reward.max_length,
                                  dtype=cfg.policy.dtype, device=device)


def run(cfg: TrainConfig, *, resume: bool = False) -> TrainResult:
    """Train the policy (and, in cooper mode, the reward model) as configured. A folder that
    holds an earlier run is refused unless ``resume`` continues it from a checkpoint; a run
    stopped before its end, with no checkpoint, starts again from step 0; a finished run that
    ``resume`` is asked to continue with no more steps than it ran is left as it is."""

    # Without a GPU, processes started by `accelerate launch --multi_gpu` (torchrun) must be told
    # to use the CPU, or accelerate sees one process each instead of a gloo process group.
    state = PartialState(cpu=not torch.cuda.is_available())
    cfg.validate(state.num_processes)
    out = Path(cfg.output_dir)
    done = complete_checkpoints(out)
    if done and not resume:
        raise UserError(f"{out} holds checkpoints of an earlier run: pass --resume to continue "
                        "it, or choose another output_dir")
    steps = finished_steps(out)
    if resume and steps >= cfg.max_steps:
        # finished: resuming would load it to train no step (or, from a checkpoint older than
        # its end, its last steps again) and save its policy anew; raising max_steps trains on
        log.debug("%s is finished: nothing to resume", out)  # the command says so
        return TrainResult(out, steps, _runtime(out), None, already_finished=True)
    if not done and steps:  # nothing to resume from, and starting over would empty its metrics
        raise UserError(f"{out} holds a finished run ({steps} training step{'s' * (steps != 1)} "
                        "logged, its policy saved) and no checkpoint to resume from: choose "
                        "another output_dir, or delete the folder to train again")
    last = done[-1] if done else None
    if resume and last is None:
        log.warning("--resume: no complete checkpoint in %s; starting from step 0", out)
    if state.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        discard_staged_checkpoints(out)
        (out / "config.yaml").write_text(yaml.safe_dump(
            {**cfg.to_dict(), "grpo": pinned_grpo_settings(cfg, state.num_processes)},
            sort_keys=False))
        _trim_metrics(out / "metrics.jsonl", step_of(last) if last else -1)
    state.wait_for_everyone()

    policy_path = str(resolve(cfg.policy.model))
    tokenizer = load_tokenizer(policy_path)
    dataset = build_dataset(cfg, tokenizer)
    rm, updater = load_reward_model(cfg, state.device)
    trainer = CooperTrainer(cfg, model=policy_path, tokenizer=tokenizer, train_dataset=dataset,
                            rm=rm, updater=updater, collective=collective.current(),
                            num_processes=state.num_processes,
                            metrics_path=out / "metrics.jsonl")
    cooper = trainer.cooper
    if last is not None:
        load_reward_model_state(cooper, last)
        log.info("resuming from %s", last)
    t0 = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=str(last) if last else None)
    finally:
        cooper.close()
    if state.is_main_process:
        trainer.save_model(str(out / "policy"))
        if cooper.rm is not None:
            cooper.rm.save(out / "reward_model")
    state.wait_for_everyone()
    return TrainResult(out, trainer.state.global_step, time.perf_counter() - t0, last)


def finished_steps(out: Path) -> int:
    """Training steps logged in ``out/metrics.jsonl`` when ``out`` also holds the ``policy/`` a
    run saves at its end (a finished run), else 0: a run stopped before its end saved no policy
    and may start again. A line cut short by a kill is not a step."""
    metrics = out / "metrics.jsonl"
    if not (out / "policy").is_dir() or not metrics.is_file():
        return 0
    steps = set()
    for line in metrics.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int) and row["step"] >= 1:
            steps.add(row["step"])
    return len(steps)


def _runtime(out: Path) -> float:
    """The seconds a finished run trained (TRL's ``train_summary.json``), 0 where not saved."""
    try:
        return float(json.loads((out / "train_summary.json").read_text())["train_runtime"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def _trim_metrics(path: Path, keep_up_to_step: int) -> None:
    """Drop metric rows of steps after the checkpoint we resume from (they are about to be
    redone); a fresh run (``keep_up_to_step=-1``) starts an empty file."""
    if not path.is_file():
        return
    rows = [line for line in path.read_text().splitlines() if line.strip()]
    kept = [r for r in rows if json.loads(r).get("step", 0) <= keep_up_to_step]
    path.write_text("".join(r + "\n" for r in kept))

