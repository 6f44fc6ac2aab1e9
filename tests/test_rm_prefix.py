"""Shared prefixes run once: the grouping by hand, and the logits and gradients of full forwards."""

from __future__ import annotations

import logging

import pytest
import torch

from cooper.rm import prefix
from cooper.rm.memo import LogitMemo
from cooper.rm.model import RewardModel
from cooper.rm.prefix import PrefixGroup, batch_order, chunks, common_prefix, plan_groups
from cooper.rm.update import PairwiseUpdater
from cooper.types import Triple

# two questions, several completions each (a shared start too), and one input sharing nothing
TRIPLES = ([Triple("What is 3+4?", "7", c) for c in
            ("3+4=7. #### 7", "3+4=8. #### 8", "Add: 3+4=7. " * 3 + "#### 7", "7")]
           + [Triple("What is 12+30?", "42", c) for c in ("12+30=42. #### 42", "#### 41")]
           + [Triple("Name a colour.", "red", "Red is a colour, and so is blue. #### red")])


@pytest.fixture
def rm(tiny_models):
    torch.manual_seed(0)
    return RewardModel.load(tiny_models.reward, max_length=256)


def test_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([], [1]) == 0


def test_groups_by_hand():
    ids = [[1, 2, 3, 4, 5, 6, 7], [9, 9], [1, 2, 3, 4, 5, 6, 8], [1, 2, 3, 4, 5, 6, 7, 9]]
    groups = plan_groups(ids)
    # the three inputs starting 1..6 share 6 tokens (7 with each other, 6 with input 2), longest
    # first; [9, 9] shares nothing; every input is in exactly one group
    assert groups == [PrefixGroup(6, (3, 0, 2)), PrefixGroup(0, (1,))]


def test_a_member_keeps_its_last_token_and_short_prefixes_are_not_shared():
    # the shorter input is a prefix of the longer one: the shared part stops one token before
    # its end, so its scored token runs in the suffix pass
    assert plan_groups([[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5]]) == [PrefixGroup(4, (0, 1))]
    # three shared tokens are under MIN_PREFIX (4): both run alone
    assert plan_groups([[1, 2, 3, 7], [1, 2, 3, 8]]) == [PrefixGroup(0, (0,)), PrefixGroup(0, (1,))]


def test_a_long_member_runs_apart_rather_than_pad_the_others():
    short = [[1, 2, 3, 4, 5, 6, k] for k in (7, 8, 9)]
    long = [1, 2, 3, 4, 5, 6] + [0] * 30  # its suffix would pad the short ones by 29 tokens
    groups = plan_groups([*short, long])
    assert set(groups) == {PrefixGroup(6, (0, 1, 2)), PrefixGroup(0, (3,))}
    # padding up to half the shared prefix (3 of 6 tokens) is accepted
    near = [1, 2, 3, 4, 5, 6] + [0] * 3
    assert plan_groups([*short, near]) == [PrefixGroup(6, (3, 0, 1, 2))]


def test_a_distant_neighbour_does_not_shrink_a_long_prefix():
    a, b = [1] * 20 + [2], [1] * 20 + [3]
    c = [1, 1, 5, 6, 7, 8]  # two tokens in common with a and b
    groups = plan_groups([a, b, c])
    # joining would cost a and b 18 tokens each to save c's 2: it stays alone
    assert PrefixGroup(20, (0, 1)) in groups and PrefixGroup(0, (2,)) in groups


def test_chunks_keep_groups_together_and_cut_large_ones():
    groups = [PrefixGroup(5, (0, 1, 2)), PrefixGroup(4, (3, 4)), PrefixGroup(6, tuple(range(5, 12)))]
    got = chunks(groups, 4)
    assert [[g.members for g in chunk] for chunk in got] == [
        [(0, 1, 2)], [(3, 4)], [(5, 6, 7, 8)], [(9, 10, 11)]]
    assert all(sum(len(g.members) for g in chunk) <= 4 for chunk in got)


def test_batches_of_groups_hold_similar_suffixes():
    # two groups with 30-token suffixes, two with 3-token ones: a batch of four would pad the
    # short suffixes to 30, so the short groups get a batch of their own
    def group(q, n, length):
        return [[q] * 8 + [k] * length for k in range(1, n + 1)]

    ids = group(5, 2, 30) + group(6, 2, 3) + group(7, 2, 30) + group(8, 2, 3)
    batches = batch_order(ids, 8)
    assert sorted(map(sorted, batches)) == [[0, 1, 4, 5], [2, 3, 6, 7]]
    groups = [PrefixGroup(8, (0, 1)), PrefixGroup(8, (2, 3))]
    assert chunks(groups, 8, [30, 3]) == [[groups[0]], [groups[1]]]
    assert chunks(groups, 8) == [groups]  # without the suffixes: by size only


def test_batch_order_covers_every_input_once():
    ids = [[1, 2, 3, 4, 5, 6], [8], [1, 2, 3, 4, 5, 7], [9, 9, 9]]
    order = batch_order(ids, 2)
    assert order == [[0, 2], [3, 1]]  # the group, then the others longest first


def test_shared_prefix_logits_and_gradients_equal_full_forwards(rm):
    ids = [rm.encode(t) for t in TRIPLES]
    groups = [g for g in plan_groups(ids) if g.prefix]
    # two groups with prefixes of different lengths: the padded prefix batch is exercised
    assert len(groups) == 2 and len({g.prefix for g in groups}) == 2
    members = [m for g in groups for m in g.members]
    rm.model.eval()
    full = rm.full_logits([ids[m] for m in members])
    full.sum().backward()
    want = {n: p.grad.clone() for n, p in rm.model.named_parameters()}
    rm.model.zero_grad(set_to_none=True)
    fast = prefix.prefix_logits(rm.model, ids, groups, rm.tokenizer.pad_token_id)
    fast.sum().backward()
    assert fast.tolist() == pytest.approx(full.tolist(), abs=1e-5)
    for name, p in rm.model.named_parameters():
        # the prefix's weights get their gradient through the cached keys and values
        assert torch.allclose(p.grad, want[name], atol=1e-5), name


def test_scores_are_those_of_full_forwards(rm):
    shared = rm.score(TRIPLES, batch_size=3)
    assert rm.share_prefixes is True  # checked on the first batch that had a group
    rm.share_prefixes = False
    full = rm.score(TRIPLES, batch_size=3)
    assert shared == pytest.approx(full, abs=1e-6)


def test_a_prefix_path_that_disagrees_is_dropped_for_good(rm, monkeypatch, caplog):
    real = prefix.prefix_logits

    def wrong(*args, **kwargs):  # a planted fault: a cache that does not reproduce the model
        return real(*args, **kwargs) + 1.0

    monkeypatch.setattr("cooper.rm.model.prefix_logits", wrong)
    rm.share_prefixes = None
    with caplog.at_level(logging.WARNING):
        scores = rm.score(TRIPLES, batch_size=8)
    assert rm.share_prefixes is False
    assert "does not reproduce full forward passes" in caplog.text
    monkeypatch.undo()
    assert scores == pytest.approx(rm.score(TRIPLES, batch_size=8), abs=1e-6)


def test_full_forwards_switch_sharing_off_while_open(rm, monkeypatch):
    calls = []
    monkeypatch.setattr("cooper.rm.model.prefix_logits",
                        lambda *a, **k: calls.append(1) or prefix.prefix_logits(*a, **k))
    with rm.full_forwards():
        rm.score(TRIPLES)
    assert calls == []
    rm.score(TRIPLES)
    assert calls


def test_a_memo_answers_what_it_has_seen(rm):
    memo = LogitMemo()
    first = rm.raw_logits(TRIPLES, memo=memo)
    assert len(memo) == len(TRIPLES) and memo.misses == len(TRIPLES) and memo.hits == 0
    with torch.no_grad():  # the weights change: a memo must not be used then, and it shows
        for p in rm.model.parameters():
            p.add_(0.5)
    again = rm.raw_logits(TRIPLES, memo=memo)
    assert again == first and memo.hits == len(TRIPLES)
    assert rm.raw_logits(TRIPLES) != pytest.approx(first)


def test_a_full_memo_forgets_its_oldest_entry():
    memo = LogitMemo(max_entries=2)
    memo.put([1], 0.1)
    memo.put([2], 0.2)
    memo.put([3], 0.3)
    assert memo.get([1]) is None and memo.get([2]) == 0.2 and memo.get([3]) == 0.3
    with pytest.raises(ValueError):
        LogitMemo(0)


# ------------------------------------------------------------ the update: distinct inputs, once

def _updated(tiny_models, micro_batch_size: int, pos, neg, max_length: int = 256,
             forwards: list | None = None) -> tuple[dict, float]:
    """The update's gradients (clipped) and its loss; ``forwards`` gets each forward's grad
    mode and input count."""
    torch.manual_seed(0)
    rm = RewardModel.load(tiny_models.reward, max_length=max_length)
    updater = PairwiseUpdater(rm, lr=1e-2, micro_batch_size=micro_batch_size)
    if forwards is not None:
        logits = updater._logits
        updater._logits = lambda ids: (forwards.append((torch.is_grad_enabled(), len(ids)))
                                       or logits(ids))
    stats = updater.step(pos, neg)
    assert stats.changed_fraction > 0.5
    # the pass's gradient, clipped, stays on the weights until the next pass
    return {n: p.grad.clone() for n, p in rm.model.named_parameters()}, stats.loss


def _naive(tiny_models, pos, neg) -> tuple[dict, float]:
    """The reference: every pair's two inputs through full forwards, pair by pair (gradients,
    clipped, and the mean loss)."""
    torch.manual_seed(0)
    rm = RewardModel.load(tiny_models.reward, max_length=256)
    updater = PairwiseUpdater(rm, lr=1e-2)
    rm.model.eval()
    loss = 0.0
    for p, n in zip(pos, neg, strict=True):
        logits = rm.full_logits([rm.encode(p), rm.encode(n)])
        step = updater.objective(logits[:1], logits[1:], len(pos))
        step.backward()
        loss += step.item()
    torch.nn.utils.clip_grad_norm_(updater.params, updater.max_grad_norm)
    return {n: p.grad.clone() for n, p in rm.model.named_parameters()}, loss


def test_the_update_equals_pairs_run_one_by_one(tiny_models):
    # rollout negatives: each positive with the same two hardest wrong rollouts
    q = TRIPLES[0]
    right = [Triple(q.question, q.reference, c) for c in ("3+4=7. #### 7", "So 7. #### 7")]
    wrong = [Triple(q.question, q.reference, c) for c in ("3+4=8. #### 8", "#### 6")]
    pos = [right[0], right[0], right[1], right[1], TRIPLES[4]]
    neg = [wrong[0], wrong[1], wrong[0], wrong[1], TRIPLES[5]]
    want, want_loss = _naive(tiny_models, pos, neg)
    # one forward with grad (6 distinct inputs <= 2 x 8), and batches of 2 (the loss's
    # d/dlogit first, then each batch's forward differentiated against it), their graphs kept
    # (short inputs) or, where the batches' padded tokens exceed 2 x 1 inputs of max_length,
    # after a forward without grad
    longest = max(len(RewardModel.load(tiny_models.reward).encode(t)) for t in pos + neg)
    runs = []
    for micro, max_length, graphs in ((8, 256, [(True, 6)]), (1, 1024, [(True, 2)] * 3),
                                      (1, longest, [(False, 2)] * 3 + [(True, 2)] * 3)):
        forwards = []
        got, loss = _updated(tiny_models, micro, pos, neg, max_length, forwards)
        assert forwards == graphs, micro
        assert loss == pytest.approx(want_loss, abs=1e-5)
        for name, g in want.items():
            assert torch.allclose(got[name], g, atol=1e-6), (micro, name)
        runs.append((got, loss))
    # the graphs kept give the same bits as the forward without grad first
    (kept, kept_loss), (first, first_loss) = runs[1:]
    assert kept_loss == first_loss and all(torch.equal(kept[n], first[n]) for n in kept)


def test_frozen_layer_states_share_prefixes_and_equal_full_forwards(rm):
    from cooper.rm.trunk import FrozenTrunk

    ids = [rm.encode(t) for t in TRIPLES]
    trunk = FrozenTrunk(rm, 1)
    shared = trunk.states(ids, batch_size=4)
    assert rm.share_prefixes is True
    with rm.full_forwards():
        full = trunk.states(ids, batch_size=4)
    for a, b, i in zip(shared, full, ids, strict=True):
        assert a.shape == b.shape == (len(i), rm.model.config.hidden_size)
        assert torch.allclose(a, b, atol=1e-5)


def test_shared_prefix_gradients_are_the_same_bits_on_two_threads(rm):
    # one group of 64 completions: the gradients of the group's cached keys and values are
    # sums over its 64 rows, which two threads share out between them; indexing the cache
    # (`keys[rows]`) added them up in whatever order the threads ran, so the same training gave
    # other weights from run to run (cooper.rm.prefix.select_rows)
    question = Triple("What is 123 + 456 + 789? Show each step.", "1368", "")
    ids = [rm.encode(Triple(question.question, question.reference, f"{k} + {k + 1} = {2 * k + 1}"))
           for k in range(64)]
    groups = [g for g in plan_groups(ids) if g.prefix]
    assert len(groups) == 1 and len(groups[0].members) == 64 and groups[0].prefix >= 20
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        grads = []
        for _ in range(6):
            rm.model.zero_grad(set_to_none=True)
            prefix.prefix_logits(rm.model, ids, groups, rm.tokenizer.pad_token_id).sum().backward()
            grads.append([p.grad.clone() for p in rm.model.parameters()])
    finally:
        torch.set_num_threads(threads)
    for again in grads[1:]:
        assert all(torch.equal(a, b) for a, b in zip(grads[0], again, strict=True))
