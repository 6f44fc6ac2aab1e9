"""Many completions of one question: their shared prefix runs through the reward model once.

The reward model reads ``question, reference, completion`` as one causal sequence, and Cooper
scores *groups*: the G samples of one prompt share their question and reference, and often the
start of their completions too. In a causal model a token's hidden states depend only on the
tokens before it, so the keys and values of a common prefix are the same for every member of the
group: :func:`prefix_logits` runs that prefix once and each member's remainder (its suffix)
against the cached keys and values. The logits are those of the full sequences (up to float
rounding; the first use is checked against full forwards, :class:`cooper.rm.model.RewardModel`),
with fewer tokens through the model: on the CPU testbed the question and reference are about 25
of a triple's ~57 tokens. Gradients flow through the cached prefix into its tokens' weights, so
the pairwise update uses it too. (Ours: an optimisation with the same result. transformers
shares a prefix across *generation* steps, not across the rows of one batch, hence this module.)

Groups are found on token ids alone, so the template and the tokenizer need no special care:
:func:`plan_groups` sorts the inputs and cuts the sorted list into the runs that send the fewest
tokens through the model, each member keeping at least one token of its own (the scored token).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

# a group shares fewer tokens than this: not worth a forward of its own
MIN_PREFIX = 4
# a batch of groups ends where a group's longest suffix is under this fraction of the batch's
# first (every suffix of a batch is padded to the longest)
PACK_SLACK = 0.75


@dataclass(frozen=True)
class PrefixGroup:
    """Inputs (indices into the list given to :func:`plan_groups`) whose first ``prefix``
    tokens are equal. ``prefix`` is 0 for an input run alone."""

    prefix: int
    members: tuple[int, ...]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two id sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def plan_groups(ids: Sequence[Sequence[int]], min_prefix: int = MIN_PREFIX,
                window: int = 256) -> list[PrefixGroup]:
    """Every input in exactly one group, the fewest tokens through the model overall.

    Inputs are sorted, so those with long common prefixes are neighbours, and the sorted list is
    cut into runs: a run of one input costs its length, a longer run its shared prefix once plus
    each member's suffix. The cuts are chosen by dynamic programming over runs of at most
    ``window`` inputs (ours). A run is then cut into parts of similar length
    (:func:`_similar_lengths`), since suffixes are padded to the longest of their part. A
    part's prefix stops one token before its shortest member ends (the scored token runs in the
    suffix), and a part sharing fewer than ``min_prefix`` tokens is not a group. So the samples
    of one question form one group even when every input of the batch shares a few template
    tokens.
    """
    order = sorted(range(len(ids)), key=lambda i: tuple(ids[i]))
    n = len(order)
    lengths = [len(ids[i]) for i in order]
    lcp = [0] + [common_prefix(ids[order[k - 1]], ids[order[k]]) for k in range(1, n)]
    best = [0] * (n + 1)  # best[j]: fewest tokens for the first j sorted inputs
    cut = [0] * (n + 1)  # where the last run of that solution starts
    for j in range(n):
        best[j + 1], cut[j + 1] = best[j] + lengths[j], j  # input j alone
        shared, shortest, total = lengths[j], lengths[j], lengths[j]
        for i in range(j - 1, max(-1, j - window), -1):  # the run i..j
            shared = min(shared, lcp[i + 1])
            shortest = min(shortest, lengths[i])
            total += lengths[i]
            p = min(shared, shortest - 1)
            if p < min_prefix:
                break  # shared only shrinks as the run grows
            cost = best[i] + p + total - p * (j - i + 1)
            if cost < best[j + 1]:
                best[j + 1], cut[j + 1] = cost, i
    runs: list[list[int]] = []
    j = n
    while j > 0:
        runs.append(order[cut[j]:j])
        j = cut[j]
    groups: list[PrefixGroup] = []
    for run in runs[::-1]:
        for part in _similar_lengths(ids, run):
            p = _shared(ids, part)
            if len(part) > 1 and p >= min_prefix:
                groups.append(PrefixGroup(p, tuple(part)))
            else:
                groups += [PrefixGroup(0, (m,)) for m in part]
    return groups


def _shared(ids: Sequence[Sequence[int]], members: Sequence[int]) -> int:
    """The tokens ``members`` can share: their common prefix, up to one token before the end of
    the shortest."""
    first = ids[members[0]]
    p = min(len(ids[m]) for m in members) - 1
    for m in members[1:]:
        p = min(p, common_prefix(first, ids[m]))
    return p


def _similar_lengths(ids: Sequence[Sequence[int]], run: Sequence[int]) -> list[list[int]]:
    """A run cut into parts of similar length, longest first. Every suffix of a part is padded
    to the part's longest, so a member joins the current part only if that padding is at most
    half the prefix it shares (ours; on the robustness suite, 40 questions x 11 attacks, this
    and :data:`PACK_SLACK` sent 28% fewer tokens through the model than full forwards, where
    joining at any padding up to the prefix saved 19%): a group's one long completion (the
    suite's padded ones, say) runs apart instead of padding every short one."""
    if len(run) < 2:
        return [list(run)]
    p = _shared(ids, run)
    parts: list[list[int]] = []
    for m in sorted(run, key=lambda m: -len(ids[m])):
        if parts and len(ids[parts[-1][0]]) - len(ids[m]) <= p / 2:
            parts[-1].append(m)
        else:
            parts.append([m])
    return parts


def chunks(groups: Sequence[PrefixGroup], size: int,
           suffix: Sequence[int] | None = None) -> list[list[PrefixGroup]]:
    """Groups packed into chunks of at most ``size`` inputs, in order; a group larger than a
    chunk is cut into parts that each run the prefix again (one row each). With ``suffix``
    (each group's longest suffix, groups sorted longest first), a chunk also ends where a
    group's suffix is under :data:`PACK_SLACK` of the chunk's first: every suffix of a chunk is
    padded to its longest."""
    parts = [(PrefixGroup(g.prefix, g.members[k:k + size]), suffix[i] if suffix else 0)
             for i, g in enumerate(groups) for k in range(0, len(g.members), size)]
    out: list[list[PrefixGroup]] = []
    filled, top = size, 0
    for g, longest in parts:
        if filled + len(g.members) > size or longest < PACK_SLACK * top:
            out.append([])
            filled, top = 0, longest
        out[-1].append(g)
        filled += len(g.members)
    return out


def batch_order(ids: Sequence[Sequence[int]], size: int) -> list[list[int]]:
    """Indices of ``ids`` in batches of at most ``size``: the groups' members, groups with the
    longest suffixes first and each group in one batch where it fits (:func:`chunks`), then the
    inputs that share nothing, longest first: little padding either way."""
    groups = plan_groups(ids)
    shared = [g for g in groups if g.prefix]
    longest = [max(len(ids[m]) for m in g.members) - g.prefix for g in shared]
    order = sorted(range(len(shared)), key=lambda i: -longest[i])
    packed = chunks([shared[i] for i in order], size, [longest[i] for i in order])
    alone = sorted((g.members[0] for g in groups if not g.prefix), key=lambda i: -len(ids[i]))
    return ([[m for g in chunk for m in g.members] for chunk in packed]
            + [alone[k:k + size] for k in range(0, len(alone), size)])


@dataclass(frozen=True)
class GroupPass:
    """What :func:`run_groups` computed: the hidden states of the prefixes and of the suffixes."""

    prefixes: torch.Tensor  # [G, P, H] each group's prefix, right-padded
    suffixes: torch.Tensor  # [N, S, H] each member's suffix, right-padded, in member order
    group: list[int]  # [N] the group of each member
    suffix_lengths: list[int]  # [N]


def select_rows(cache, rows: torch.Tensor) -> None:
    """``cache.batch_select_indices(rows)``, by ``index_select``: row ``r`` of every layer's keys
    and values becomes row ``rows[r]``.

    Why not transformers' own: it indexes (``keys[rows]``), and that backward adds each row's
    gradient into its group's with atomic adds shared out between the threads, so on two or more
    threads a group's sum came out in a varying order and the same training gave other weights
    from run to run (``cooper rm train`` on the testbed's rows, twice: losses 0.2119 and 0.2006).
    ``index_select``'s backward adds them in row order on any thread count, and on one thread
    gives the same bits as the indexing did. A cache layer that keeps more than its keys and
    values (one that overrides the method) selects its own rows.
    """
    from transformers.cache_utils import DynamicLayer

    for layer in getattr(cache, "layers", None) or [cache]:
        plain = type(layer).batch_select_indices is DynamicLayer.batch_select_indices
        if plain and layer.get_seq_length() > 0:
            layer.keys = layer.keys.index_select(0, rows)  # [N, heads, P, D]
            layer.values = layer.values.index_select(0, rows)  # [N, heads, P, D]
        else:
            layer.batch_select_indices(rows)


def run_groups(base: torch.nn.Module, ids: Sequence[Sequence[int]],
               groups: Sequence[PrefixGroup], pad_id: int) -> GroupPass:
    """Two forwards of a decoder ``base`` model over the members of ``groups`` (every ``prefix``
    > 0): the G prefixes (right-padded, their keys and values cached), then the N suffixes
    against their group's cache, each at the positions that follow its own prefix. Grad flows
    when it is enabled."""
    import torch

    device = next(base.parameters()).device
    g_rows = [g for g, group in enumerate(groups) for _ in group.members]  # [N] group of a row
    members = [m for group in groups for m in group.members]  # [N]
    lengths = [group.prefix for group in groups]  # [G]
    width = max(lengths)
    pre = torch.full((len(groups), width), pad_id, dtype=torch.long)  # [G, P]
    pre_mask = torch.zeros((len(groups), width), dtype=torch.long)  # [G, P]
    for g, group in enumerate(groups):
        pre[g, :group.prefix] = torch.tensor(list(ids[group.members[0]][:group.prefix]))
        pre_mask[g, :group.prefix] = 1
    suffixes = [list(ids[m][lengths[g]:]) for m, g in zip(members, g_rows, strict=True)]
    s_width = max(map(len, suffixes))
    suf = torch.full((len(members), s_width), pad_id, dtype=torch.long)  # [N, S]
    suf_mask = torch.zeros((len(members), s_width), dtype=torch.long)  # [N, S]
    for r, s in enumerate(suffixes):
        suf[r, :len(s)] = torch.tensor(s)
        suf_mask[r, :len(s)] = 1
    rows = torch.tensor(g_rows)  # [N]
    starts = torch.tensor(lengths)[rows]  # [N] each suffix's first position
    positions = starts[:, None] + torch.arange(s_width)[None, :]  # [N, S]
    out = base(input_ids=pre.to(device), attention_mask=pre_mask.to(device), use_cache=True)
    cache = out.past_key_values
    select_rows(cache, rows.to(device))  # every row gets its group's keys and values
    hidden = base(input_ids=suf.to(device),
                  attention_mask=torch.cat([pre_mask[rows], suf_mask], dim=1).to(device),  # [N, P+S]
                  position_ids=positions.to(device), past_key_values=cache,
                  use_cache=True).last_hidden_state  # [N, S, H]
    return GroupPass(out.last_hidden_state, hidden, g_rows, [len(s) for s in suffixes])


def prefix_logits(model: PreTrainedModel, ids: Sequence[Sequence[int]],
                  groups: Sequence[PrefixGroup], pad_id: int) -> torch.Tensor:
    """Raw logits [N] of the members of ``groups`` (every ``prefix`` > 0), in member order:
    :func:`run_groups` through the classifier's base model, then the score head on each
    suffix's last token, as the classifier pools the last token of a right-padded sequence."""
    import torch

    run = run_groups(model.base_model, ids, groups, pad_id)
    n = len(run.group)
    last = torch.tensor(run.suffix_lengths, device=run.suffixes.device) - 1  # [N]
    pooled = run.suffixes[torch.arange(n, device=last.device), last]  # [N, H]
    return model.score(pooled)[:, 0].float()  # [N]


def prefix_states(base: torch.nn.Module, ids: Sequence[Sequence[int]],
                  groups: Sequence[PrefixGroup], pad_id: int) -> list[torch.Tensor]:
    """Each member's hidden states [L_i, H] at the output of ``base`` (in member order), as a
    full forward of its whole sequence gives them: its group's prefix, then its suffix."""
    import torch

    run = run_groups(base, ids, groups, pad_id)
    return [torch.cat([run.prefixes[g, :groups[g].prefix], run.suffixes[r, :n]])
            for r, (g, n) in enumerate(zip(run.group, run.suffix_lengths, strict=True))]
