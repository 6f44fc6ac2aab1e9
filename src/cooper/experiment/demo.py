"""``cooper demo``: the whole Cooper pipeline on the embedded default model, on a laptop CPU.

Stages, each with its own progress bar, every artefact in one folder:

1. prepare the embedded SmolLM2-135M-Instruct (once; a no-op afterwards);
2. build a small labelled set: worked solutions (label 1) and the same solutions with the
   final answer changed consistently (label 0);
3. train a small VerifyRM on it (binary cross-entropy, the top layers only, to stay quick);
4. evaluate the initial policy on test problems (verifier-scored);
5. run a few Cooper steps (preset ``demo_cpu``: GRPO, reward from the VerifyRM, the VerifyRM
   updated every step on verified positives and assistant-written negatives);
6. evaluate the trained policy on the same held-out problems;
7. print a summary table with where every artefact was written (also ``summary.json``).

The task is single-digit addition (``arith_small``): the embedded 135M model is right about
12% of the time there with a boxed answer, and almost never on GSM8K or SVAMP, so this is where
Cooper gets verified positives to learn from. The reward model is trained on one-line worked
solutions and then meets the policy's rambling ones: the online update is what adapts it. A few
steps of RL do not move accuracy much; the demo shows the pipeline and its signals (rewards,
agreement, pair accuracy), not a benchmark result.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cooper.config.demo import DemoSettings
from cooper.config.rm import RMTrainConfig
from cooper.config.train import load_config
from cooper.data.perturb import perturbed_triples
from cooper.data.problems import load_problems
from cooper.data.triples import load_triples
from cooper.eval.sampling import evaluate_problems
from cooper.infra import embedded
from cooper.infra.generation import HFGenerator, SamplingConfig
from cooper.infra.models import DEFAULT_MODEL
from cooper.infra.protocol import PAPER_TEMPERATURE, PAPER_TOP_P
from cooper.rl.runner import run
from cooper.rm.model import RewardModel
from cooper.rm.training import train_bce


@dataclass
class Stage:
    name: str
    seconds: float
    result: str
    artefact: str = ""


@dataclass
class DemoSummary:
    settings: DemoSettings
    stages: list[Stage] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def table(self) -> str:
        rows = [("stage", "time", "result", "written to")]
        rows += [(s.name, f"{s.seconds:.0f} s", s.result, s.artefact) for s in self.stages]
        rows.append(("total", f"{sum(s.seconds for s in self.stages):.0f} s", "", ""))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)


def _header(i: int, text: str) -> None:
    print(f"\n== [{i}/7] {text}", flush=True)


def run_demo(settings: DemoSettings) -> DemoSummary:
    """Run every stage; returns the summary (also written to ``OUT/summary.json``)."""
    s = settings
    out = Path(s.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = DemoSummary(s)

    def stage(name: str, t0: float, result: str, artefact: Path | str = "") -> None:
        summary.stages.append(Stage(name, time.perf_counter() - t0, result, str(artefact)))

    _header(1, "prepare the embedded model")
    t0 = time.perf_counter()
    model_dir = embedded.prepare()
    stage("prepare model", t0, DEFAULT_MODEL, model_dir)

    _header(2, "build a labelled set for the reward model")
    t0 = time.perf_counter()
    data_file = out / "rm_data.jsonl"
    n = _write_perturbed(data_file, s.dataset, s.rm_triples, s.seed)
    stage("labelled set", t0, f"{n} triples (gold / perturbed)", data_file)

    _header(3, "train a small VerifyRM")
    t0 = time.perf_counter()
    rm_dir = out / "reward_model"
    heldout_acc = _train_rm(data_file, rm_dir, s)
    summary.figures["rm_heldout_accuracy"] = heldout_acc
    stage("train VerifyRM", t0, f"held-out accuracy {heldout_acc:.2f}", rm_dir)

    held_out = list(load_problems(s.dataset, "test", limit=s.eval_problems))
    sampling = SamplingConfig(n=1, temperature=PAPER_TEMPERATURE, top_p=PAPER_TOP_P,
                              max_new_tokens=s.eval_max_new_tokens, seed=s.seed)

    _header(4, f"evaluate the initial policy on {len(held_out)} {s.dataset} test problems")
    t0 = time.perf_counter()
    before = _evaluate(HFGenerator.load(DEFAULT_MODEL), held_out, sampling, out / "eval_before.json")
    summary.figures["accuracy_before"] = before
    stage("evaluate before", t0, f"accuracy {before:.3f}", out / "eval_before.json")

    _header(5, f"Cooper RL: {s.steps} steps of GRPO with an online-updated VerifyRM")
    t0 = time.perf_counter()

    cfg = load_config("demo_cpu", [f"reward.model={rm_dir}", f"output_dir={out / 'cooper'}",
                                   f"max_steps={s.steps}", f"seed={s.seed}",
                                   f"data.dataset={s.dataset}", f"validation.dataset={s.dataset}"])
    result = run(cfg, resume=False)
    last = _last_step_metrics(result.output_dir / "metrics.jsonl")
    summary.figures["last_step"] = last
    stage("Cooper RL", t0, f"{result.steps} steps; reward {last.get('reward/rm_mean', 0):.2f}, "
          f"verified {last.get('reward/rule_mean', 0):.2f}, pairs {last.get('rm/pairs', 0):.0f}",
          result.output_dir)

    _header(6, "evaluate the trained policy on the same problems")
    t0 = time.perf_counter()
    after = _evaluate(HFGenerator.load(str(result.output_dir / "policy")), held_out, sampling,
                      out / "eval_after.json")
    summary.figures["accuracy_after"] = after
    stage("evaluate after", t0, f"accuracy {after:.3f}", out / "eval_after.json")

    _header(7, "summary")
    (out / "summary.json").write_text(json.dumps(
        {"settings": asdict(s), "stages": [asdict(x) for x in summary.stages],
         "figures": summary.figures}, indent=1, default=str))
    return summary


def _write_perturbed(path: Path, dataset: str, n: int, seed: int) -> int:
    triples, _ = perturbed_triples(load_problems(dataset, "train"), n, random.Random(seed))
    path.write_text("".join(json.dumps(t.to_json()) + "\n" for t in triples))
    return len(triples)


def _train_rm(data_file: Path, rm_dir: Path, s: DemoSettings) -> float:
    rows = list(load_triples(data_file))
    rm = RewardModel.load(DEFAULT_MODEL, max_length=s.rm_max_length, dtype="float32")
    report = train_bce(rm, rows, RMTrainConfig(lr=s.rm_lr, epochs=s.rm_epochs, seed=s.seed,
                                               holdout=0.2, train_layers=s.rm_train_layers))
    rm.save(rm_dir)
    last = report.epochs[-1].heldout
    return last.accuracy if last is not None else float("nan")


def _evaluate(generator, problems, sampling, path: Path) -> float:
    result = evaluate_problems(generator, problems, sampling, benchmark="demo", progress=True)
    path.write_text(json.dumps(asdict(result.metrics), indent=1, default=str))
    return result.metrics.accuracy


def _last_step_metrics(path: Path) -> dict[str, float]:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    steps = [r for r in rows if "loss" in r]
    return steps[-1] if steps else {}
