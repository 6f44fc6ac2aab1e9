"""Cooper in any TRL GRPO script: a reward function that trains its reward model, and a callback.

TRL (1.16) calls each reward function once per generation batch on every process, with that
process's slice of the completions, every dataset column as a keyword argument (so the
reference answer), ``trainer_state`` and ``log_metric``. That is all one Cooper step needs, so
:class:`CooperRewardFunction` does the whole step (:mod:`cooper.rl.step`) inside the call:

1. Stage 1: verify the completions and score them with the current reward model (version t-1);
   these scores are the rewards it returns;
2. Stage 2: build the pairs and update the reward model to version t, after the rewards were
   computed, so the policy's step t is paid by version t-1 exactly as in the paper;
3. the metrics of both (``hacking/gap``, ``hacking/top_wrong``, ``rm/group_auroc``, ``rm/pairs``,
   ``rm/loss``, ...) through TRL's ``log_metric``, so they reach TRL's logs and every
   ``report_to`` backend in the step they describe.

TRL then takes the policy's step on the returned rewards. The one exception to "inside the
call": when an endpoint assistant writes negatives in the background, Stage 2 waits for the
policy's optimiser step (:class:`CooperCallback`'s ``on_step_end``), so the network time
overlaps it; its metrics then reach the next step's log.

:class:`CooperCallback` saves the reward model and its optimiser into each of TRL's checkpoints
and restores them when training resumes, refuses a policy whose weights a plain optimiser would
not move (bfloat16 or float16 outside DeepSpeed/FSDP), and switches the update off while the
policy is evaluated. Several processes (``accelerate launch``) work as one: rollouts are
gathered, so a group split across processes still yields its rollout negatives, and gradients
are summed, so the replicas stay identical. With ``num_iterations`` or ``steps_per_generation``
above 1 the reward model is updated once per generation batch, when TRL asks for its rewards.

TRL offers no hook for this, and its reward-model support trains nothing during RL; hence this
module. ``cooper train`` (:mod:`cooper.rl.trainer`) is built on it.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from cooper.config.engine import ConfigError
from cooper.config.reward_modes import Payer
from cooper.config.reward_sections import RewardConfig, RMUpdateConfig
from cooper.config.sections import AssistantConfig
from cooper.config.train import TrainConfig
from cooper.data.prompts import BOXED_INSTRUCTION
from cooper.errors import UserError
from cooper.infra import collective
from cooper.infra.threads import fixed_math_threads
from cooper.labelling.backends import drop_in_judge
from cooper.rl.checkpoints import (
    RM_FOLDER,
    check_rm_replicas,
    load_reward_model_state,
    save_reward_model_state,
)
from cooper.rl.step import CooperReward
from cooper.rl.step_metrics import rollout_metrics, stage2_metrics
from cooper.rm.update import load_reward_model
from cooper.types import Rollout
from cooper.verify.verifier import completion_text

if TYPE_CHECKING:
    from cooper.config.reward_sections import JudgeConfig
    from cooper.labelling.judge import Judge
    from cooper.rm.model import RewardModel

log = logging.getLogger(__name__)

LogMetric = Callable[[str, float], None]


# ------------------------------------------------------------------ columns

def verifier_column(rollouts: Sequence[Rollout], pays: Payer) -> list[float | None]:
    """The verifier's column. When it is only logged (weight 0), a row whose reward-model
    score is not finite must be unscorable in *every* column: TRL then gives it zero advantage
    and leaves it out of its group's mean, whereas a finite verdict beside a NaN score would be
    summed into a reward of 0, the lowest a probability can be. A judge's paid "yes" counts."""
    if pays is Payer.VERIFIER:
        return [float(r.correct or r.judged is True) for r in rollouts]
    hybrid = pays is Payer.HYBRID  # a verified rollout is paid 1 whatever its score
    return [float(r.correct) if (r.rm_score is not None and math.isfinite(r.rm_score))
            or (hybrid and r.correct) else None for r in rollouts]


def question_of(prompt: Any) -> str:
    """The question of a prompt (a string, or a conversation's last user message) when no
    column names it, less the instruction :func:`~cooper.data.prompts.prompt_messages` appends:
    the question as the reward model was trained to read it."""
    if isinstance(prompt, str):
        content: Any = prompt
    else:
        users = [m.get("content", "") for m in prompt
                 if isinstance(m, dict) and m.get("role") == "user"]
        if not users:
            raise UserError("the prompt has no user message to take the question from: name the "
                            "dataset column that holds it with question_column=NAME")
        content = users[-1]
    if isinstance(content, list):  # multimodal content parts: their text
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    text = str(content)
    suffix = "\n" + BOXED_INSTRUCTION
    return text[: -len(suffix)] if text.endswith(suffix) else text


# ------------------------------------------------------------------ the reward function

@dataclass
class _Batch:
    """The generation batch scored last. ``completions`` is the very list TRL passed to every
    reward function of that batch: held here, it cannot be freed, so ``is`` tells the next
    batch from this one even when their texts are equal."""

    completions: list
    rollouts: list[Rollout]


class _Column:
    """One reward column of a :class:`CooperRewardFunction`; TRL names it by ``__name__``."""

    def __init__(self, owner: CooperRewardFunction, name: str, values):
        self.owner, self.__name__, self._values = owner, name, values

    def __call__(self, prompts, completions, **kwargs) -> list[float | None]:
        return self._values(self.owner._step(prompts, completions, **kwargs))


class CooperRewardFunction:
    """A TRL reward function that runs Cooper: pass it in ``GRPOTrainer(reward_funcs=[...])``
    with a :class:`CooperCallback` in ``callbacks``.

    ``reward_model``: a folder from ``cooper rm train``, a plain one-label
    ``AutoModelForSequenceClassification`` checkpoint (the released VerifyRM format), or a
    loaded :class:`~cooper.rm.model.RewardModel`. ``mode``: ``reward.mode``: ``"cooper"`` (the
    reward model pays and is updated every step), ``"rm"`` (it pays, frozen), ``"rule"`` (the
    verifier pays; a reward model, if given, only watches), ``"hybrid"``/``"hybrid_cooper"`` (the
    verifier pays 1 where it accepts, the reward model's score elsewhere; frozen/updated) or
    ``"judged"`` (where the rule misses right answers: the reward model taught by ``judge``,
    each of its "yes" checked on the answer's wrong twin, 16 pairs of forms a policy can reach
    cut from the step's right rollouts, and 16 of its own training rows replayed,
    ``replay_file=``, or ``replay=0``).
    ``reference_column``: the dataset column with each problem's final answer;
    ``question_column``: its text (None: the prompt's last user message, less this project's
    boxed-answer instruction); ``id_column``: a problem id (None: the question groups the
    samples). The other keywords are ``cooper train``'s settings of the same name
    (``reward.*``; ``rm_update.*`` as an object, ``rm_update=``, or as keywords,
    ``negatives="rollouts", epochs=3, ...``; ``assistant=``), checked and built by the same
    builder (:meth:`~cooper.rl.step.CooperReward.from_config`).

    ``judge``: ``"api:MODEL@URL"`` (an OpenAI-compatible endpoint), ``"hf:MODEL"`` (a local
    model), ``"gold"`` (the testbeds), a :class:`~cooper.config.reward_sections.JudgeConfig` or
    a :class:`~cooper.labelling.judge.Judge`; asked by ``mode="judged"`` (or ``labels="judge"``)
    and, in ``rule`` mode, by ``judge_rejected=True`` (TinyV's design); ``judge_budget`` and
    ``judge_threshold`` are ``judge.budget`` and ``judge.threshold`` (:mod:`cooper.rl.judging`).

    The object itself is the column that pays the policy; :attr:`verifier` is the verifier's
    verdicts, to pass as a second reward function with weight 0 to see them in TRL's logs.
    """

    __name__ = "cooper"

    def __init__(self, reward_model: str | os.PathLike | RewardModel | None, *,
                 mode: str = "cooper", reference_column: str = "reference",
                 question_column: str | None = None, id_column: str | None = None,
                 rm_update: RMUpdateConfig | None = None,
                 assistant: AssistantConfig | None = None, verifier_mode: str = "strict",
                 verifier_timeout_s: float = 5.0, score_batch_size: int = 16,
                 max_length: int | None = None, dtype: str = "float32", seed: int = 0,
                 judge: str | Judge | JudgeConfig | None = None, judge_rejected: bool = False,
                 judge_budget: float | None = None, judge_threshold: float | None = None,
                 hybrid_scores: str | None = None, **rm_update_settings: Any):
        known = {f.name for f in fields(RMUpdateConfig)}
        unknown = sorted(set(rm_update_settings) - known)
        if unknown:
            raise ConfigError(f"CooperRewardFunction got unknown settings {unknown}; the "
                              f"reward-model update's are: {', '.join(sorted(known))}")
        judge_cfg, judge_object = drop_in_judge(judge, budget=judge_budget,
                                                threshold=judge_threshold)
        # the same settings `cooper train` reads, checked and built by the same builder
        given = (None if reward_model is None else str(reward_model)
                 if isinstance(reward_model, str | os.PathLike) else "a loaded RewardModel")
        cfg = TrainConfig(seed=seed, reward=RewardConfig(
            mode=mode, model=given, verifier_mode=verifier_mode, verifier_timeout_s=verifier_timeout_s,
            score_batch_size=score_batch_size, max_length=max_length,
            hybrid_scores=hybrid_scores, judge_rejected=judge_rejected),
            rm_update=replace(rm_update or RMUpdateConfig(), **rm_update_settings),
            assistant=assistant or AssistantConfig(), judge=judge_cfg)
        cfg.policy.dtype = dtype
        cfg.check_reward(has_rm=reward_model is not None, has_judge=judge_object is not None)
        if cfg.uses_assistant() and cfg.assistant.backend == "local" and not cfg.assistant.model:
            raise ConfigError(f"negatives={cfg.rm_update.negatives!r} with a local assistant needs "
                              "its own weights here: assistant=AssistantConfig(model=PATH), or "
                              "backend='endpoint' or 'rewrite', or negatives='rollouts'")
        import torch
        from accelerate import PartialState

        fixed_math_threads()  # a user's script: the same numbers on a busy machine
        device = PartialState(cpu=not torch.cuda.is_available()).device
        rm, updater = load_reward_model(reward_model, plan=cfg.plan(), update=cfg.rm_update,
                                        max_length=max_length, dtype=dtype, device=device)
        engine = CooperReward.from_config(cfg, rm=rm, updater=updater, judge=judge_object)
        self._setup(engine, reference_column, question_column, id_column)
        self._collective_set = False  # the process group exists once TRL's trainer is built

    @classmethod
    def wrap(cls, engine: CooperReward | None, *, reference_column: str = "reference",
             question_column: str | None = None,
             id_column: str | None = None) -> CooperRewardFunction:
        """Around a :class:`~cooper.rl.step.CooperReward` built by the caller (``cooper
        train``); ``engine`` may be set later, as :attr:`cooper`, before the first call."""
        self = cls.__new__(cls)
        self._setup(engine, reference_column, question_column, id_column)
        return self

    def _setup(self, engine, reference_column, question_column, id_column) -> None:
        self.cooper: CooperReward | None = engine
        self.reference_column, self.question_column = reference_column, question_column
        self.id_column = id_column
        self.policy = None  # set by CooperCallback: while it is in eval mode, nothing is updated
        self.metrics_sink: Callable[[dict[str, float]], None] | None = None
        self.last_call_seconds = 0.0
        self._latest: _Batch | None = None
        self._late_metrics: dict[str, float] = {}
        self._collective_set = True  # the caller gave the engine its collective
        self.verifier = _Column(self, "rule",
                                lambda rollouts: verifier_column(rollouts, self.cooper.plan.pays))
        self.reward_model = _Column(self, "reward_model",
                                    lambda rollouts: self.cooper.rewards(rollouts))

    @property
    def rm(self) -> RewardModel | None:
        return self.cooper.rm

    def __call__(self, prompts, completions, **kwargs) -> list[float]:
        """The rewards that pay the policy: the reward model's probabilities (``cooper`` and
        ``rm`` modes; NaN where a score is not finite, which TRL treats as unscorable), the
        verifier's verdicts (``rule`` mode), or 1 where the verifier accepts and the
        probability elsewhere (``hybrid`` modes)."""
        return self.cooper.rewards(self._step(prompts, completions, **kwargs))

    def columns(self) -> list[_Column]:
        """The reward functions ``cooper train`` passes: the verifier, then (when a reward model
        scores) the reward model; the one that does not pay gets weight 0 and is only logged."""
        return [self.verifier, self.reward_model] if self.cooper.plan.scores_with_rm else [self.verifier]

    # ------------------------------------------------------------------ one Cooper step

    def _step(self, prompts, completions, *, trainer_state=None, log_metric: LogMetric | None = None,
              **columns: Any) -> list[Rollout]:
        if self._latest is not None and self._latest.completions is completions:
            return self._latest.rollouts  # this batch's other column: already scored
        started = time.perf_counter()
        cooper = self._engine()
        metrics = self._finish_update()  # a background update left from the previous batch
        metrics.update(self._late_metrics)
        self._late_metrics = {}
        n = len(completions)
        references = [str(r) for r in self._column(columns, self.reference_column, n,
                                                   "reference_column")]
        if self.question_column is None:
            questions = [question_of(p) for p in prompts]
        else:
            questions = [str(q) for q in self._column(columns, self.question_column, n,
                                                      "question_column")]
        ids = ([str(i) for i in self._column(columns, self.id_column, n, "id_column")]
               if self.id_column else [f"{q}\x00{r}" for q, r in zip(questions, references, strict=True)])
        step = trainer_state.global_step if trainer_state is not None else 0
        training = self.policy.training if self.policy is not None else True
        # Stage 1: the verdicts and the current reward model's scores (the rewards)
        rollouts, stats, seconds = cooper.score(ids, questions, references,
                                                [completion_text(c) for c in completions],
                                                step=step, training=training)
        metrics.update(rollout_metrics(stats, seconds, cooper.plan.pays))
        # Stage 2: the reward model's update, the rewards above already fixed
        if cooper.pending and not cooper.background:
            metrics.update(self._update())
        for name, value in metrics.items():
            (log_metric or _ignore)(name, float(value))
        self._latest = _Batch(completions, rollouts)
        self.last_call_seconds = time.perf_counter() - started
        return rollouts

    def _engine(self) -> CooperReward:
        if self.cooper is None:
            raise RuntimeError("CooperRewardFunction.wrap(None): set .cooper before training")
        if not self._collective_set:
            self.cooper.collective = collective.current()
            if self.cooper.judge is not None:
                self.cooper.judge.collective = self.cooper.collective
            self._collective_set = True
        return self.cooper

    def _update(self) -> dict[str, float]:
        st = self.cooper.update()
        if st is None:
            return {}
        return {**stage2_metrics(st), **self.cooper.source_metrics()}

    def _finish_update(self) -> dict[str, float]:
        return self._update() if self.cooper.pending else {}

    def finish_update(self) -> None:
        """Run a Stage 2 still waiting (background negatives) now; its metrics go to
        :attr:`metrics_sink` when set, else to the next call's log."""
        metrics = self._finish_update()
        if metrics and self.metrics_sink is not None:
            self.metrics_sink(metrics)
        else:
            self._late_metrics.update(metrics)

    @staticmethod
    def _column(columns: dict[str, Any], name: str, n: int, setting: str) -> list:
        if name not in columns:
            given = sorted(k for k in columns if k not in ("completion_ids", "log_extra",
                                                          "environments"))
            none = " or None (the prompt's)" if setting == "question_column" else ""
            raise UserError(f"the training dataset has no column {name!r} ({setting}); TRL passed "
                            f"the columns {given}: name the right one with {setting}=NAME{none} "
                            "(and keep GRPOConfig(remove_unused_columns=False))")
        values = list(columns[name])
        if len(values) != n:
            raise UserError(f"column {name!r} has {len(values)} values for {n} completions")
        return values

    def close(self) -> None:
        if self.cooper is not None:
            self.cooper.close()


def _ignore(name: str, value: float) -> None:
    return None


# ------------------------------------------------------------------ the callback

def sharded(args) -> bool:
    """DeepSpeed or FSDP manages the weights (and their float32 master copies)."""
    return bool(getattr(args, "deepspeed", None)) or bool(getattr(args, "fsdp", None))


def check_trainable_precision(model, is_sharded: bool) -> None:
    """Refuse to step low-precision weights with a plain optimiser: an update of about the
    learning rate rounds away on most bfloat16 weights, so training would silently not move
    them."""
    import torch

    low = [n for n, p in model.named_parameters()
           if p.requires_grad and p.dtype in (torch.bfloat16, torch.float16)]
    if low and not is_sharded:
        raise UserError(f"the policy's trainable weights are {model.dtype} ({low[0]}, "
                        "...) and would be stepped by a plain optimiser, which rounds lr-sized "
                        "updates away: load them in float32 and train with GRPOConfig(bf16=True) "
                        "(cooper train: policy.dtype=bfloat16 does), or train under DeepSpeed "
                        "or FSDP")


class CooperCallback(TrainerCallback):
    """The training-loop side of a :class:`CooperRewardFunction`.

    - ``on_train_begin``: checks the policy's precision; when TRL resumes from
      ``checkpoint-N``, restores the reward model and its optimiser saved there (a checkpoint
      without them is an error: the run would go on with another reward model);
    - ``on_step_end``: a Stage 2 still waiting for the policy's step (background negatives);
    - ``on_save``: the reward model and its optimiser into TRL's ``checkpoint-N`` (main
      process); ``checkpoints=False`` leaves both to the caller (``cooper train`` stages its
      checkpoints itself).
    - ``on_train_end``: the last waiting Stage 2, then a check that every process holds the
      same reward model (``output_dir/rm_replicas.json``; replicas that differ are logged as an
      error).
    """

    def __init__(self, reward: CooperRewardFunction, *, checkpoints: bool = True):
        self.reward, self.checkpoints = reward, checkpoints

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if model is not None:
            check_trainable_precision(model, sharded(args))
            self.reward.policy = model
        if self.checkpoints and state.global_step > 0 and self.reward.cooper.judge is not None \
                and self.reward.rm is None:  # a judge without a reward model: its memory
            load_reward_model_state(self.reward.cooper, Path(args.output_dir)
                                    / f"checkpoint-{state.global_step}")
        if self.checkpoints and state.global_step > 0 and self.reward.rm is not None:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if not (folder / RM_FOLDER).is_dir():
                raise UserError(f"resuming from {folder}, which holds no reward model: it was "
                                "not saved with a CooperCallback, so the run cannot go on with "
                                "the reward model it had; start a new run")
            load_reward_model_state(self.reward.cooper, folder)
            log.info("reward model restored from %s", folder)

    def on_step_end(self, args, state, control, **kwargs):
        self.reward.finish_update()

    def on_save(self, args, state, control, **kwargs):
        if self.checkpoints and state.is_world_process_zero:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            save_reward_model_state(self.reward.cooper, folder)

    def on_train_end(self, args, state, control, **kwargs):
        self.reward.finish_update()
        cooper = self.reward.cooper
        if cooper is not None and cooper.rm is not None and self.reward._collective_set:
            check_rm_replicas(cooper, args.output_dir, state.is_world_process_zero)
