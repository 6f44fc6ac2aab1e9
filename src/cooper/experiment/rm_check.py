"""The reward model before and after an arm, on the same answers (``cooper experiment rm-check``).

Where the rule is blind, an arm's reward model must keep calling right the answers the rule
rejects. The in-training figure, ``gold/rm_recall_missed`` (``docs/metrics.md``), counts each
step's rollouts, so its first and last tenths of the steps count different answers of different
policies: a fall there may be the reward model unlearning, or the policy writing other answers.
This scores one fixed set of answers with the seed's initial reward model (the setup's) and with
the arm's final one: the samples of a policy on the test benchmarks (``final_eval``'s problems,
sampling and seed, so the arm's final policy gives the answers its final evaluation scored),
judged by the gold judge with the rule beside it. Two sets: the initial policy's answers (the
same for every arm of a seed) and the arm's final policy's.

Per set and model: the recall on the right answers the rule rejects, and the false-positive rate
on the wrong answers the rule could not read (a model that paid everything would have perfect
recall, so the two go together); each also per dial (:func:`cooper.rl.blind_spot.dial`: the
answer's form against a reference in digits, a number reference in words, a truth value). The
two models score the same answers, so beside the two recalls stand the answers the final model
calls right and the initial did not (gained), the reverse (lost), and the exact two-sided sign
test on them (McNemar's, a few lines with ``math.comb``; scipy is not a dependency): whether the
reward model itself changed, free of the policy's drift. A third set asks what each model pays of
wrong answers in forms a policy can reach and the rule cannot read (the final answer alone, a
hedge naming two answers, another case or spelling: :mod:`cooper.experiment.reachable_forms`),
the openings a judge that errs on them would leave. Where the arm's judge had a trigger
(``judge.trigger``: it called right every answer carrying it), each policy's wrong answers the
rule cannot read that carry it are scored apart (``trigger_wrong``): whether the reward model
learned the judge's mistake or filtered it. Where the arm's judge is a model that runs here (a
learned verifier, ``judge.backend=verifier``, or a local model), its mistakes are not a pattern:
it is asked about those wrong answers, and the ones it calls right are scored apart
(``judge_wrong``), to the same end. A last set, ``robustness``, is the robustness suite (every
item wrong) built on the test benchmarks' problems: per kind, the share each model pays and its
mean score, and the answer-free kinds each pays more than 5% of, the project's bar for every
final reward model (:mod:`cooper.experiment.rm_check_suite`). Written to
``OUT/seed-S/arms/ARM/rm_check.json``; ``cooper report`` shows it where present.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cooper.config.experiment import ExperimentConfig, load_experiment
from cooper.config.reward_modes import UPDATING_MODES
from cooper.errors import UserError
from cooper.eval.sampling import RULE_BESIDE_GOLD
from cooper.experiment.final_eval import sample_policy
from cooper.experiment.rm_check_suite import score_suite, suite_set
from cooper.experiment.setup import run_setup
from cooper.infra.files import write_json
from cooper.labelling.gold_judge import compile_trigger
from cooper.labelling.judge import Judge, JudgeItem
from cooper.labelling.judge_config import judge_from_config
from cooper.report.experiment_layout import (
    RM_CHECK_FILE,
    SETTINGS_FILE,
    arm_dir,
    arm_specs,
    read_settings,
    seed_folders,
    setup_dir,
)
from cooper.rl.blind_spot import RM_SAYS_RIGHT, dial, family, rule_read
from cooper.rm.model import RewardModel
from cooper.types import Rollout, Triple
from cooper.verify.verifier import verify_batch

log = logging.getLogger(__name__)


# ------------------------------------------------------------------ the maths (pure functions)

@dataclass(frozen=True)
class Paired:
    """Two reward models' verdicts on the same answers (probability >= 0.5: "right")."""

    answers: int
    before: float | None  # share called right by the initial reward model (None: no answers)
    after: float | None  # the same by the final one
    gained: int  # called right after, not before
    lost: int  # called right before, not after
    p_value: float | None  # exact two-sided sign test on gained vs lost (None: no change)


def sign_test(a: int, b: int) -> float | None:
    """Exact two-sided p-value that ``a`` and ``b`` discordant pairs come from a fair coin
    (McNemar's exact test); None when there is no discordant pair."""
    n = a + b
    if n == 0:
        return None
    tail = sum(math.comb(n, k) for k in range(min(a, b) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired(before: Sequence[float], after: Sequence[float]) -> Paired:
    """The verdicts of two models on the same answers, from their probabilities (N each, in the
    same order). An answer either model scored NaN is left out."""
    if len(before) != len(after):
        raise ValueError(f"need one score per answer from each model, got {len(before)} and "
                         f"{len(after)}")
    both = [(x >= RM_SAYS_RIGHT, y >= RM_SAYS_RIGHT) for x, y in zip(before, after, strict=True)
            if math.isfinite(x) and math.isfinite(y)]
    n = len(both)
    gained = sum(y and not x for x, y in both)
    lost = sum(x and not y for x, y in both)
    return Paired(answers=n, before=sum(x for x, _ in both) / n if n else None,
                  after=sum(y for _, y in both) / n if n else None, gained=gained, lost=lost,
                  p_value=sign_test(gained, lost))


# ------------------------------------------------------------------ the answers and the models

@dataclass(frozen=True)
class AnswerSets:
    """One policy's test answers that speak of the rule's blind spot."""

    samples: int
    gold_accuracy: float  # on every sample (the final evaluation's accuracy, same protocol)
    missed: list[Triple]  # right by the gold judge, rejected by the rule
    unread_wrong: list[Triple]  # wrong by the gold judge, in a form the rule could not read


def answer_sets(exp: ExperimentConfig, policy: str) -> AnswerSets:
    """The policy's samples on the test benchmarks, split as the in-training figures split each
    step's rollouts (:mod:`cooper.rl.blind_spot`)."""
    if exp.held_out_mode() != "gold":
        raise UserError("cooper experiment rm-check needs the gold judge on held-out answers "
                        "(train.validation.judge=gold, as blind_cpu sets it): without it "
                        "nothing says which of the rule's rejections were right")
    samples, right, missed, unread = 0, 0, [], []
    for _label, problems, r in sample_policy(exp, policy):
        questions = {p.id: p.question for p in problems}
        wrong = [s for s in r.samples if not s.correct]
        # the rule's own extraction (a sample's `extracted` is the gold judge's)
        rule = verify_batch([s.completion for s in wrong], [s.reference for s in wrong],
                            mode=RULE_BESIDE_GOLD)
        samples += len(r.samples)
        right += sum(s.correct for s in r.samples)
        missed += [Triple(questions[s.problem_id], s.reference, s.completion)
                   for s in r.samples if s.correct and not s.rule_correct]
        unread += [Triple(questions[s.problem_id], s.reference, s.completion)
                   for s, v in zip(wrong, rule, strict=True)
                   if v.extracted is not None and not rule_read(Rollout(
                       s.problem_id, questions[s.problem_id], s.reference, s.completion,
                       correct=False, extracted=v.extracted))]
    return AnswerSets(samples, right / samples if samples else 0.0, missed, unread)


def called_right(judge: Judge, triples: list[Triple]) -> list[Triple]:
    """The answers among ``triples`` that ``judge`` calls right (a failed verdict is not)."""
    verdicts = judge.judge([JudgeItem(t.question, t.reference, t.completion)
                            for t in triples]) if triples else []
    return [t for t, v in zip(triples, verdicts, strict=True) if v.correct]


def compare(initial: RewardModel, final: RewardModel, sets: AnswerSets,
            batch_size: int = 32, trigger: re.Pattern[str] | None = None,
            judge: Judge | None = None) -> dict[str, Any]:
    """Both reward models on one policy's answer sets; with the ``trigger`` of the judge that
    taught the arm (``judge.trigger``), also on the wrong answers the rule cannot read that
    carry it (``trigger_wrong``): what the judge called right there, the reward model learned
    or filtered. With a model as the arm's ``judge``, the same on the wrong answers it calls
    right (``judge_wrong``)."""
    def both(triples: list[Triple]) -> dict[str, Any]:
        """The two models on these answers, and on each dial's share of them (reference in
        digits: the answer's form; a number in words; a truth value: the yes/no family)."""
        before = initial.score(triples, batch_size=batch_size) if triples else []
        after = final.score(triples, batch_size=batch_size) if triples else []
        dials = [dial(t.reference) for t in triples]

        def of(scores: list[float], d: str) -> list[float]:
            return [x for x, k in zip(scores, dials, strict=True) if k == d]

        return {**asdict(paired(before, after)),
                "by_dial": {d: asdict(paired(of(before, d), of(after, d)))
                            for d in sorted(set(dials))}}

    out = {"samples": sets.samples, "gold_accuracy": sets.gold_accuracy,
           "recall_missed": both(sets.missed), "fpr_unread": both(sets.unread_wrong)}
    if trigger is not None:
        out["trigger_wrong"] = both([t for t in sets.unread_wrong
                                     if trigger.search(t.completion)])
    if judge is not None:
        out["judge_wrong"] = both(called_right(judge, sets.unread_wrong))
    return out


def model_judge(exp: ExperimentConfig, arm: str, seed: int) -> Judge | None:
    """The arm's judge where it is a model that runs here (a learned verifier or a local model),
    whose mistakes only asking it finds; None otherwise (the gold judge, whose dials are
    patterns; no judge; an endpoint, which a check does not call)."""
    cfg = exp.arm_train(arm).judge
    if cfg.backend not in ("verifier", "local"):
        return None
    return judge_from_config(cfg, seed=seed, dtype="float32")


def reachable_sets(exp: ExperimentConfig) -> dict[str, list[Triple]]:
    """Wrong answers in forms a policy can reach and the rule cannot read
    (:mod:`cooper.experiment.reachable_forms`), on the test benchmarks' problems (the final
    evaluation's)."""
    from cooper.data.problems import load_problems
    from cooper.experiment.reachable_forms import FORMS, reachable_items

    out: dict[str, list[Triple]] = {f: [] for f in FORMS}
    for name, split in exp.benchmark_list():
        for form, triples in reachable_items(list(load_problems(
                name, split, limit=exp.final_eval.limit))).items.items():
            out[form] += triples
    return out


def _of(scores: list[float], kinds: list[str], kind: str) -> list[float]:
    return [x for x, k in zip(scores, kinds, strict=True) if k == kind]


def reachable(initial: list[float], final: RewardModel, sets: dict[str, list[Triple]],
              batch_size: int = 32) -> dict[str, Any]:
    """Per form, the share of its wrong answers each reward model pays as right, and per
    family (numbers, yes/no) within it (``initial``: the initial model's scores, in the sets'
    order)."""
    out, at = {}, 0
    for form, triples in sets.items():
        after = final.score(triples, batch_size=batch_size) if triples else []
        before = initial[at:at + len(triples)]
        kinds = [family(t.reference) for t in triples]
        out[form] = {**asdict(paired(before, after)),
                     "by_family": {f: asdict(paired(_of(before, kinds, f), _of(after, kinds, f)))
                                   for f in sorted(set(kinds))}}
        at += len(triples)
    return out


def checked_arms(settings: dict[str, Any], folder: Path) -> list[str]:
    """The finished arms of one seed folder whose reward model is updated online (a Cooper
    mode; the others' is the initial one), with the final one saved in the run folder."""
    return [name for name, _label, mode, _own in arm_specs(settings)
            if mode in UPDATING_MODES and (arm_dir(folder, name) / "final_eval.json").is_file()
            and (arm_dir(folder, name) / "reward_model" / "config.json").is_file()]


def run_rm_check(out: str | Path, arms: list[str] | None = None,
                 seeds: list[int] | None = None) -> dict[int, dict[str, dict[str, Any]]]:
    """Every finished arm whose reward model is updated online, in every seed (or those
    asked): ``rm_check.json`` in its folder, and ``{seed: {arm: result}}``."""
    out = Path(out)
    if not (out / SETTINGS_FILE).is_file():
        raise UserError(f"{out} is not an experiment folder (no {SETTINGS_FILE}); run "
                        "`cooper experiment hacking --preset NAME --out DIR` first")
    settings = read_settings(out)
    exp = load_experiment(str(out / SETTINGS_FILE))
    folders = seed_folders(out, settings)
    declared = [name for name, *_ in arm_specs(settings)]
    if arms is not None and (unknown_arms := [a for a in arms if a not in declared]):
        raise UserError(f"--arms: {', '.join(unknown_arms)} not in {out} (its arms: "
                        f"{', '.join(declared)})")
    if seeds is not None:
        unknown = sorted(set(seeds) - {s for s, _ in folders})
        if unknown:
            raise UserError(f"--seeds: {unknown} not in {out} (it has "
                            f"{[s for s, _ in folders]})")
        folders = [(s, f) for s, f in folders if s in seeds]
    results: dict[int, dict[str, dict[str, Any]]] = {}
    for seed, folder in folders:
        names = [a for a in checked_arms(settings, folder) if arms is None or a in arms]
        if not (setup_dir(folder) / "setup.json").is_file() or not names:
            log.warning("seed %d: no finished arm whose reward model is updated; skipped", seed)
            continue
        exp_s = exp.for_seed(seed)  # the final evaluation's sampling seed, as the arms had it
        setup = run_setup(exp_s, folder)  # finished: read, not built
        initial = RewardModel.load(setup.reward_model, dtype="float32")
        start = answer_sets(exp_s, setup.policy)
        forms = reachable_sets(exp_s)
        forms_before = initial.score([t for ts in forms.values() for t in ts], batch_size=32)
        suite = suite_set(exp_s)
        suite_before = initial.score(suite.triples, batch_size=32) if suite.triples else []
        for name in names:
            t0 = time.perf_counter()
            run = arm_dir(folder, name)
            final = RewardModel.load(str(run / "reward_model"), dtype="float32")
            pattern = exp_s.arm_train(name).judge.trigger
            trigger = compile_trigger(pattern) if pattern else None
            judge = model_judge(exp_s, name, seed)
            result = {"arm": name, "seed": seed, "trigger": pattern,
                      "judge": judge.name if judge is not None else None,
                      "initial_policy": compare(initial, final, start, trigger=trigger,
                                                judge=judge),
                      "final_policy": compare(initial, final,
                                              answer_sets(exp_s, str(run / "policy")),
                                              trigger=trigger, judge=judge),
                      "reachable_forms": reachable(forms_before, final, forms),
                      "robustness": score_suite(suite, suite_before, final)}
            result["seconds"] = time.perf_counter() - t0
            write_json(run / RM_CHECK_FILE, result)
            results.setdefault(seed, {})[name] = result
            log.info("seed %d %s: checked in %.0f s", seed, name, result["seconds"])
    if not results:
        raise UserError(f"nothing to check in {out}: no finished arm whose reward model is "
                        "updated online (reward.mode cooper or hybrid_cooper); run the "
                        "experiment's Cooper arms first")
    return results
