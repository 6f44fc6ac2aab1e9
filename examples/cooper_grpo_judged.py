"""Cooper taught by an LLM judge in a plain TRL GRPO script, where the rule misses right answers.

    vllm serve Qwen/Qwen3-4B --port 8001          # the judge: any OpenAI-compatible endpoint
    python examples/cooper_grpo_judged.py --judge api:Qwen/Qwen3-4B@http://127.0.0.1:8001/v1 \
        --policy Qwen/Qwen2.5-1.5B-Instruct --reward-model ./rm --replay-file rm_train.jsonl \
        --dataset gsm8k --output-dir runs/grpo-judged
    python examples/cooper_grpo_judged.py ... --resume   # continue from the last checkpoint

``mode="judged"`` is the design for a dataset whose answers a rule cannot always read (answers
in words, yes/no against True/False, ...): the policy is paid 1 where the rule accepts and the
reward model's score where the rule could not read the answer; every step the reward model is
updated on the step's rollouts, labelled by the judge where the rule's "no" says nothing (at
most ``--judge-budget`` of a step's rollouts are new calls; each answer to a problem is asked
once in the whole run), with 16 of its own training rows replayed (``--replay-file``: the rows
``cooper rm train`` read; ``--no-replay`` where they are not at hand). A judge errs, so each of
its "yes" is checked on the answer's wrong twin (a judge that calls that right too teaches
nothing: ``judge/doubted``), a "yes" on a reply with no answer is taught as "no", and 16 pairs a
step cut from the right rollouts (the answer alone, a hedge, a reply with no answer) teach that
no form decides the score. A hosted judge's key is
read from ``OPENAI_API_KEY`` (or ``api:MODEL@URL#VAR``). The judge's verdicts are saved in each
checkpoint (``judge.json`` beside the reward model) and come back with ``--resume``. A judge that
gives no verdict on 3 steps in a row stops the run (``JudgeUnavailable``): a wrong URL does not
quietly train on the rule's labels alone. Everything else is ``examples/cooper_grpo.py``.
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
    p.add_argument("--judge", required=True,
                   help="api:MODEL@URL (an OpenAI-compatible endpoint), hf:MODEL or gold")
    p.add_argument("--policy", required=True, help="policy checkpoint (causal LM)")
    p.add_argument("--reward-model", required=True, help="VerifyRM folder")
    replay = p.add_mutually_exclusive_group(required=True)
    replay.add_argument("--replay-file", help="the reward model's training rows (cooper rm train's "
                                              "data file), 16 replayed in every update")
    replay.add_argument("--no-replay", action="store_true", help="replay no training rows")
    p.add_argument("--judge-budget", type=float, default=0.1,
                   help="new judge calls a step, at most this share of the step's rollouts")
    p.add_argument("--dataset", default="gsm8k", help="a bundled dataset or a .jsonl file")
    p.add_argument("--limit", type=int, default=None, help="first N training problems")
    p.add_argument("--output-dir", default="runs/grpo-judged")
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

    # 1. a dataset with the prompt and the reference answer (here the rule may not read it)
    problems = load_problems(args.dataset, "train", limit=args.limit)
    dataset = Dataset.from_list([{"prompt": prompt_messages(x.question), "reference": x.reference}
                                 for x in problems])

    # 2. the reward: hybrid pay, the reward model updated every step on the rollouts, labelled
    #    by the judge where the rule's "no" says nothing, its own training rows replayed
    replay = {"replay": 0} if args.no_replay else {"replay_file": args.replay_file}
    cooper = CooperRewardFunction(args.reward_model, mode="judged", judge=args.judge,
                                  judge_budget=args.judge_budget, reference_column="reference",
                                  **replay)

    config = GRPOConfig(
        output_dir=args.output_dir, max_steps=args.max_steps, learning_rate=1e-6,
        per_device_train_batch_size=args.batch_size, num_generations=args.num_generations,
        steps_per_generation=args.steps_per_generation,
        max_completion_length=args.max_completion_length,
        reward_weights=[1.0, 0.0],  # the verifier's column is logged beside it, not optimised
        remove_unused_columns=False,  # the reference column reaches the reward function
        logging_steps=1, save_steps=args.save_steps, report_to="none",
        use_cpu=not torch.cuda.is_available())
    # the callback saves the reward model, its optimiser and the judge's verdicts in every
    # checkpoint, and restores them on --resume
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
