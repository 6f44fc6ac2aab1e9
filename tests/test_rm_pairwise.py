"""Cooper's pairwise reward-model update: the losses by hand, skipping, and the
multi-process contract (identical weights everywhere, zero-pair processes included)."""

from __future__ import annotations

import math

import pytest
import torch

from cooper.rm.losses import (
    anchor_loss,
    bradley_terry_loss,
    margin_loss,
    pair_objective,
)
from cooper.rm.model import RewardModel
from cooper.rm.update import PairwiseUpdater
from cooper.types import Triple

POS = [Triple("What is 2+3?", "5", f"2+3=5. The answer is 5.{' ' * i}") for i in range(3)]
NEG = [Triple("What is 2+3?", "5", f"2+3=6. The answer is 6.{' ' * i}") for i in range(3)]


def test_bradley_terry_loss_by_hand():
    # -log sigmoid(2 - 0) = log(1 + e^-2) = 0.126928; -log sigmoid(0) = log 2 = 0.693147
    # -log sigmoid(-1 - 1) = log(1 + e^2) = 2.126928; mean = 2.947003 / 3 = 0.982334
    loss = bradley_terry_loss(torch.tensor([2.0, 0.0, -1.0]), torch.tensor([0.0, 0.0, 1.0]))
    assert loss.item() == pytest.approx(0.982334, abs=1e-6)


def test_a_global_normaliser_divides_the_sum():
    pos, neg = torch.tensor([2.0, 0.0]), torch.tensor([0.0, 0.0])
    # (0.126928 + 0.693147) over a global count of 4 pairs = 0.205019
    assert bradley_terry_loss(pos, neg, normalizer=4).item() == pytest.approx(0.205019, abs=1e-6)


def test_bradley_terry_gradient_by_hand():
    pos = torch.tensor([2.0, 0.0], requires_grad=True)
    neg = torch.tensor([0.0, 0.0], requires_grad=True)
    bradley_terry_loss(pos, neg).backward()
    # d/dpos of mean(-log sigmoid(pos - neg)) = -(1 - sigmoid(margin)) / P:
    # margin 2: -(1 - 0.880797) / 2 = -0.059601; margin 0: -(1 - 0.5) / 2 = -0.25
    assert pos.grad.tolist() == pytest.approx([-0.059601, -0.25], abs=1e-6)
    assert neg.grad.tolist() == pytest.approx([0.059601, 0.25], abs=1e-6)


def test_margin_loss_by_hand():
    # margin 1: pos - neg = 2 -> max(0, 1 - 2) = 0; 0 -> 1; -2 -> 3; mean = 4 / 3
    pos, neg = torch.tensor([2.0, 0.0, -1.0]), torch.tensor([0.0, 0.0, 1.0])
    assert margin_loss(pos, neg, 1.0).item() == pytest.approx(4 / 3)
    # margin 0.5: 0 + 0.5 + 2.5 = 3 -> mean 1
    assert margin_loss(pos, neg, 0.5).item() == pytest.approx(1.0)


def test_anchor_loss_by_hand():
    # pos 2: -log sigmoid(2) = 0.126928; neg 0: -log sigmoid(-0) = 0.693147; pair = 0.410038
    # pos 0: 0.693147; neg -3: -log sigmoid(3) = 0.048587; pair = 0.370867; mean = 0.390452
    loss = anchor_loss(torch.tensor([2.0, 0.0]), torch.tensor([0.0, -3.0]))
    assert loss.item() == pytest.approx(0.390452, abs=1e-6)


def test_pair_objective_composes_the_loss_and_the_anchor():
    pos, neg = torch.tensor([2.0, 0.0]), torch.tensor([0.0, -3.0])
    bt = bradley_terry_loss(pos, neg, normalizer=2)
    anchored = pair_objective("bradley_terry", anchor_weight=0.5)(pos, neg, 2)
    assert anchored.item() == pytest.approx(bt.item() + 0.5 * 0.390452, abs=1e-6)
    # margin 1: pos - neg = 2 -> 0, 3 -> 0
    assert pair_objective("margin", margin=1.0)(pos, neg, 2).item() == 0.0
    with pytest.raises(ValueError, match="bradley_terry, margin"):
        pair_objective("hinge")


def test_no_pair_gives_zero_not_nan():
    assert bradley_terry_loss(torch.zeros(0), torch.zeros(0)).item() == 0.0


def test_shapes_must_match():
    with pytest.raises(ValueError, match=r"\[P\]"):
        bradley_terry_loss(torch.zeros(2), torch.zeros(3))


def _weights(rm: RewardModel) -> list[torch.Tensor]:
    return [p.detach().clone() for p in rm.model.parameters()]


def test_updates_learn_to_rank_and_change_every_trainable_parameter(tiny_models):
    torch.manual_seed(0)
    rm = RewardModel.load(tiny_models.reward, max_length=128)
    before = _weights(rm)
    updater = PairwiseUpdater(rm, lr=3e-3, micro_batch_size=2)
    first = updater.step(POS, NEG)
    assert first.pairs == 3 and not first.skipped
    assert math.isfinite(first.loss) and first.grad_norm > 0
    for _ in range(15):
        stats = updater.step(POS, NEG)
    assert stats.pair_acc_before == 1.0 and stats.loss < first.loss
    assert updater.steps == 16 and updater.skipped_steps == 0
    after = list(rm.model.parameters())
    unchanged = [n for (n, _), a, b in zip(rm.model.named_parameters(), before, after,
                                           strict=True) if torch.equal(a, b)]
    assert unchanged == []
    assert all(rm.score(POS)[i] > rm.score(NEG)[i] for i in range(3))


def test_a_non_finite_update_is_skipped_and_counted(tiny_models):
    rm = RewardModel.load(tiny_models.reward, max_length=128)
    updater = PairwiseUpdater(rm, lr=1e-3)
    with torch.no_grad():
        rm.model.score.weight[0, 0] = math.inf  # the logits become inf/NaN
    before = _weights(rm)
    stats = updater.step(POS, NEG)
    assert stats.skipped and updater.skipped_steps == 1 and updater.steps == 0
    assert all(torch.equal(a, b) for a, b in zip(before, _weights(rm), strict=True))


def test_zero_pairs_is_a_no_op(tiny_models):
    rm = RewardModel.load(tiny_models.reward, max_length=128)
    updater = PairwiseUpdater(rm)
    stats = updater.step([], [])
    assert stats.pairs == 0 and not stats.skipped and math.isnan(stats.loss)
    assert updater.steps == 0
    with pytest.raises(ValueError, match="pairs go together"):
        updater.step(POS, NEG[:1])
    with pytest.raises(ValueError, match="global_pairs"):
        updater.step(POS, NEG, reduce_grads=lambda grads: None)


def test_a_checkpoint_resumes_the_same_trajectory(tiny_models, tmp_path):
    a = RewardModel.load(tiny_models.reward, max_length=128)
    ua = PairwiseUpdater(a, lr=1e-3)
    ua.step(POS, NEG)
    # a checkpoint as the trainer writes one: the reward model's folder + the updater state
    a.save(tmp_path / "rm")
    torch.save(ua.state_dict(), tmp_path / "rm_updater.pt")
    b = RewardModel.load(tmp_path / "rm")
    ub = PairwiseUpdater(b, lr=1e-3)
    ub.load_state_dict(torch.load(tmp_path / "rm_updater.pt", weights_only=True))
    assert ub.steps == 1
    ua.step(POS, NEG)
    ub.step(POS, NEG)
    assert all(torch.equal(x, y) for x, y in zip(_weights(a), _weights(b), strict=True))


# ----------------------------------------------------------------- two real processes


def _worker(rank: int, port: int, model_dir: str, out_dir: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    torch.manual_seed(0)
    rm = RewardModel.load(model_dir, max_length=128)
    updater = PairwiseUpdater(rm, lr=1e-3)

    def reduce_grads(grads: list[torch.Tensor]) -> None:
        for g in grads:
            dist.all_reduce(g, op=dist.ReduceOp.SUM)

    # process 0 holds all three pairs, process 1 none: it must still take part
    pos, neg = (POS, NEG) if rank == 0 else ([], [])
    stats = updater.step(pos, neg, reduce_grads=reduce_grads, global_pairs=3)
    torch.save({"weights": [p.detach() for p in rm.model.parameters()],
                "pairs": stats.pairs}, f"{out_dir}/rank{rank}.pt")
    dist.destroy_process_group()


def test_processes_end_with_identical_weights_equal_to_one_process(tiny_models, tmp_path):
    import torch.multiprocessing as mp

    from conftest import free_port

    mp.spawn(_worker, args=(free_port(), str(tiny_models.reward), str(tmp_path)), nprocs=2)
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    assert (r0["pairs"], r1["pairs"]) == (3, 0)
    assert all(torch.equal(a, b) for a, b in zip(r0["weights"], r1["weights"], strict=True))
    # and the step is the one a single process takes on the three pairs
    torch.manual_seed(0)
    rm = RewardModel.load(tiny_models.reward, max_length=128)
    before = _weights(rm)
    PairwiseUpdater(rm, lr=1e-3).step(POS, NEG)
    single = _weights(rm)
    assert all(torch.allclose(a, b, atol=1e-7) for a, b in zip(r0["weights"], single,
                                                               strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(before, single, strict=True))
