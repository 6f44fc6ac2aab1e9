"""``cooper demo``: the whole Cooper pipeline on the embedded default model, on a laptop CPU.

Stages, each with its own progress bar, every artefact in one folder:

1. prepare the embedded SmolLM2-135M-Instruct (once; a no-op afterwards);
2. warm-start the Cooper stage's policy: a dozen supervised steps of the embedded model's top
   layers on the task's one-line worked solutions (:func:`cooper.experiment.testbed.warm_start`),
   stopped early so that it is right on some of its rollouts and wrong on others. As it ships,
   the embedded model is right on 2-6% of the stage's rollouts (it rambles), so most groups
   held no verified-correct rollout and Cooper's update idled on most steps;
3. build the reward model's labelled set with the project's recipe (``cooper data build``'s
   default mix: gold solutions in several forms against changed answers, cut-off and degenerate
   text, another problem's solution, ..., and the embedded model's own completions sorted by
   the verifier). The completions are the ones that ship with the package
   (:mod:`cooper.data.embedded_samples`): sampling them takes more than half an hour on a
   laptop, and without them the reward model does not recognise the policy's real answers;
4. train a small VerifyRM on it (binary cross-entropy): the embedded model's first 24 layers of
   30, the top 4 of them trained, in bfloat16 where the CPU computes it in hardware
   (``--dtype``), to stay quick (docs/reward_model.md compares the choices);
5. check it before any policy is paid by it, with the recipe's bars: the shipped robustness
   suite (``cooper rm eval --suite robustness``: at least 40 test problems, so every kind of
   attack has 40 items and a 5% bar means at most two of them), and its accuracy on held-out
   real completions of the embedded model (the shipped test-split ones, labelled by the
   verifier, label-balanced as ``cooper rm eval --balance 0`` does);
6. run a few Cooper steps from the warm-started policy (preset ``demo_cpu``: GRPO, reward from
   the VerifyRM, the VerifyRM updated every step on verified positives and, by default, the
   same prompts' wrong rollouts), without held-out validation (a few steps cannot move
   accuracy);
7. write the run's report (``cooper report``: its totals in plain language and its curves,
   :mod:`cooper.report.run_report`);
8. check the reward model that Cooper updated the same way as in stage 5, so that what the
   online updates did to it shows before -> after (a result, with no bar on it). Cooper's
   update trains only the top layers, so the frozen layers' output on the checks' inputs is
   kept from stage 5 (:class:`cooper.rm.trunk.KeptStates`) and this check runs the top layers
   alone;
9. the hacking picture: a hook pointing at the experiment (``make experiment``);
10. print a summary table of at most 100 columns (figures only), the Cooper stage step by step
   (the rollouts' accuracy, pairs, update, and the reward model on each step's new pairs
   before its update), each stage's sentence and where every artefact was written (all of it
   in ``summary.json``), and the verdicts: is the reward model trusted (suite false-positive
   rates and real-completion accuracy), did Cooper make pairs and update the reward model on
   5 of every 6 steps, did the reward model agree with the verifier on the policy's own
   rollouts, what it made of the policy's new rollouts step after step (no bar), and the
   reward model before -> after Cooper. The Cooper run is summed up over all its steps
   (:func:`cooper.report.run_totals.run_totals`), not by its last step alone. The summary, its
   tables and the verdicts' bars are :mod:`cooper.experiment.demo_summary`'s.

The task is single-digit addition (``arith_small``): the one bundled task where the embedded
135M model is sometimes right with a boxed answer (on GSM8K or SVAMP almost never), so the
reward model's shipped real completions and the warm start's worked solutions exist for it. A
few steps of RL at the preset's rate do not move accuracy, so the demo does not claim they do:
it shows the method's signals (pairs, updates, the reward model on the policy's own text,
agreement with the verifier), and the hacking experiment is where accuracy is measured.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import torch

from cooper.config.data_mix import DataMixConfig
from cooper.config.demo import RM_RECIPES, DemoSettings
from cooper.config.rm import RMTrainConfig
from cooper.config.train import TrainConfig, load_config
from cooper.data.embedded_samples import SHIPPED
from cooper.data.mix import build_mix, write_build
from cooper.data.problems import load_problems
from cooper.data.triples import load_triples
from cooper.experiment.demo_summary import HACKING_HOOK, REAL_BAR, DemoSummary, Stage, verdicts
from cooper.infra import embedded
from cooper.infra.allocator import release_freed_memory
from cooper.infra.environment import cpu_bfloat16
from cooper.infra.files import write_json
from cooper.infra.models import DEFAULT_MODEL, embedded_trunk
from cooper.labelling.label import read_rows, sampled_completions, verifier_vote
from cooper.rl.runner import TrainResult, run
from cooper.rm.metrics import balanced_indices, binary_metrics
from cooper.rm.model import RewardModel
from cooper.rm.robustness import build_suite, format_suite, suite_problems, suite_report
from cooper.rm.training import train_bce
from cooper.rm.trunk import KeptStates
from cooper.types import Triple
from cooper.verify.verifier import verify_batch

STAGES = 10
REAL_BALANCE_SEED = 0  # the recipe's subset (`cooper rm eval --balance 0`): one for every seed


def _header(i: int, text: str) -> None:
    print(f"\n== [{i}/{STAGES}] {text}", flush=True)


def run_demo(settings: DemoSettings) -> DemoSummary:
    """Run every stage; returns the summary (also written to ``OUT/summary.json``)."""
    s = settings
    out = Path(s.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = DemoSummary(s)

    def stage(name: str, t0: float, result: str, artefact: Path | str = "",
              detail: str = "") -> None:
        summary.stages.append(Stage(name, time.perf_counter() - t0, result,
                                    str(artefact) if artefact else "", detail))

    _header(1, "prepare the embedded model")
    t0 = time.perf_counter()
    model_dir = embedded.prepare()
    stage("prepare model", t0, DEFAULT_MODEL, model_dir)

    _header(2, "warm-start the policy on the task's worked solutions")
    t0 = time.perf_counter()
    policy_dir, said = _warm_start(model_dir, out / "policy_warm_start", s)
    stage("warm-start policy", t0, said, policy_dir if policy_dir != model_dir else "",
          WARM_START_DETAIL if policy_dir != model_dir else said)
    release_freed_memory()

    _header(3, "build a labelled set for the reward model (cooper data build)")
    t0 = time.perf_counter()
    data_file = out / "rm_data.jsonl"
    kinds, sampled = _write_mix(data_file, s)
    stage("labelled set", t0, f"{s.rm_triples} rows, {kinds} kinds, {sampled} own completions",
          data_file, f"{s.rm_triples} rows, {kinds} kinds of correct and wrong, {sampled} of "
          "them the embedded model's own completions sorted by the verifier")

    _header(4, "train a small VerifyRM")
    t0 = time.perf_counter()
    rm_dir = out / "reward_model"
    dtype = compute_dtype(s.dtype)
    summary.figures["dtype"] = dtype
    print(f"precision: {dtype}" + (" (this CPU multiplies bfloat16 in hardware)"
                                   if s.dtype == "auto" and dtype == "bfloat16" else ""))
    rm = _train_rm(data_file, rm_dir, s, dtype)
    layers = f"top {s.rm_train_layers} of " + (f"{s.rm_trunk} layers" if s.rm_trunk
                                                 else "all layers")
    epochs, lr = rm_recipe(s, dtype)
    stage("train VerifyRM", t0, f"{epochs} epochs, {layers}, {dtype}", rm_dir,
          f"{epochs} epochs at lr {lr:g} on {layers}, in {dtype}")

    _header(5, "check the VerifyRM: the robustness suite (cooper rm eval --suite) and held-out "
               "real completions")
    # the frozen layers' output on the checks' inputs, kept for the same checks after Cooper,
    # whose update trains only the top layers: the second check runs those alone
    kept = KeptStates(s.rm_train_layers)
    summary.figures.update(_check(rm, s, out, "", stage, kept))
    del rm
    release_freed_memory()  # or the reward model's training peak stays resident under RL's

    _header(6, f"Cooper RL: {s.steps} steps of GRPO with an online-updated VerifyRM")
    t0 = time.perf_counter()
    # no held-out validation: a few steps cannot move accuracy and the demo claims nothing
    # about it (`make experiment` measures it), while answering the held-out split before the
    # first step and after the last took 50-60 s each on a 2-core machine
    warm = [f"rollout.max_completion_length={s.rollout_tokens}"] if policy_dir != model_dir else []
    cfg = load_config("demo_cpu", [*warm, f"reward.model={rm_dir}", f"output_dir={out / 'cooper'}",
                                   f"max_steps={s.steps}", f"seed={s.seed}",
                                   f"data.dataset={s.dataset}", "validation.enabled=false",
                                   f"rm_update.negatives={s.negatives}",
                                   f"policy.model={policy_dir}", f"policy.dtype={dtype}",
                                   # the update trains the layers the reward model was trained on
                                   f"rm_update.train_layers={s.rm_train_layers}"])
    result = train_afresh(cfg)
    release_freed_memory()
    _header(7, "report of the Cooper run (cooper report)")
    summary.add_cooper_run(result.output_dir, cfg.reward.mode, time.perf_counter() - t0)

    _header(8, "what Cooper did to the VerifyRM: the same checks on the updated reward model")
    updated = RewardModel.load(result.output_dir / "reward_model", max_length=s.rm_max_length,
                               dtype=dtype)
    summary.figures["after_cooper"] = _check(updated, s, out, "after Cooper: ", stage, kept,
                                             suffix="_after_cooper")
    del updated, kept

    _header(9, "the hacking picture")
    print(HACKING_HOOK, flush=True)
    summary.stages.append(Stage("hacking picture", 0.0, "not in the demo (see below)"))

    _header(10, "summary")
    summary.figures["verdicts"] = verdicts(summary.figures)
    summary.write(out / "summary.json")
    return summary


def train_afresh(cfg: TrainConfig) -> TrainResult:
    """The Cooper stage's run, from step 0. A rerun of the demo into the same OUT trains again:
    the previous run in ``OUT/cooper`` is the demo's own product, rewritten like every other
    artefact here, so it is removed first (``cooper train`` refuses a finished run's folder)."""
    shutil.rmtree(cfg.output_dir, ignore_errors=True)
    return run(cfg, resume=False)


def _check(rm: RewardModel, s: DemoSettings, out: Path, label: str, stage, kept: KeptStates,
           suffix: str = "") -> dict[str, Any]:
    """The recipe's checks of a reward model (the robustness suite, held-out real
    completions): their figures, each written to ``OUT/robustness{suffix}.json`` and
    ``OUT/real_completions{suffix}.json`` and added to the summary's stages."""
    figures: dict[str, Any] = {}
    t0 = time.perf_counter()
    path = out / f"robustness{suffix}.json"
    suite = _robustness(rm, s, path, kept)
    rate = suite.overall.false_positive_rate
    worst, kind = max((r.false_positive_rate, k) for k, r in suite.kinds.items())
    figures.update(suite_false_positive_rate=rate, suite_worst_kind=kind,
                   suite_worst_kind_rate=worst,
                   suite_items_per_kind=min(r.n for r in suite.kinds.values()),
                   suite_kind_rates={k: r.false_positive_rate for k, r in suite.kinds.items()})
    stage(f"{label}robustness suite", t0, f"false positives {rate:.1%} of {suite.overall.n}",
          path, f"false positives {rate:.1%} of {suite.overall.n} attacks, the worst kind "
          f"{kind} {worst:.1%}")
    t0 = time.perf_counter()
    path = out / f"real_completions{suffix}.json"
    real = _real_completions(rm, s, path, kept)
    if real is None:
        stage(f"{label}real completions", t0, "not measured",
              detail=f"no completions of the embedded model ship for {s.dataset}")
    else:
        figures.update(real_balanced_accuracy=real["accuracy"], real_n=real["n"])
        stage(f"{label}real completions", t0, f"accuracy {real['accuracy']:.3f} on {real['n']}",
              path, f"accuracy {real['accuracy']:.3f} on {real['n']} held-out completions of "
              "the embedded model (half correct), never trained on")
    return figures


def _write_mix(path: Path, s: DemoSettings) -> tuple[int, int]:
    """The recipe's labelled set (``cooper data build --n N --seed S --samples-file embedded``);
    returns its kinds and how many of its rows are the embedded model's own completions."""
    sampled = None
    if s.rm_samples == "embedded" and (s.dataset, "train") in SHIPPED:
        sampled = sampled_completions(SHIPPED[(s.dataset, "train")].path)
    elif s.rm_samples == "embedded":
        print(f"note: no completions of the embedded model ship for {s.dataset}: the labelled "
              "set is the gold-only mix, and the reward model has not seen a real completion")
    elif s.rm_samples != "none":
        sampled = sampled_completions(s.rm_samples)
    rows, summary = build_mix(load_problems(s.dataset, "train").problems, s.rm_triples,
                              DataMixConfig(seed=s.seed), sampled=sampled, dataset=s.dataset)
    write_build(path, rows, summary)
    kinds = sum(1 for k in summary.kinds.values() if k.rows)
    return kinds, sum(k.rows for name, k in summary.kinds.items() if name.startswith("sampled_"))


WARM_START_DETAIL = ("supervised steps on the task's one-line worked solutions (\"4 + 7 = 11. The "
                     "answer is \\boxed{11}.\"), stopped early, so that the policy is right on "
                     "some of its rollouts and wrong on others: as it ships, the embedded model "
                     "is right on 2-6% of them, and most groups of the Cooper stage then hold "
                     "no verified-correct rollout to make a pair from")


def _warm_start(model_dir: Path, out_dir: Path, s: DemoSettings) -> tuple[Path, str]:
    """The Cooper stage's starting policy: the embedded model after ``s.warm_steps`` steps of
    :func:`~cooper.experiment.testbed.warm_start` on the task's worked solutions (its top
    ``s.warm_layers`` layers, float32 on every CPU, so the starting policy does not depend on
    the precision), or the embedded model itself (0 steps, or a task without worked
    solutions). Returns its folder and the stage's figures."""
    from cooper.data.synthetic import arithmetic_problems
    from cooper.experiment.testbed import warm_start

    if s.warm_steps == 0:
        return model_dir, "none (--warm-steps 0): the embedded model as it ships"
    try:
        arithmetic_problems("train", s.dataset)
    except ValueError:
        print(f"note: {s.dataset} has no generated worked solutions; the Cooper stage starts "
              "from the embedded model as it ships")
        return model_dir, f"none: no worked solutions for {s.dataset}"
    warm_start(model_dir, out_dir, steps=s.warm_steps, lr=s.warm_lr, batch_size=s.warm_batch,
               seed=s.seed, dataset=s.dataset, train_layers=s.warm_layers)
    return out_dir, (f"{s.warm_steps} steps of {s.warm_batch} solutions, top {s.warm_layers} "
                     "layers")


def compute_dtype(setting: str) -> str:
    """The demo's precision: ``auto`` is bfloat16 where the CPU multiplies it in hardware."""
    if setting != "auto":
        return setting
    return "bfloat16" if cpu_bfloat16() else "float32"


def rm_recipe(s: DemoSettings, dtype: str) -> tuple[int, float]:
    """The reward model's (epochs, learning rate): as set, else :data:`RM_RECIPES` of the
    precision it trains in."""
    epochs, lr = RM_RECIPES["bfloat16" if dtype == "bfloat16" else "float32"]
    return (s.rm_epochs if s.rm_epochs is not None else epochs,
            s.rm_lr if s.rm_lr is not None else lr)


def _train_rm(data_file: Path, rm_dir: Path, s: DemoSettings, dtype: str) -> RewardModel:
    rows = list(load_triples(data_file))
    # the embedded model's first K layers, in bfloat16 where the CPU computes it natively, for
    # the precision's epochs (RM_RECIPES; docs/reward_model.md, "The demo's reward model");
    # frozen layers stay in the dtype, the trained ones are float32 (train_bce)
    base = DEFAULT_MODEL if s.rm_trunk is None else str(embedded_trunk(s.rm_trunk))
    torch.manual_seed(s.seed)  # the new score head is drawn at load: the seed fixes it too
    rm = RewardModel.load(base, max_length=s.rm_max_length, dtype=dtype)
    epochs, lr = rm_recipe(s, dtype)
    train_bce(rm, rows, RMTrainConfig(lr=lr, epochs=epochs, seed=s.seed, holdout=0.0,
                                      train_layers=s.rm_train_layers))
    rm.save(rm_dir)
    return rm


def _real_completions(rm: RewardModel, s: DemoSettings, path: Path,
                      kept: KeptStates) -> dict[str, Any] | None:
    """Accuracy on the shipped held-out completions of the embedded model (test split, never
    trained on), labelled by the verifier as ``cooper data label --policy verifier`` does and
    label-balanced as ``cooper rm eval --balance 0``: the recipe's third bar. None when none
    ship for the task."""
    shipped = SHIPPED.get((s.dataset, "test"))
    if shipped is None:
        return None
    rows = [r for r in read_rows(shipped.path) if r["status"] == "ok"]
    verdicts = verify_batch([r["completion"] for r in rows], [r["reference"] for r in rows])
    # a verifier timeout or error proves nothing either way: left out, as labelling does
    decided = [(r, v.correct) for r, v in zip(rows, verdicts, strict=True)
               if verifier_vote(v.correct, v.reason) != "undecided"]
    keep = balanced_indices([y for _, y in decided], REAL_BALANCE_SEED)
    triples = [Triple(decided[i][0]["question"], decided[i][0]["reference"],
                      decided[i][0]["completion"]) for i in keep]
    labels = [decided[i][1] for i in keep]
    m = binary_metrics(kept.score(rm, triples, progress=True), labels)
    result = {"file": str(shipped.path), "rows": len(rows), "decided": len(decided),
              "correct": sum(y for _, y in decided), "n": m.n, "accuracy": m.accuracy,
              "recall": m.recall, "auroc": m.auroc, "ece": m.ece, "bar": REAL_BAR}
    print(f"held-out real completions: accuracy {m.accuracy:.3f} on {m.n} (half correct; "
          f"recall {m.recall:.3f}, AUROC {m.auroc:.3f})")
    write_json(path, result)
    return result


def _robustness(rm: RewardModel, s: DemoSettings, path: Path, kept: KeptStates):
    items = build_suite(suite_problems(s.dataset, "test", s.suite_problems))
    scores = kept.score(rm, [it.triple for it in items.items], progress=True)
    report = suite_report(items, scores, dataset=f"{s.dataset}/test")
    print(format_suite(report))
    write_json(path, report.to_dict())
    return report
