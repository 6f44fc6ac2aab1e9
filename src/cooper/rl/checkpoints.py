"""Checkpoints of a Cooper run: complete or absent, with the reward model beside the policy.

TRL writes the policy, its optimiser, scheduler and RNG states; :class:`~cooper.rl.trainer.
CooperTrainer` has it write them into a staging folder, adds the reward model's weights and (when
it is updated) its optimiser, then a completion marker, and only then renames the folder into the
run folder. A run killed while saving therefore leaves no half-written ``checkpoint-N``: what is
in the run folder is complete (its marker exists), what is in staging is discarded on restart.

Apart from them, ``keep_policy_steps`` keeps the policy alone at chosen steps
(``OUTPUT/policy-steps/step-N``: weights and tokenizer, a fraction of a checkpoint's size), so
that a run can be scored over its last steps and not only at the one it stopped at.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from cooper.errors import UserError

if TYPE_CHECKING:
    from cooper.rl.step import CooperReward

log = logging.getLogger(__name__)

COMPLETE_MARKER = "cooper-checkpoint.json"
RM_FOLDER = "reward_model"
RM_OPTIMIZER = "reward_model_optimizer.pt"
JUDGE_STATE = "judge.json"  # the judge's verdicts so far and its call count (cooper.rl.judging)
STAGING = ".staging"  # checkpoints are written here, then renamed into the run folder
POLICY_STEPS = "policy-steps"
"""the run folder's sub-folder of policies kept at chosen steps (``keep_policy_steps``)"""


def kept_policy_dir(run_dir: str | os.PathLike, step: int) -> Path:
    """Where the policy kept after ``step`` is (or will be) saved."""
    return Path(run_dir) / POLICY_STEPS / f"step-{step}"


def save_reward_model_state(cooper: CooperReward, folder: str | os.PathLike) -> None:
    """The reward model's weights and (in cooper mode) its optimiser, beside the policy's; and
    the judge's verdicts where one is asked, so a resumed run asks what an uninterrupted one
    would."""
    import torch

    if cooper.judge is not None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / JUDGE_STATE).write_text(json.dumps(cooper.judge.state_dict()))
    if cooper.rm is None:
        return
    cooper.rm.save(Path(folder) / RM_FOLDER)
    if cooper.updater is not None:
        torch.save(cooper.updater.state_dict(), Path(folder) / RM_OPTIMIZER)


def load_reward_model_state(cooper: CooperReward, folder: str | os.PathLike) -> None:
    import torch
    from safetensors.torch import load_file

    folder = Path(folder)
    if cooper.judge is not None:  # a judged run resumes with what its judge was told
        path = folder / JUDGE_STATE
        if not path.is_file():
            raise UserError(f"{folder} holds no {JUDGE_STATE}, but this run asks a judge: "
                            "resuming without its verdicts would ask them all again and change "
                            "what the run learns. Resume from a checkpoint that the judged run "
                            "saved, or start a new run (another output_dir)")
        try:
            judge_state = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise UserError(f"{path} is not JSON ({e}): restore it from the run's other "
                            "checkpoint, or start a new run") from e
        try:
            cooper.judge.load_state_dict(judge_state)
        except UserError as e:
            raise UserError(f"{path}: {e}") from None
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


def rotate(run_dir: str, keep: int) -> None:
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


def step_of(checkpoint: Path) -> int:
    """The optimiser step a ``checkpoint-N`` folder was saved at."""
    return int(checkpoint.name.split("-")[-1])


def weights_fingerprint(model) -> str:
    """SHA-256 over every parameter's bytes: equal fingerprints mean identical weights."""
    import torch

    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        # viewed as raw bytes, so bfloat16 (which numpy lacks) hashes too
        h.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def check_rm_replicas(cooper: CooperReward, run_dir: str | os.PathLike, is_main: bool) -> bool:
    """Every process must end with the same reward model (gradients were summed across them):
    the fingerprints of all replicas go to ``run_dir/rm_replicas.json`` (main process), and
    replicas that differ are logged as an error. Call it on every process."""
    prints = cooper.collective.gather_objects([weights_fingerprint(cooper.rm.model)])
    identical = len(set(prints)) == 1
    if is_main:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        (Path(run_dir) / "rm_replicas.json").write_text(json.dumps(
            {"processes": len(prints), "fingerprints": prints, "identical": identical}, indent=1))
    if not identical:
        log.error("reward-model replicas differ across processes: %s", prints)
    return identical
