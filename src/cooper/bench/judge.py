"""A judge on the rule's rejections: how often it agrees with the gold judge, and its time.

What a judge asked during RL sees (``reward.judge_rejected``, ``rm_update.labels=judge``): the
answers the rule rejects. This benchmark samples them as a run would: a testbed policy (the
shipped start of ``blind_cpu`` by default) answers held-out problems at the training temperature,
the rule rejects some, and each distinct answer to a problem (the unit the run asks about) goes
to the judge. The gold judge, right by construction on the testbeds, scores the judge's
verdicts: accuracy, recall on the right answers the rule missed (what a judge is for), its
specificity on the wrong ones (what keeps a policy from exploiting it), per family (numbers,
yes/no), the calls that gave no verdict, seconds per call, and in ``choice`` mode the AUROC of
its P(YES) against the gold judge (is there a signal that another threshold would find?). The judge is a model spec as
``cooper data label --judge`` takes it (the embedded model in ``choice`` mode by default; an
``api:MODEL@URL`` endpoint), ``verifier:DIR`` (a learned verifier: a reward model trained by
``cooper rm train``), or ``gold`` with ``--error-rate`` (the experiment's stand-in) or with
``--trigger``/``--near-miss`` (the foolable judge: systematic errors).
"""

from __future__ import annotations

import argparse
import time
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    from cooper.infra.models import DEFAULT_MODEL

    p.add_argument("--judge", default=DEFAULT_MODEL,
                   help="the judge: a local model (the embedded default, a folder, a Hub id), "
                        "api:MODEL@URL, verifier:DIR (a learned verifier: a reward model "
                        "trained by `cooper rm train`), or 'gold' (default: %(default)s)")
    p.add_argument("--judge-mode", default="choice", choices=("choice", "generate"),
                   help="choice: a local model's probabilities of YES and NO (one forward "
                        "pass); generate: it writes a reply ending in VERDICT: YES/NO "
                        "(default: %(default)s)")
    p.add_argument("--judge-max-tokens", type=int, default=256,
                   help="longest reply in generate mode (default: %(default)s)")
    p.add_argument("--error-rate", type=float, default=0.0,
                   help="--judge gold only: the share of its verdicts flipped (default: "
                        "%(default)s)")
    p.add_argument("--trigger", default=None,
                   help="--judge gold only: a regular expression; a rejected answer in which it "
                        "is found is judged right whatever it says (the foolable judge, "
                        "docs/training.md, \"A judge that errs\")")
    p.add_argument("--near-miss", type=int, default=0,
                   help="--judge gold only: an integer answer within this distance of the "
                        "reference is judged right (default: %(default)s)")
    p.add_argument("--policy", default="tiny-arith-2x1-compare",
                   help="who answers: a testbed policy name (tiny-arith-2x1-compare, "
                        "tiny-arith-2x1-words) or a folder (default: %(default)s)")
    p.add_argument("--dataset", default="arith_2x1_compare", help="(default: %(default)s)")
    p.add_argument("--split", default="validation", help="(default: %(default)s)")
    p.add_argument("--problems", type=int, default=150, help="the first N (default: %(default)s)")
    p.add_argument("--samples", type=int, default=4, help="per problem (default: %(default)s)")
    p.add_argument("--temperature", type=float, default=1.0,
                   help="sampling temperature, the training rollouts' (default: %(default)s)")
    p.add_argument("--max-new-tokens", type=int, default=64, help="(default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=8,
                   help="a local judge's sequences per forward pass (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")


def _policy_dir(name: str) -> str:
    from cooper.experiment.setup import TINY_BUILDS
    from cooper.experiment.testbed import tiny_arith_models

    return str(tiny_arith_models(name=TINY_BUILDS[name]) / "policy") if name in TINY_BUILDS \
        else name


def _judge(args: argparse.Namespace):
    from cooper.labelling.backends import LocalOptions, open_generator, parse_spec
    from cooper.labelling.gold_judge import GoldJudge
    from cooper.labelling.judge import VerifierJudge, make_judge

    if args.judge == "gold" and (args.trigger or args.near_miss):
        from cooper.labelling.gold_judge import FoolableJudge

        return FoolableJudge(trigger=args.trigger, near_miss=args.near_miss, seed=args.seed)
    if args.judge == "gold":
        return GoldJudge(error_rate=args.error_rate, seed=args.seed)
    if args.judge.startswith("verifier:"):
        return VerifierJudge.load(args.judge.removeprefix("verifier:"),
                                  batch_size=args.batch_size)
    gen = open_generator(parse_spec(args.judge), local=LocalOptions(batch_size=args.batch_size))
    return make_judge(gen, mode=args.judge_mode, max_tokens=args.judge_max_tokens,
                      batch_size=args.batch_size)


def _share(hits: list[bool]) -> float | None:
    return sum(hits) / len(hits) if hits else None


def agreement(judged: list[bool | None], gold: list[bool]) -> dict[str, Any]:
    """The judge's verdicts (None: no verdict) against the gold judge's: accuracy over the
    answers with a verdict, recall on the gold-right ones, specificity on the gold-wrong ones,
    and the share with no verdict."""
    pairs = [(j, g) for j, g in zip(judged, gold, strict=True) if j is not None]
    return {"answers": len(judged), "right": sum(gold), "no_verdict": len(judged) - len(pairs),
            "accuracy": _share([j == g for j, g in pairs]),
            "recall": _share([j for j, g in pairs if g]),
            "specificity": _share([not j for j, g in pairs if not g]),
            "balanced_accuracy": (None if not any(g for _, g in pairs)
                                  or all(g for _, g in pairs) else
                                  (_share([j for j, g in pairs if g])
                                   + _share([not j for j, g in pairs if not g])) / 2)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from cooper.data.problems import load_problems
    from cooper.data.prompts import prompt_messages
    from cooper.errors import UserError
    from cooper.infra.generation import HFGenerator, SamplingConfig
    from cooper.rl.blind_spot import family
    from cooper.rl.judging import answer_key
    from cooper.types import Rollout
    from cooper.verify.verifier import verify_batch

    for key in ("problems", "samples", "batch_size", "judge_max_tokens"):
        if getattr(args, key) < 1:
            raise UserError(f"--{key.replace('_', '-')} must be >= 1")
    if args.error_rate and args.judge != "gold":
        raise UserError("--error-rate flips the gold judge's verdicts; use it with --judge gold")
    if (args.trigger or args.near_miss) and args.judge != "gold":
        raise UserError("--trigger and --near-miss fool the gold judge; use them with --judge "
                        "gold (a real judge makes its own errors)")
    if (args.trigger or args.near_miss) and args.error_rate:
        raise UserError("--error-rate (random flips) and --trigger/--near-miss (systematic "
                        "errors) are two judges: give one")
    if not 0.0 <= args.error_rate <= 1.0:
        raise UserError(f"--error-rate is a share in [0, 1], got {args.error_rate}")
    problems = list(load_problems(args.dataset, args.split, limit=args.problems))
    policy = HFGenerator.load(_policy_dir(args.policy), batch_size=64)
    sampling = SamplingConfig(n=args.samples, temperature=args.temperature, top_p=1.0,
                              max_new_tokens=args.max_new_tokens, seed=args.seed)
    out = policy.generate([prompt_messages(p.question) for p in problems], sampling)
    texts = [g.text for gs in out for g in gs]
    owners = [p for p, gs in zip(problems, out, strict=True) for _ in gs]
    refs = [p.reference for p in owners]
    rule = verify_batch(texts, refs, mode="strict")
    # each distinct answer to a problem, as a run asks about it
    rejected: dict[tuple[str, str], Rollout] = {}
    for p, text, v in zip(owners, texts, rule, strict=True):
        if not v.correct:
            r = Rollout(p.id, p.question, p.reference, text, False, v.extracted)
            rejected.setdefault(answer_key(r), r)
    items = list(rejected.values())
    if not items:
        raise UserError("the rule rejected nothing: no answer to put to the judge")
    gold = [v.correct for v in verify_batch([r.completion for r in items],
                                            [r.reference for r in items], mode="gold")]
    from cooper.labelling.judge import JudgeItem

    judge = _judge(args)
    t0 = time.perf_counter()
    verdicts = judge.judge([JudgeItem(r.question, r.reference, r.completion) for r in items])
    seconds = time.perf_counter() - t0
    judged = [v.correct for v in verdicts]
    counters = judge.metrics()  # the gold judge's flips, a foolable judge's turns by dial
    judge.close()
    # choice mode's P(YES): is there a signal a threshold other than 0.5 would find?
    p_yes = [v.p_yes for v in verdicts]
    auroc = None
    if all(x is not None for x in p_yes) and 0 < sum(gold) < len(gold):
        from cooper.rm.metrics import auroc as auroc_of

        auroc = auroc_of(p_yes, gold)
    families = {f: agreement([j for j, r in zip(judged, items, strict=True)
                              if family(r.reference) == f],
                             [g for g, r in zip(gold, items, strict=True)
                              if family(r.reference) == f])
                for f in sorted({family(r.reference) for r in items})}
    return {"judge": getattr(judge, "name", args.judge), "mode": judge.mode,
            "policy": args.policy, "benchmark": f"{args.dataset}:{args.split}",
            "problems": len(problems), "samples": len(texts),
            "rule_rejected": sum(not v.correct for v in rule),
            "distinct_rejected_answers": len(items), **agreement(judged, gold),
            "p_yes_auroc": auroc, "families": families, "counters": counters,
            **({"trigger_share": sum(bool(judge.trigger.search(r.completion)) for r in items)
                / len(items)} if getattr(judge, "trigger", None) is not None else {}),
            "seconds": seconds,
            "seconds_per_answer": seconds / len(items)}
