"""The metrics one Cooper step logs, from its two stages' statistics (each name defined in
``docs/metrics.md``): what :class:`~cooper.rl.trl_reward.CooperRewardFunction` hands to TRL's
``log_metric`` and ``cooper train`` writes to ``metrics.jsonl``."""

from __future__ import annotations

from cooper.config.reward_modes import Payer
from cooper.rl.blind_spot import blind_spot_metrics
from cooper.rl.judging import judge_metrics
from cooper.rl.pairs import RolloutStats
from cooper.rl.stage2_records import Stage2Stats


def rollout_metrics(stats: RolloutStats, seconds: dict[str, float],
                    pays: Payer = Payer.REWARD_MODEL) -> dict[str, float]:
    """Stage 1's metrics: the rewards, the hacking signals and the time of each part (with
    the hybrid reward's mean when it pays)."""
    m = {"reward/rule_mean": stats.rule_mean}
    if pays is Payer.HYBRID and stats.hybrid_mean is not None:
        m["reward/hybrid_mean"] = stats.hybrid_mean
    if stats.rm_mean is not None:
        m.update({"reward/rm_mean": stats.rm_mean, "hacking/gap": stats.gap,
                  "rm/agreement": stats.agreement})
    if stats.rm_wrong_mean is not None:
        m["rm/score_wrong"] = stats.rm_wrong_mean
    if stats.top_wrong is not None:
        m["hacking/top_wrong"] = stats.top_wrong
    if stats.group_auroc is not None:
        m["rm/group_auroc"] = stats.group_auroc
    if stats.rm_mean is not None or stats.nonfinite_scores:  # counted even when all are
        m["reward/nonfinite"] = stats.nonfinite_scores
    if stats.blind_spot is not None:
        m.update(blind_spot_metrics(stats.blind_spot))
    if stats.judge is not None:  # reward.judge_rejected: the judge paid what the rule rejected
        m.update(judge_metrics(stats.judge))
    m["rm/problems_with_positive"] = stats.problems_with_positive
    m["verify/timeouts"] = stats.verifier_timeouts
    m.update({f"perf/{name}": value for name, value in seconds.items()})
    return m


def stage2_metrics(st: Stage2Stats) -> dict[str, float]:
    """Stage 2's metrics: the pairs, where their negatives came from, the update."""
    m = {"rm/positives": st.positives, "rm/pairs": st.pairs,
         "rm/pairs_rollout": st.pairs_rollout, "rm/pairs_assistant": st.pairs_assistant,
         "rm/negatives_ambiguous": st.negatives_ambiguous,
         "rm/valid_negatives": st.valid_negatives,
         "rm/fallback_negatives": st.fallback_negatives, "rm/dropped_pairs": st.dropped,
         "rm/updated": float(st.updated), "rm/skipped_nonfinite": float(st.skipped_nonfinite),
         "perf/negatives": st.seconds_negatives,
         "perf/negatives_total": st.seconds_negatives_total,
         "perf/rm_update": st.seconds_update}
    if st.loss is not None:
        m.update({"rm/loss": st.loss, "rm/pair_acc_before": st.pair_acc_before})
    if st.grad_norm is not None:
        m["rm/grad_norm"] = st.grad_norm
    if st.changed_fraction is not None:
        m["rm/changed_fraction"] = st.changed_fraction
    if st.pairs_replay:
        m["rm/pairs_replay"] = st.pairs_replay
    if st.pairs_forms:
        m["rm/pairs_forms"] = st.pairs_forms
    if st.judge is not None:  # rm_update.labels=judge: the judge labelled the update
        m.update(judge_metrics(st.judge))
    if st.judge_gold_agreement is not None:
        m["judge/gold_agreement"] = st.judge_gold_agreement
    return m
