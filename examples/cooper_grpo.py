"""Cooper in a plain TRL GRPO script: the reward model is updated every step.

    python examples/cooper_grpo.py --policy Qwen/Qwen2.5-1.5B-Instruct --reward-model ./rm \
        --dataset gsm8k --output-dir runs/grpo-cooper
    accelerate launch examples/cooper_grpo.py ...          # several processes: the same script

What Cooper needs from your script is three lines: a dataset column with each problem's
reference answer, a ``CooperRewardFunction`` in ``reward_funcs`` and a ``CooperCallback`` in
``callbacks``. Everything else is TRL as usual. ``--reward-model`` is a folder from
``cooper rm train`` or any one-label sequence-classification checkpoint (such as the paper's
released VerifyRM). Rerun with ``--resume`` to continue from the last checkpoint: the reward
model and its optimiser come back with the policy. Under ``accelerate launch``, call
``leave_process_group()`` after the function that built the trainer has returned.
"""

import argparse
import os

# oneMKL may change its thread count under load, and with it how sums round: fixed before torch
# loads, a resumed run equals an uninterrupted one bit for bit on a busy machine too (asked for
# later, from the reward function, it was not enough). `cooper train` does this itself.
for name in ("MKL_DYNAMIC", "OMP_DYNAMIC"):
    os.environ.setdefault(name, "FALSE")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from cooper.data.problems import load_problems  # noqa: E402
from cooper.data.prompts import prompt_messages  # noqa: E402
from cooper.rl import CooperCallback, CooperRewardFunction, leave_process_group  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--policy", required=True, help="policy checkpoint (causal LM)")
    p.add_argument("--reward-model", required=True, help="VerifyRM folder")
    p.add_argument("--dataset", default="gsm8k", help="a bundled dataset or a .jsonl file")
    p.add_argument("--limit", type=int, default=None, help="first N training problems")
    p.add_argument("--output-dir", default="runs/grpo-cooper")
    p.add_argument("--max-steps", type=int, default=100)
    p.add_argument("--num-generations", type=int, default=8, help="samples per prompt")
    p.add_argument("--batch-size", type=int, default=16,
                   help="completions per step and process (a multiple of --num-generations)")
    p.add_argument("--steps-per-generation", type=int, default=1,
                   help="optimiser steps per generation batch (one reward-model update each)")
    p.add_argument("--max-completion-length", type=int, default=256)
    p.add_argument("--save-steps", type=int, default=50)
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    args = p.parse_args()

    # 1. a dataset with the prompt and the reference answer (any column name: see below); the
    #    reward model reads the question from the prompt (or a column: question_column=NAME)
    problems = load_problems(args.dataset, "train", limit=args.limit)
    dataset = Dataset.from_list([{"prompt": prompt_messages(x.question), "reference": x.reference}
                                 for x in problems])

    # 2. the reward: VerifyRM scores each completion against the reference (what pays the
    #    policy); every step, completions the verifier confirms correct are paired with the
    #    group's wrong ones and the reward model takes a pairwise update
    cooper = CooperRewardFunction(args.reward_model, reference_column="reference",
                                  negatives="rollouts")

    config = GRPOConfig(
        output_dir=args.output_dir, max_steps=args.max_steps, learning_rate=1e-6,
        per_device_train_batch_size=args.batch_size, num_generations=args.num_generations,
        steps_per_generation=args.steps_per_generation,
        max_completion_length=args.max_completion_length,
        reward_weights=[1.0, 0.0],  # the verifier's column is logged beside it, not optimised
        logging_steps=1, save_steps=args.save_steps, report_to="none",
        use_cpu=not torch.cuda.is_available())
    trainer = GRPOTrainer(model=args.policy, reward_funcs=[cooper, cooper.verifier], args=config,
                          train_dataset=dataset, callbacks=[CooperCallback(cooper)])
    trainer.train(resume_from_checkpoint=True if args.resume else None)
    trainer.save_model(f"{args.output_dir}/policy")
    if trainer.accelerator.is_main_process:
        cooper.rm.save(f"{args.output_dir}/reward_model")
    cooper.close()


if __name__ == "__main__":
    main()
    # under accelerate launch, once the trainer is gone: ends the process group, which PyTorch
    # asks for and which, left to exit or done while the trainer lives, can abort or hang
    leave_process_group()
