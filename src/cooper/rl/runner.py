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

import yaml

from cooper.config.train import TrainConfig
from cooper.errors import UserError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainResult:
    output_dir: Path
    steps: int
    seconds: float
    resumed_from: Path | None


def build_dataset(cfg: TrainConfig, tokenizer) -> Any:
    """Training problems as a ``datasets.Dataset`` with the columns the reward functions read.

    TRL no longer cuts long prompts, so prompts over ``rollout.max_prompt_length`` tokens are
    left out here, counted and logged; if none is left the run stops with the fix.
    """
    from datasets import Dataset

    from cooper.data.problems import Fields, load_problems, prompt_messages
    from cooper.infra.generation import render_messages

    d = cfg.data
    problems = load_problems(d.dataset, d.split, limit=d.limit, skip_bad=d.skip_bad,
                             fields=Fields(d.question_field, d.answer_field, d.id_field))
    rows, too_long = [], 0
    for p in problems:
        messages = prompt_messages(p.question)
        n = len(tokenizer(render_messages(tokenizer, messages), add_special_tokens=False)["input_ids"])
        if n > cfg.rollout.max_prompt_length:
            too_long += 1
            continue
        rows.append({"prompt": messages, "problem_id": p.id, "question": p.question,
                     "reference": p.reference})
    if too_long:
        log.warning("left out %d of %d problems whose prompt exceeds rollout.max_prompt_length=%d",
                    too_long, len(problems), cfg.rollout.max_prompt_length)
    if not rows:
        raise UserError(f"no training problem fits rollout.max_prompt_length="
                        f"{cfg.rollout.max_prompt_length}; raise it")
    return Dataset.from_list(rows)


def _grpo_args(cfg: TrainConfig, num_processes: int):
    import torch
    from trl import GRPOConfig

    r, p = cfg.rollout, cfg.policy
    derived = cfg.derived(num_processes)
    bf16 = p.dtype == "bfloat16"
    return GRPOConfig(
        output_dir=cfg.output_dir, seed=cfg.seed, max_steps=cfg.max_steps,
        learning_rate=p.lr, warmup_steps=p.warmup_steps, lr_scheduler_type="constant_with_warmup",
        beta=p.kl_coef, epsilon=p.clip_eps, loss_type=p.loss_type, max_grad_norm=p.max_grad_norm,
        bf16=bf16, gradient_checkpointing=p.gradient_checkpointing,
        model_init_kwargs={"dtype": p.dtype},
        per_device_train_batch_size=r.micro_batch_size,
        gradient_accumulation_steps=derived["gradient_accumulation_steps"],
        num_generations=r.samples_per_prompt, max_completion_length=r.max_completion_length,
        temperature=r.temperature, top_p=r.top_p,
        use_vllm=r.use_vllm, vllm_mode=r.vllm_mode, vllm_server_base_url=r.vllm_server_base_url,
        vllm_gpu_memory_utilization=r.vllm_gpu_memory_utilization,
        logging_steps=1, report_to=[x for x in cfg.report_to.split(",") if x and x != "none"] or "none",
        save_strategy="steps" if cfg.save_steps else "no", save_steps=cfg.save_steps or 500,
        save_total_limit=cfg.save_total_limit, eval_strategy="no", log_completions=False,
        disable_dropout=True, remove_unused_columns=False, dataloader_num_workers=0,
        use_cpu=not torch.cuda.is_available(),
    )


def build_cooper_reward(cfg: TrainConfig, collective, device=None):
    """The reward model, its updater, the verifier and the negative sources for this process."""
    from functools import partial

    from cooper.rl.negatives import RewriteNegatives
    from cooper.rl.step import CooperReward
    from cooper.verify.verifier import verify_batch

    rm = updater = None
    if cfg.reward.model:
        from cooper.rm.model import RewardModel
        from cooper.rm.update import PairwiseUpdater

        rm = RewardModel.load(cfg.reward.model, max_length=cfg.reward.max_length,
                              dtype=cfg.policy.dtype)
        if device is not None:
            rm.model.to(device)
        if cfg.reward.mode == "cooper":
            u = cfg.rm_update
            if u.train_layers is not None:
                try:
                    rm.train_top_layers(u.train_layers)
                except UserError as e:  # name the setting, not the function
                    raise UserError(f"rm_update.train_layers: {e}") from e
            updater = PairwiseUpdater(rm, lr=u.lr, weight_decay=u.weight_decay,
                                      max_grad_norm=u.max_grad_norm,
                                      micro_batch_size=u.micro_batch_size)
    a = cfg.assistant
    assistant = fallback = None
    background = False  # the rule rewrite costs next to nothing
    if a.backend == "rewrite":
        assistant = RewriteNegatives()
    else:
        if a.fallback:
            fallback = RewriteNegatives()
        if a.backend == "endpoint":
            from cooper.rl.negatives import EndpointAssistant

            assistant = EndpointAssistant.from_config(a)
        # a local assistant is attached once the trainer holds the reference policy
        background = a.backend == "endpoint" if a.background is None else a.background
    verify = partial(verify_batch, mode=cfg.reward.verifier_mode,
                     timeout_s=cfg.reward.verifier_timeout_s)
    return CooperReward(
        mode=cfg.reward.mode, rm=rm, updater=updater, verify=verify, assistant=assistant,
        fallback=fallback, max_attempts=cfg.rm_update.max_attempts,
        positives_per_prompt=cfg.rm_update.positives_per_prompt,
        positive_choice=cfg.rm_update.positive_choice, pair_metrics=cfg.rm_update.pair_metrics,
        monitor=cfg.reward.monitor, score_batch_size=cfg.reward.score_batch_size, seed=cfg.seed,
        background_negatives=background, collective=collective)


def _attach_local_assistant(cfg: TrainConfig, cooper, trainer) -> None:
    """The local assistant: the frozen reference policy TRL already holds (no extra weights)."""
    from cooper.infra.generation import HFGenerator
    from cooper.infra.models import load_causal_lm, load_tokenizer
    from cooper.rl.negatives import LocalAssistant

    a = cfg.assistant
    plugin = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    if not a.model and plugin is not None and plugin.zero_stage == 3:
        raise UserError("with DeepSpeed ZeRO-3 the reference policy is sharded and cannot write "
                        "negatives: set assistant.backend=endpoint or rewrite, or give the local "
                        "assistant its own weights with assistant.model=PATH")
    if a.model:
        model = load_causal_lm(a.model, dtype=cfg.policy.dtype).to(trainer.accelerator.device)
        tok = load_tokenizer(a.model)
    elif trainer.ref_model is not None:
        model = trainer.accelerator.unwrap_model(trainer.ref_model)
        tok = load_tokenizer(cfg.policy.model)
    else:  # policy.kl_coef=0: TRL keeps no reference model, so load a frozen copy
        model = load_causal_lm(cfg.policy.model, dtype=cfg.policy.dtype).to(trainer.accelerator.device)
        tok = load_tokenizer(cfg.policy.model)
    model.eval().requires_grad_(False)
    gen = HFGenerator(model, tok, batch_size=a.batch_size, name="assistant")
    cooper.assistant = LocalAssistant(gen, max_new_tokens=a.max_new_tokens,
                                      temperature=a.temperature,
                                      attempts_per_call=a.attempts_per_call or cfg.rm_update.max_attempts)


def run(cfg: TrainConfig, *, resume: bool = False) -> TrainResult:
    """Train the policy (and, in cooper mode, the reward model) as configured."""
    import torch
    from accelerate import PartialState

    from cooper.infra import collective as coll
    from cooper.infra.models import load_tokenizer, resolve
    from cooper.rl.trainer import (
        CooperTrainer,
        MetricsFileCallback,
        Stage2Callback,
        _Batch,
        _StepTimer,
        complete_checkpoints,
        discard_staged_checkpoints,
        load_reward_model_state,
        reward_functions,
    )
    from cooper.rl.validation import ValidationCallback

    # Without a GPU, processes started by `accelerate launch --multi_gpu` (torchrun) must be told
    # to use the CPU, or accelerate sees one process each instead of a gloo process group.
    state = PartialState(cpu=not torch.cuda.is_available())
    cfg.validate(state.num_processes)
    out = Path(cfg.output_dir)
    done = complete_checkpoints(out)
    if done and not resume:
        raise UserError(f"{out} holds checkpoints of an earlier run: pass --resume to continue "
                        "it, or choose another output_dir")
    last = done[-1] if done else None
    if resume and last is None:
        log.warning("--resume: no complete checkpoint in %s; starting from step 0", out)
    if state.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        discard_staged_checkpoints(out)
        (out / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
        _trim_metrics(out / "metrics.jsonl", _step_of(last) if last else -1)
    state.wait_for_everyone()

    policy_path = str(resolve(cfg.policy.model))
    tokenizer = load_tokenizer(policy_path)
    dataset = build_dataset(cfg, tokenizer)
    cooper = build_cooper_reward(cfg, coll.current(), state.device)
    ref: dict[str, Any] = {}
    funcs, weights = reward_functions(_Batch(cooper, ref))
    args = _grpo_args(cfg, state.num_processes)
    args.reward_weights = weights
    trainer = CooperTrainer(
        model=policy_path, reward_funcs=funcs, args=args, train_dataset=dataset,
        processing_class=tokenizer, cooper=cooper,
        callbacks=[Stage2Callback(cooper, ref), _StepTimer(ref),
                   MetricsFileCallback(out / "metrics.jsonl")])
    ref["trainer"] = trainer
    if cfg.reward.mode != "rule" and cfg.assistant.backend == "local" and (
            cfg.reward.mode == "cooper" or cfg.rm_update.pair_metrics):
        _attach_local_assistant(cfg, cooper, trainer)
    if cfg.validation.enabled:
        trainer.add_callback(ValidationCallback(cfg.validation, tokenizer, ref, cfg.reward))
    if last is not None:
        load_reward_model_state(cooper, last)
        log.info("resuming from %s", last)
    t0 = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=str(last) if last else None)
    finally:
        cooper.close()
    if cooper.rm is not None:
        _check_rm_replicas(cooper, out, state.is_main_process)
    if state.is_main_process:
        trainer.save_model(str(out / "policy"))
        if cooper.rm is not None:
            cooper.rm.save(out / "reward_model")
    state.wait_for_everyone()
    return TrainResult(out, trainer.state.global_step, time.perf_counter() - t0, last)


def weights_fingerprint(model) -> str:
    """SHA-256 over every parameter's bytes: equal fingerprints mean identical weights."""
    import hashlib

    import torch

    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        # viewed as raw bytes, so bfloat16 (which numpy lacks) hashes too
        h.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _check_rm_replicas(cooper, out: Path, is_main: bool) -> None:
    """Every process must end with the same reward model (gradients were summed across them)."""
    prints = cooper.collective.gather_objects([weights_fingerprint(cooper.rm.model)])
    identical = len(set(prints)) == 1
    if is_main:
        (out / "rm_replicas.json").write_text(json.dumps(
            {"processes": len(prints), "fingerprints": prints, "identical": identical}, indent=1))
    if not identical:
        log.error("reward-model replicas differ across processes: %s", prints)


def _step_of(checkpoint: Path) -> int:
    return int(checkpoint.name.split("-")[-1])


def _trim_metrics(path: Path, keep_up_to_step: int) -> None:
    """Drop metric rows of steps after the checkpoint we resume from (they are about to be
    redone); a fresh run (``keep_up_to_step=-1``) starts an empty file."""
    if not path.is_file():
        return
    rows = [line for line in path.read_text().splitlines() if line.strip()]
    kept = [r for r in rows if json.loads(r).get("step", 0) <= keep_up_to_step]
    path.write_text("".join(r + "\n" for r in kept))

