"""RL with Cooper: GRPO on TRL whose reward model is updated every step.

In your own TRL script: :class:`CooperRewardFunction` (a TRL reward function) and
:class:`CooperCallback` (:mod:`.trl_reward`), and :func:`leave_process_group` at the end of a
multi-process run. ``cooper train`` takes a
:class:`~cooper.config.train.TrainConfig`, a policy, problems and (in rm and cooper modes) a
reward model, and runs GRPO through TRL's ``GRPOTrainer`` with that reward function. Every step,
:mod:`.step` (the Cooper step, numbered as ``docs/method.md`` "One Cooper step") verifies and scores
the rollouts (Stage 1: the reward), picks verified-correct positives (:mod:`.pairs`), gets negatives
(:mod:`.negatives`) and takes the reward model's pairwise update (Stage 2), the rewards
already fixed. :mod:`.trainer` is the only module that knows TRL's internals; :mod:`.checkpoints` makes checkpoints atomic and
resumable; :mod:`.validation` scores held-out accuracy with the verifier; :mod:`.runner` builds
and runs a job. Hands on a run folder: ``metrics.jsonl``, checkpoints, the final policy and
reward model.
"""

import importlib

# Exported lazily (PEP 562): the trainer and runner import TRL, which takes seconds, and a
# module such as cooper.rl.pairs must be importable without it.
_EXPORTS = {"CooperReward": "cooper.rl.step", "Stage2Stats": "cooper.rl.stage2_records",
            "CooperRewardFunction": "cooper.rl.trl_reward",
            "CooperCallback": "cooper.rl.trl_reward",
            "leave_process_group": "cooper.infra.collective",
            "TrainResult": "cooper.rl.runner", "run": "cooper.rl.runner",
            "CooperTrainer": "cooper.rl.trainer"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'cooper.rl' has no attribute {name!r}")
