"""Stage 1 of the reward-hacking experiment: what every arm starts from.

Written into a seed's folder, ``OUT/seed-S/setup`` (:mod:`cooper.report.experiment_layout`), and
skipped when a rerun finds ``setup.json`` there (an interrupted setup starts over: it takes
seconds to minutes). Everything seeded here takes the seed's ``train.seed``: the initial reward
model's training triples and their order, the probe set, a ``tiny-random`` model, and the
sampling of the initial evaluation; so each seed is a replicate of the whole experiment. It builds, from ``setup``, ``rm_init`` and
``probe`` (:mod:`cooper.config.experiment`): the initial policy (a tiny model built on this
machine is copied in), the initial reward model (optionally trained briefly with BCE on
perturbed triples), the labelled probe set the reward model is scored on at every validation,
and the initial policy's benchmark scores (the report's "no RL" row). Where the gold judge
scores (``train.validation.judge=gold``, the blind-rule testbed), the policy check also measures
the share of the initial policy's right answers that the rule rejects, and the initial reward
model's recall on them; each has a band or bar in the preset, checked before any arm.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cooper.config.experiment import ExperimentConfig, trunk_layers
from cooper.config.rm import RMTrainConfig
from cooper.data.perturb import perturbed_triples
from cooper.data.problems import load_problems
from cooper.data.synthetic import TRIPLES
from cooper.data.triples import load_triples
from cooper.errors import UserError
from cooper.experiment.final_eval import evaluate_policy, family_accuracies
from cooper.experiment.testbed import (
    TINY_ARITH,
    TINY_ARITH_2X1,
    TINY_ARITH_COMPARE,
    TINY_ARITH_WORDS,
    build_tiny_models,
    tiny_arith_models,
)
from cooper.infra.files import read_json, write_json
from cooper.infra.models import embedded_trunk
from cooper.report.experiment_layout import SETUP_FAILED_FILE, seed_dir, setup_dir
from cooper.rm.model import RewardModel
from cooper.rm.training import evaluate, train_bce
from cooper.types import LabelledTriple, Triple

log = logging.getLogger(__name__)

# models built on this machine, no download: the warm-started ones by their cache build
TINY_BUILDS = {"tiny-arith": TINY_ARITH, "tiny-arith-2x1": TINY_ARITH_2X1,
               "tiny-arith-2x1-words": TINY_ARITH_WORDS,
               "tiny-arith-2x1-compare": TINY_ARITH_COMPARE}
TINY_NAMES = (*TINY_BUILDS, "tiny-random")


@dataclass(frozen=True)
class Setup:
    """What every arm starts from (paths inside the experiment folder where built here)."""

    policy: str
    reward_model: str
    probe: str


def _tiny_model(name: str, role: str, folder: Path, seed: int) -> Path:
    """A tiny model built on this machine, copied into the experiment folder."""
    if name in TINY_BUILDS:
        src = tiny_arith_models(name=TINY_BUILDS[name]) / ("policy" if role == "policy" else "reward")
    else:
        tiny = build_tiny_models(folder / "tiny-random", seed=seed)
        src = tiny.policy if role == "policy" else tiny.reward
    dst = folder / role
    shutil.copytree(src, dst)
    return dst


def _reward_base(name: str | None, folder: Path, seed: int) -> str | None:
    """The initial reward model's checkpoint before any training of ours."""
    if name in TINY_NAMES:
        return str(_tiny_model(name, "reward_base", folder, seed))
    if (k := trunk_layers(name)) is not None:
        return str(embedded_trunk(k))  # read-only in the cache; the trained model is saved here
    return name


def _triples_file(path: Path, dataset: str, split: str, n: int, seed: int,
                  unfinished: int = 0, min_change: float = 0.0) -> Path:
    """Gold solutions (label 1) and perturbed copies (label 0), those answers further than
    ``min_change`` from the reference; ``unfinished`` more label-0 triples are gold solutions
    cut at a random point before their final answer."""
    rng = random.Random(seed)
    if dataset in TRIPLES:  # labelled by the gold judge: the rule cannot read them
        triples = TRIPLES[dataset](split, n, rng)
    else:
        triples, _ = perturbed_triples(load_problems(dataset, split), n, rng,
                                       min_change=min_change)
    if len(triples) < n:
        raise UserError(f"{dataset}/{split} gave only {len(triples)} perturbed triples of the "
                        f"{n} asked for; lower the number"
                        + (" or rm_init.min_change" if min_change > 0 else ""))
    golds = [t for t in triples if t.label == 1]
    for i in range(unfinished):
        g = rng.choice(golds)
        gold, ref = g.triple.completion, g.triple.reference
        end = gold.rfind(ref) if ref in gold else len(gold)
        cut = gold[:rng.randint(1, max(1, end - 1))]
        triples.append(LabelledTriple(Triple(g.triple.question, ref, cut), False,
                                      f"{g.id}/unfinished-{i}", g.source))
    rng.shuffle(triples)
    path.write_text("".join(json.dumps(t.to_json()) + "\n" for t in triples))
    return path


ROUND_SEED_STEP = 7919  # round r > 0 of a seed's reward-model training is seeded seed + r * this


def _train_initial_rm(exp: ExperimentConfig, base: str, data: Path, probe: list[LabelledTriple],
                      out: Path) -> dict:
    """BCE on the perturbed triples, up to ``rm_init.max_rounds`` times, until the probe reaches
    ``probe.min_accuracy``.

    Why rounds: the same recipe converges in most seeds and stops near chance in some (seed 4 on
    one machine: probe accuracy 0.50, AUROC 0.59, a reward model that scores everything alike).
    Each round after the first starts again from ``base`` with another score head and data
    order: continuing such a model for another round left it at chance (0.50, AUROC 0.58).
    Every round seeds torch before loading ``base``: a base without a score head (the embedded
    trunk) draws a new one at load, and torch's generator starts from a different seed in every
    process, so an unseeded round 1 trained a different head on every run of the same seed.
    The last round's model is saved; the caller checks the bar.
    """
    import torch

    r = exp.rm_init
    rows = load_triples(data).rows
    bar = exp.probe.min_accuracy
    rounds: list[dict[str, float]] = []
    for k in range(r.max_rounds):
        seed = exp.train.seed + k * ROUND_SEED_STEP
        torch.manual_seed(seed)  # the score head where the base has none: another each round
        rm = RewardModel.load(base, max_length=r.max_length, dtype="float32")
        if r.disturb:
            _disturb(rm.model, r.disturb, seed)
        report = train_bce(rm, rows, RMTrainConfig(
            lr=r.lr, epochs=r.epochs, batch_size=r.batch_size, holdout=0.0, seed=seed,
            train_layers=r.train_layers), progress=False)
        m = evaluate(rm, probe)
        rounds.append({"train_loss": report.epochs[-1].train_loss, "steps": report.optimizer_steps,
                       "probe_accuracy": m.accuracy, "probe_auroc": m.auroc})
        log.info("initial reward model, round %d: probe accuracy %.3f, AUROC %.3f",
                 k + 1, m.accuracy, m.auroc)
        if bar is None or m.accuracy >= bar:
            break
    rm.save(out)
    return {"train_loss": rounds[-1]["train_loss"],
            "train_accuracy": evaluate(rm, rows).accuracy, "steps": rounds[-1]["steps"],
            "rounds": len(rounds), "per_round": rounds}


def _disturb(model, scale: float, seed: int) -> None:
    """Multiply every weight by (1 + scale * N(0, 1)): another machine's rounding, roughly."""
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1 + scale * torch.randn(p.shape, generator=g, dtype=p.dtype))


class SetupCheckError(UserError):
    """The setup built a starting point outside the preset's band: no arm may start from it."""


def policy_check(exp: ExperimentConfig, policy: str) -> tuple[dict[str, Any], list[Triple]]:
    """The initial policy's held-out accuracy, measured as the runs' ``val/accuracy`` is
    (``train.validation``'s problems and sampling), and the preset's band for it. With the gold
    judge, also the rule's accuracy and the share of the gold-correct answers it rejects (all,
    and where the reference is in digits: the form dial); the second value is those answers'
    samples (empty without the gold judge)."""
    from cooper.eval.sampling import evaluate_problems
    from cooper.infra.generation import HFGenerator, SamplingConfig
    from cooper.rl.blind_spot import reference_in_digits

    v = exp.train.validation
    gen = HFGenerator.load(policy, batch_size=exp.final_eval.batch_size,
                           dtype=exp.train.policy.dtype)
    problems = list(load_problems(v.dataset, v.split, limit=v.limit))
    sampling = SamplingConfig(n=v.samples, temperature=v.temperature, top_p=v.top_p,
                              max_new_tokens=v.max_new_tokens, seed=exp.train.seed)
    r = evaluate_problems(gen, problems, sampling, benchmark=f"{v.dataset}:{v.split}",
                          verify_mode=exp.held_out_mode())
    check = {"accuracy": r.metrics.accuracy,
             "band": [exp.setup.policy_accuracy_min, exp.setup.policy_accuracy_max],
             "benchmark": f"{v.dataset}:{v.split}", "problems": len(problems),
             "samples": v.samples}
    if r.metrics.rule_accuracy is None:
        return check, []
    right = [s for s in r.samples if s.correct]
    questions = {p.id: p.question for p in problems}
    missed = [Triple(questions[s.problem_id], s.reference, s.completion) for s in right
              if not s.rule_correct]
    form = [s for s in right if reference_in_digits(s.reference)]
    if families := family_accuracies(r.samples, problems):
        check["families"] = families
    check.update(rule_accuracy=r.metrics.rule_accuracy, gold_correct=len(right),
                 rule_missed=len(missed) / len(right) if right else None,
                 rule_missed_form=(sum(not s.rule_correct for s in form) / len(form)
                                   if form else None),
                 rule_missed_band=[exp.setup.rule_missed_min, exp.setup.rule_missed_max])
    return check, missed


def check_rule_missed(exp: ExperimentConfig, check: dict[str, Any]) -> None:
    """The rule must miss a share of the initial policy's right answers within the preset's
    band: the blind-rule testbed is about what the rule misses."""
    lo, hi = check.get("rule_missed_band", (None, None))
    missed = check.get("rule_missed")
    if lo is None and hi is None:
        return
    if missed is not None and (lo is None or missed >= lo) and (hi is None or missed <= hi):
        return
    got = "no gold-correct answer to count" if missed is None else f"{_pct(missed)}"
    raise SetupCheckError(
        f"the rule rejects {got} of the initial policy's gold-correct answers on "
        f"{check['benchmark']}, outside the preset's band {_pct(lo or 0.0)} to "
        f"{_pct(hi if hi is not None else 1.0)} (setup.rule_missed_min / _max): the blind-rule "
        f"testbed needs a rule that misses some right answers and not most. setup.policy="
        f"{exp.setup.policy!r} and train.validation.dataset={exp.train.validation.dataset!r} "
        "gave it; use the preset's shipped policy and dataset, or widen the band only if you "
        "mean to")


def recall_missed(rm: RewardModel, missed: list[Triple], batch_size: int = 32) -> dict[str, Any]:
    """The reward model's recall on right answers the rule rejects (probability >= 0.5): all,
    and split by dial (reference in digits: the answer's form; a number in words: the
    reference; a truth value: the yes/no family)."""
    from cooper.rl.blind_spot import recall_by_dial

    scores = rm.score(missed, batch_size=batch_size) if missed else []
    recall = recall_by_dial([(x, t.reference) for x, t in zip(scores, missed, strict=True)])
    return {"answers": len(missed), "recall_missed": recall[0], "recall_missed_form": recall[1],
            "recall_missed_reference": recall[2], "recall_missed_yesno": recall[3]}


def check_policy(exp: ExperimentConfig, check: dict[str, Any]) -> None:
    lo, hi = check["band"]
    acc = check["accuracy"]
    if (lo is None or acc >= lo) and (hi is None or acc <= hi):
        return
    band = f"{_pct(lo) if lo is not None else '0%'} to {_pct(hi) if hi is not None else '100%'}"
    raise SetupCheckError(
        f"the initial policy answers {_pct(acc)} of {check['benchmark']} ({check['problems']} "
        f"problems x {check['samples']} samples), outside the preset's band {band} "
        f"(setup.policy_accuracy_min / _max): the testbed needs a policy that is right on some "
        f"problems and wrong on others, or its verdicts mean nothing. setup.policy="
        f"{exp.setup.policy!r} gave it; use the testbed's shipped policy (setup.policy="
        "tiny-arith-2x1), or a policy inside the band; widen the band only if you mean to")


def check_probe(exp: ExperimentConfig, accuracy: float, auroc: float,
                rounds: int | None) -> None:
    bar = exp.probe.min_accuracy
    if bar is None or accuracy >= bar:
        return
    trained = (f"after {rounds} round(s) of {exp.rm_init.epochs} epoch(s) "
               "(rm_init.max_rounds)" if rounds else "untrained (rm_init.triples=0)")
    raise SetupCheckError(
        f"the initial reward model is right on {_pct(accuracy)} of the probe (AUROC "
        f"{auroc:.3f}), {trained}, under the preset's bar {_pct(bar)} (probe.min_accuracy): "
        "the testbed needs a capable reward model with a blind spot, not one near chance. "
        "Raise rm_init.max_rounds, rm_init.triples or rm_init.lr, or check "
        f"setup.reward_model={exp.setup.reward_model!r}")


def check_recall(exp: ExperimentConfig, recall: dict[str, Any]) -> None:
    bar, got = exp.probe.min_recall_missed, recall["recall_missed"]
    if bar is None or (got is not None and got >= bar):
        return
    raise SetupCheckError(
        f"the initial reward model calls right {_pct(got) if got is not None else 'none'} of "
        f"the {recall['answers']} right answers of the initial policy that the rule rejects, "
        f"under the preset's bar {_pct(bar)} (probe.min_recall_missed): a reward model that "
        "cannot read what the rule misses cannot pay it. Train it on data with those forms "
        "(rm_init.dataset), longer (rm_init.epochs), or lower the bar only if you mean to")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def run_setup(exp: ExperimentConfig, out: Path) -> Setup:
    """Stage 1 for the seed folder ``out`` (skipped when ``out/setup/setup.json`` exists)."""
    folder = setup_dir(out)
    done = read_json(folder / "setup.json")
    if done:
        log.info("%s/setup: complete, reused", out.name)
        return Setup(**{k: _located(v, folder) for k, v in done["setup"].items()})
    if folder.exists():  # an interrupted setup: start it over (it takes seconds to minutes)
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    log.info("%s/setup: building", out.name)
    t0 = time.perf_counter()
    try:
        return _build_setup(exp, out, folder, t0)
    except SetupCheckError as e:  # kept, so that the report says why this seed has no arm
        write_json(folder / SETUP_FAILED_FILE,
                   {"failed": str(e), "seconds": time.perf_counter() - t0})
        raise


def _build_setup(exp: ExperimentConfig, out: Path, folder: Path, t0: float) -> Setup:
    seed = exp.train.seed
    s = exp.setup
    policy = (str(_tiny_model(s.policy, "policy", folder, seed)) if s.policy in TINY_NAMES
              else s.policy)
    info: dict[str, Any] = {}
    # the checks come first and cheapest first: a policy out of band stops in seconds; with the
    # gold judge the same samples say what the rule misses
    missed: list[Triple] = []
    if (s.policy_accuracy_min is not None or s.policy_accuracy_max is not None
            or exp.train.validation.judge == "gold"):
        import torch

        with torch.random.fork_rng():  # its sampling must not move what the setup draws next
            info["policy_check"], missed = policy_check(exp, policy)
        log.info("%s/setup: initial policy's held-out accuracy %.3f", out.name,
                 info["policy_check"]["accuracy"])
        check_policy(exp, info["policy_check"])
        check_rule_missed(exp, info["policy_check"])
    base = _reward_base(s.reward_model, folder, seed)
    probe = exp.probe.file or str(_triples_file(folder / "probe.jsonl", exp.probe.dataset,
                                                exp.probe.split, exp.probe.triples, seed + 1))
    probe_rows = load_triples(probe).rows
    if exp.rm_init.triples:
        data = _triples_file(folder / "rm_train.jsonl", exp.rm_init.dataset, exp.rm_init.split,
                             exp.rm_init.triples, seed, exp.rm_init.unfinished,
                             exp.rm_init.min_change)
        info["rm_init"] = _train_initial_rm(exp, base, data, probe_rows, folder / "reward_model")
        reward_model = str(folder / "reward_model")
    else:
        reward_model = base
    rm = RewardModel.load(reward_model, dtype="float32")
    m = evaluate(rm, probe_rows)
    info.update(probe_accuracy=m.accuracy, probe_auroc=m.auroc, probe_bar=exp.probe.min_accuracy)
    check_probe(exp, m.accuracy, m.auroc, info.get("rm_init", {}).get("rounds"))
    if "rule_missed" in info.get("policy_check", {}):  # the gold judge sees what the rule misses
        info["rm_recall"] = {**recall_missed(rm, missed), "bar": exp.probe.min_recall_missed}
        got = info["rm_recall"]["recall_missed"]
        log.info("%s/setup: the reward model calls right %s of the %d right answers the rule "
                 "rejects", out.name, "none" if got is None else _pct(got), len(missed))
        check_recall(exp, info["rm_recall"])
    setup = Setup(policy, reward_model, probe)
    info["initial_eval"] = evaluate_policy(exp, policy, folder / "initial_eval.json")
    stored = {k: _stored(v, folder) for k, v in dataclasses.asdict(setup).items()}
    write_json(folder / "setup.json", {"setup": stored, **info,
                                       "seconds": time.perf_counter() - t0}, default=str)
    return setup


def _stored(path: str, folder: Path) -> str:
    """What ``setup.json`` records: a path inside the setup folder relative to it, so that a
    moved or copied experiment folder (a run brought home from a cluster, a seed's setup reused
    for a longer preset) uses its own files and not the ones where it was built; anything else
    (a model name, the user's probe file) as given."""
    try:
        return Path(path).resolve().relative_to(folder.resolve()).as_posix()
    except ValueError:
        return path


def _located(path: str, folder: Path) -> str:
    """The inverse of :func:`_stored`. A ``setup.json`` written before paths were relative holds
    absolute ones, which are used as they are."""
    inside = folder / path
    return str(inside) if not Path(path).is_absolute() and inside.exists() else path


def setup_summary(out: str | os.PathLike, seed: int) -> str:
    """One line of a seed's setup figures (``setup.json``), as ``--setup-only`` prints them."""
    done = read_json(setup_dir(seed_dir(Path(out), seed)) / "setup.json") or {}
    parts = []
    if check := done.get("policy_check"):
        parts.append(f"initial policy {_pct(check['accuracy'])} on {check['benchmark']}")
        if check.get("rule_missed") is not None:
            parts.append(f"the rule rejects {_pct(check['rule_missed'])} of its right answers")
    if "probe_accuracy" in done:
        auroc = done.get("probe_auroc")
        parts.append(f"reward model's probe accuracy {_pct(done['probe_accuracy'])}"
                     + (f" (AUROC {auroc:.3f})" if auroc is not None else ""))
    if (recall := done.get("rm_recall", {}).get("recall_missed")) is not None:
        parts.append(f"reward model's recall on those {_pct(recall)}")
    if rounds := done.get("rm_init", {}).get("rounds"):
        parts.append(f"{rounds} training round(s)")
    if ev := done.get("initial_eval"):
        parts.append(f"no-RL test accuracy {_pct(ev['average'])}")
    if "seconds" in done:
        parts.append(f"{done['seconds']:.0f} s")
    return "; ".join(parts) or "no complete setup"
