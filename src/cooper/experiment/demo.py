"""``cooper demo``: the whole Cooper pipeline on the embedded default model, on a laptop CPU.

Stages, each with its own progress bar, every artefact in one folder:

1. prepare the embedded SmolLM2-135M-Instruct (once; a no-op afterwards);
2. build a small labelled set: worked solutions (label 1) and the same solutions with the
   final answer changed consistently (label 0);
3. train a small VerifyRM on it (binary cross-entropy, the top layers only, to stay quick);
4. evaluate the initial policy on test problems (verifier-scored);
5. run a few Cooper steps (preset ``demo_cpu``: GRPO, reward from the VerifyRM, the VerifyRM
   updated every step on verified positives and assistant-written negatives);
6. write the run's report (``cooper report``: its totals in plain language and its curves,
   :mod:`cooper.experiment.run_report`);
7. evaluate the trained policy on the same held-out problems;
8. print a summary table with where every artefact was written (also ``summary.json``). The
   Cooper run is summed up over all its steps (:func:`cooper.experiment.run_totals.run_totals`:
   pairs made, negatives by source, reward-model updates, agreement with the verifier at the
   first and the last step), not by its last step alone.

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
from cooper.experiment.run_report import METRICS_FILE, build_run_report
from cooper.experiment.run_totals import headline, read_metrics, run_totals
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

    def add_cooper_run(self, run_dir: Path, mode: str, seconds: float) -> None:
        """The Cooper stage summed up over all its steps (figure ``cooper_run``), and its
        report written (stage ``Cooper report``, figure ``cooper_report``)."""
        totals = run_totals(read_metrics(run_dir / METRICS_FILE), mode)
        self.figures["cooper_run"] = asdict(totals)
        self.stages.append(Stage("Cooper RL", seconds, headline(totals), str(run_dir)))
        t0 = time.perf_counter()
        paths = build_run_report(run_dir)
        self.figures["cooper_report"] = str(paths.html)
        self.stages.append(Stage("Cooper report", time.perf_counter() - t0,
                                 f"{len(paths.plots)} plots, report.md and report.html",
                                 str(paths.html)))

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(
            {"settings": asdict(self.settings), "stages": [asdict(x) for x in self.stages],
             "figures": self.figures}, indent=1, default=str))

    def table(self) -> str:
        rows = [("stage", "time", "result", "written to")]
        rows += [(s.name, f"{s.seconds:.0f} s", s.result, s.artefact) for s in self.stages]
        rows.append(("total", f"{sum(s.seconds for s in self.stages):.0f} s", "", ""))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)


def _header(i: int, text: str) -> None:
    print(f"\n== [{i}/8] {text}", flush=True)


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
    _header(6, "report of the Cooper run (cooper report)")
    summary.add_cooper_run(result.output_dir, cfg.reward.mode, time.perf_counter() - t0)

    _header(7, "evaluate the trained policy on the same problems")
    t0 = time.perf_counter()
    after = _evaluate(HFGenerator.load(str(result.output_dir / "policy")), held_out, sampling,
                      out / "eval_after.json")
    summary.figures["accuracy_after"] = after
    stage("evaluate after", t0, f"accuracy {after:.3f}", out / "eval_after.json")

    _header(8, "summary")
    summary.write(out / "summary.json")
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
