"""Cooper in a user's own TRL script: ``examples/cooper_grpo.py`` run as a user would, on tiny
models, with a plain ``trl.GRPOTrainer``, and the drop-in's misuse errors.

The example must train, log the project's metrics through TRL's own logs, update the reward
model on every step that has pairs, and resume from a checkpoint with the reward model and its
optimiser exactly where an uninterrupted run has them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import cli_env, free_port, run_cli
from test_train_smoke import metrics, tiny_args, weights

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cooper_grpo.py"
METRICS = ["hacking/gap", "hacking/top_wrong", "rm/group_auroc", "rm/pairs", "rm/agreement",
           "reward/rule_mean", "reward/rm_mean"]


@pytest.fixture(scope="module")
def arith():
    from cooper.experiment.testbed import tiny_arith_models

    return tiny_arith_models()


def run_example(arith: Path, out: Path, *extra: str, steps: int = 3,
                reward: Path | None = None) -> None:
    cmd = [sys.executable, str(EXAMPLE), "--policy", str(arith / "policy"),
           "--reward-model", str(reward or arith / "reward"), "--dataset", "arith_small", "--limit", "64",
           "--num-generations", "4", "--batch-size", "16", "--max-completion-length", "48",
           "--max-steps", str(steps), "--save-steps", "1", "--output-dir", str(out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=cli_env())
    assert proc.returncode == 0, proc.stderr[-4000:]


def log_history(checkpoint: Path) -> list[dict]:
    return json.loads((checkpoint / "trainer_state.json").read_text())["log_history"]


@pytest.fixture(scope="module")
def uninterrupted(arith, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("example") / "run"
    run_example(arith, out)
    return out


def test_the_example_updates_the_reward_model_and_logs_through_trl(arith, uninterrupted):
    steps = [r for r in log_history(uninterrupted / "checkpoint-3") if "loss" in r]
    assert len(steps) == 3
    for r in steps:
        missing = [m for m in METRICS if m not in r]
        assert not missing, f"not in TRL's log of step {r['step']}: {missing}"
    with_pairs = [r["step"] for r in steps if r["rm/pairs"] > 0]
    assert with_pairs, "no step made a pair: the test shows nothing"
    before = weights(arith / "reward")
    for step in with_pairs:
        r = steps[step - 1]
        assert r["rm/updated"] == 1.0 and r["rm/changed_fraction"] > 0.5
        prev = (uninterrupted / f"checkpoint-{step - 1}" / "reward_model" if step > 1
                else None)
        old = weights(prev) if prev else before
        new = weights(uninterrupted / f"checkpoint-{step}" / "reward_model")
        assert any(not old[k].equal(new[k]) for k in old), f"step {step}: reward model unchanged"
    assert (uninterrupted / "reward_model").is_dir() and (uninterrupted / "policy").is_dir()


def test_the_example_resumes_with_the_same_reward_model_and_optimiser(arith, uninterrupted,
                                                                      tmp_path):
    out = tmp_path / "resumed"
    out.mkdir()
    # as if the run had stopped after step 2: only its first two checkpoints exist
    for n in (1, 2):
        shutil.copytree(uninterrupted / f"checkpoint-{n}", out / f"checkpoint-{n}")
    run_example(arith, out, "--resume")
    a, b = uninterrupted / "checkpoint-3", out / "checkpoint-3"
    # Bit for bit, on a busy machine too: a fresh CI run once saw two tensors differ by one unit
    # in the last place (9e-10), every metric identical, from oneMKL changing its thread count
    # under load; the example now sets MKL_DYNAMIC before torch loads (cooper.infra.threads).
    def logged(checkpoint: Path) -> list[dict]:  # every step's metrics but its timings
        return [{k: v for k, v in r.items() if not k.startswith("perf/") and k != "step_time"}
                for r in log_history(checkpoint) if "loss" in r]

    assert logged(a) == logged(b) and len(logged(a)) == 3
    wa, wb = weights(a / "reward_model"), weights(b / "reward_model")
    assert all(wa[k].equal(wb[k]) for k in wa), "the resumed run's reward model differs"
    sa = torch.load(a / "reward_model_optimizer.pt", weights_only=True)
    sb = torch.load(b / "reward_model_optimizer.pt", weights_only=True)
    assert sa["steps"] == sb["steps"] >= 1, "updates counted across the resume"
    oa, ob = sa["optimizer"]["state"], sb["optimizer"]["state"]
    assert oa and oa.keys() == ob.keys()
    for k in oa:
        for name, value in oa[k].items():
            assert torch.equal(value, ob[k][name]), f"optimiser state {k}.{name} differs"


def test_resuming_from_a_checkpoint_without_the_reward_model_is_an_error(arith, uninterrupted,
                                                                         tmp_path):
    from cooper.errors import UserError
    from cooper.rl import CooperCallback, CooperRewardFunction

    folder = tmp_path / "checkpoint-2"
    folder.mkdir()
    fn = CooperRewardFunction(arith / "reward", negatives="rollouts")

    class Args:
        output_dir = str(tmp_path)

    class State:
        global_step = 2

    with pytest.raises(UserError, match="holds no reward model"):
        CooperCallback(fn).on_train_begin(Args(), State(), None)


def test_a_released_verifyrm_pays_the_policy_in_cooper_train_and_the_example(arith, released,
                                                                             tmp_path):
    """A one-label classifier saved by transformers alone, in both entry points."""
    out = tmp_path / "train"
    run_cli(*tiny_args(arith, out, "cooper", f"reward.model={released}",
                       "rollout.prompts_per_step=4", "validation.enabled=false"))
    rows = [r for r in metrics(out) if "loss" in r]
    assert len(rows) == 2 and all(0 <= r["reward/rm_mean"] <= 1 for r in rows)
    assert any(r["rm/updated"] == 1.0 for r in rows)
    assert json.loads((out / "reward_model" / "cooper_rm.json").read_text())["template"] == "released"
    run_example(arith, tmp_path / "example", steps=1, reward=released)
    assert (tmp_path / "example" / "checkpoint-1" / "reward_model").is_dir()


# ------------------------------------------------------------------ several processes, steps per generation

@pytest.fixture(scope="module")
def two_processes(arith, tmp_path_factory) -> Path:
    """The example under ``accelerate launch`` with two processes on CPU, each optimiser step
    taking half of a generation batch (``steps_per_generation=2``)."""
    out = tmp_path_factory.mktemp("ddp") / "run"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
           "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
           "--main_process_port", str(free_port()),
           "--dynamo_backend", "no", str(EXAMPLE), "--policy", str(arith / "policy"),
           "--reward-model", str(arith / "reward"), "--dataset", "arith_small", "--limit", "64",
           "--num-generations", "4", "--batch-size", "8", "--steps-per-generation", "2",
           "--max-completion-length", "48", "--max-steps", "4", "--save-steps", "1",
           "--output-dir", str(out)]
    env = cli_env()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def test_two_processes_keep_one_reward_model_and_find_pairs(two_processes):
    replicas = json.loads((two_processes / "rm_replicas.json").read_text())
    assert replicas["processes"] == 2 and replicas["identical"], replicas
    rows = [r for r in log_history(two_processes / "checkpoint-4") if "rm/pairs" in r]
    assert sum(r["rm/pairs"] for r in rows) > 0, "no pairs from the gathered rollouts"


def test_the_reward_model_is_updated_once_per_generation_batch(arith, two_processes):
    """Steps 1 and 3 generate (and update the reward model); steps 2 and 4 reuse the batch."""
    rows = [r for r in log_history(two_processes / "checkpoint-4") if "loss" in r]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert [r["step"] for r in rows if "rm/pairs" in r] == [1, 3]
    ckpt = {n: weights(two_processes / f"checkpoint-{n}" / "reward_model") for n in (1, 2, 3, 4)}
    for a, b in ((1, 2), (3, 4)):
        assert all(ckpt[a][k].equal(ckpt[b][k]) for k in ckpt[a]), \
            f"the reward model changed between steps {a} and {b}, which share a generation batch"
    updates = torch.load(two_processes / "checkpoint-4" / "reward_model_optimizer.pt",
                         weights_only=True)["steps"]
    with_pairs = sum(1 for r in rows if r.get("rm/pairs", 0) > 0)
    assert with_pairs >= 1 and updates == with_pairs


# ------------------------------------------------------------------ misuse and the batch key

def completions_of(texts):
    return [[{"role": "assistant", "content": t}] for t in texts]


def test_a_missing_reference_column_names_the_setting(arith):
    from cooper.errors import UserError
    from cooper.rl import CooperRewardFunction

    fn = CooperRewardFunction(arith / "reward", reference_column="answer", negatives="rollouts")
    with pytest.raises(UserError, match="no column 'answer' .*reference_column=NAME"):
        fn(prompts=["1 + 1?"] * 2, completions=completions_of(["2", "3"]),
           question=["1 + 1?"] * 2, reference=["2", "2"])


def test_unknown_settings_and_a_local_assistant_without_weights_are_refused(arith):
    from cooper.config.engine import ConfigError
    from cooper.rl import CooperRewardFunction

    with pytest.raises(ConfigError, match="unknown settings \\['negative'\\]"):
        CooperRewardFunction(arith / "reward", negative="rollouts")
    with pytest.raises(ConfigError, match="local assistant needs its own weights"):
        CooperRewardFunction(arith / "reward", negatives="assistant")
    with pytest.raises(ConfigError, match="needs a reward model"):
        CooperRewardFunction(None, mode="cooper")


def test_a_bfloat16_policy_with_a_plain_optimiser_is_refused(arith):
    from cooper.errors import UserError
    from cooper.rl import CooperCallback, CooperRewardFunction

    fn = CooperRewardFunction(arith / "reward", negatives="rollouts")
    policy = torch.nn.Linear(2, 2).to(torch.bfloat16)
    policy.dtype = torch.bfloat16

    class Args:
        deepspeed = fsdp = None

    class State:
        global_step = 0

    with pytest.raises(UserError, match="rounds lr-sized updates away"):
        CooperCallback(fn).on_train_begin(Args(), State(), None, model=policy)


def test_each_batch_is_scored_once_for_all_columns_and_repeats_are_scored_again(arith):
    """Keyed by the list TRL passes, not by the texts: the verifier's column reuses the batch's
    scores, and a later batch with the very same texts is scored (and updates) again."""
    from cooper.rl import CooperRewardFunction

    fn = CooperRewardFunction(arith / "reward", negatives="rollouts", question_column=None)
    calls = []
    score = fn.cooper.score
    fn.cooper.score = lambda *a, **kw: calls.append(1) or score(*a, **kw)
    logged: dict = {}
    kwargs = dict(reference=["4"] * 4, log_metric=lambda k, v: logged.setdefault(k, v))
    prompts = [[{"role": "user", "content": "2 + 2?"}]] * 4
    batch = completions_of(["\\boxed{4}", "\\boxed{5}", "\\boxed{4}", "\\boxed{6}"])
    paid = fn(prompts=prompts, completions=batch, **kwargs)
    verdicts = fn.verifier(prompts=prompts, completions=batch, **kwargs)
    assert len(calls) == 1 and len(paid) == 4 and verdicts == [1.0, 0.0, 1.0, 0.0]
    assert logged["rm/pairs"] >= 1 and logged["rm/updated"] == 1.0
    fn(prompts=prompts, completions=list(batch), **kwargs)
    assert len(calls) == 2


# ------------------------------------------------------------------ the README's snippet

README = Path(__file__).resolve().parents[1] / "README.md"

# What the snippet leaves to the user's script: a policy and a dataset with a prompt and a
# reference column only (no question column). GRPOConfig keeps every argument the snippet gives
# and gets the sizes of tiny models on a CPU (TRL's defaults would train for epochs).
SNIPPET_PREAMBLE = '''
import sys
import trl
from datasets import Dataset
from cooper.data.problems import load_problems
from cooper.data.prompts import prompt_messages

policy, max_steps = sys.argv[1], int(sys.argv[2])
dataset = Dataset.from_list([{"prompt": prompt_messages(p.question), "reference": p.reference}
                             for p in load_problems("arith_small", "train", limit=64)])
_GRPOConfig = trl.GRPOConfig


def tiny(**kwargs):
    kwargs.update(max_steps=max_steps, save_steps=1, logging_steps=1, num_generations=4,
                  per_device_train_batch_size=16, max_completion_length=48, report_to="none",
                  use_cpu=True)
    return _GRPOConfig(**kwargs)


trl.GRPOConfig = tiny
'''


def readme_snippet() -> str:
    """The Python block of the README's section on Cooper in your own TRL script."""
    text = README.read_text()
    section = text[text.index("### Cooper in your own TRL script"):]
    start = section.index("```python\n") + len("```python\n")
    return section[start:section.index("\n```", start)]


def test_the_readme_snippet_trains_and_resumes_as_written(arith, tmp_path):
    snippet = readme_snippet()
    assert "CooperRewardFunction(" in snippet and "trainer.train(" in snippet
    (tmp_path / "runs").mkdir()
    shutil.copytree(arith / "reward", tmp_path / "runs" / "rm")  # the snippet's "runs/rm"
    first = tmp_path / "as_written.py"
    first.write_text(SNIPPET_PREAMBLE + snippet + "\n")
    # the resumed run: the same lines up to the trainer, then train from the last checkpoint
    setup = snippet[:snippet.index("trainer.train(")]
    second = tmp_path / "resumed.py"
    second.write_text(SNIPPET_PREAMBLE + setup + "trainer.train(resume_from_checkpoint=True)\n")

    def run(script: Path, steps: int) -> None:
        proc = subprocess.run([sys.executable, str(script), str(arith / "policy"), str(steps)],
                              cwd=tmp_path, capture_output=True, text=True, timeout=600,
                              env=cli_env())
        assert proc.returncode == 0, proc.stderr[-4000:]

    run(first, 2)
    out = tmp_path / "runs" / "grpo"
    steps = [r for r in log_history(out / "checkpoint-2") if "loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    assert all("hacking/gap" in r and "rm/pairs" in r for r in steps), steps
    assert sum(r["rm/pairs"] for r in steps) > 0, "premise: the tiny policy made no pair"
    assert (out / "checkpoint-2" / "reward_model").is_dir()
    run(second, 3)
    resumed = [r for r in log_history(out / "checkpoint-3") if "loss" in r]
    assert [r["step"] for r in resumed] == [1, 2, 3]  # steps 1-2 from the checkpoint, 3 resumed
    updates = [torch.load(out / f"checkpoint-{n}" / "reward_model_optimizer.pt",
                          weights_only=True)["steps"] for n in (2, 3)]
    # the reward model's optimiser came back, and went on by the resumed step's updates
    assert updates[0] >= 1 and updates[1] == updates[0] + resumed[-1]["rm/updated"]


def test_a_named_question_column_that_is_missing_is_an_error_that_says_how(arith):
    from cooper.errors import UserError
    from cooper.rl import CooperRewardFunction
    from cooper.rl.trl_reward import question_of

    fn = CooperRewardFunction(arith / "reward", question_column="question", negatives="rollouts")
    with pytest.raises(UserError, match="no column .question.*question_column=NAME or None"):
        fn(prompts=["1 + 1?"] * 2, completions=completions_of(["2", "3"]), reference=["2", "2"])
    # by default the question is the prompt's, less the project's boxed-answer instruction
    from cooper.data.prompts import prompt_messages

    assert question_of(prompt_messages("What is 2 + 3?")) == "What is 2 + 3?"
    assert question_of("Add 2 and 3.") == "Add 2 and 3."
