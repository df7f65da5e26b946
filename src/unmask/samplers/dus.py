"""DUS, the Dilated Unmasking Scheduler (Luxembourg, Permuter, Nachmani; arXiv 2506.19037).

A planner-free schedule: the positions of a block of size B are split ahead of time into
dilation groups of non-adjacent positions, and each pass reveals one group. Under the paper's
first-order Markov assumption (a token depends mostly on its neighbours) positions of one group
are far apart, so revealing them together keeps the joint entropy gain of the step close to the
sum of their own entropies (the bound DUS minimises, Sec. 3), and a block takes O(log_base B)
passes instead of B.

The groups, for a block of length B (positions o = 0 .. B-1 within it): the stride starts at
s_0 = floor(B / base^skip_exp) and is divided by ``base`` (integer division) until it is 0;
group g holds the positions with o % s_g == 0 not in an earlier group; the positions left after
stride 1 (none when s reaches 1) form a last group, and a last group smaller than the one before
it is merged into that one. For B = 8, base 2: {0, 4}, {2, 6}, {1, 3, 5, 7}. B need not be a
power of ``base``: the strides are floors, and every position falls in exactly one group.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import torch

from unmask.errors import require
from unmask.samplers.base import Sampler, Selection, StepState, register
from unmask.validation import is_int


def dilation_groups(length: int, base: int = 2, skip_exp: int = 1) -> list[list[int]]:
    """The dilation groups of a block of ``length`` positions (offsets 0 .. length-1), in the
    order DUS reveals them: coarse strides first, each group's positions spaced by its stride."""
    require(is_int(base) and base >= 2, f"base: must be an integer >= 2, got {base}")
    require(is_int(skip_exp) and skip_exp >= 1,
            f"skip_exp: must be an integer >= 1, got {skip_exp}")
    groups: list[list[int]] = []
    taken: set[int] = set()
    stride = length // base**skip_exp
    while stride >= 1:
        group = [o for o in range(0, length, stride) if o not in taken]
        if group:
            groups.append(group)
            taken.update(group)
        stride //= base
    rest = [o for o in range(length) if o not in taken]
    if rest:
        groups.append(rest)
    if len(groups) >= 2 and len(groups[-1]) < len(groups[-2]):
        last = groups.pop()
        groups[-1] = sorted(groups[-1] + last)
    return groups


@lru_cache(maxsize=64)
def _group_index(n: int, block: int, base: int, skip_exp: int) -> tuple[int, ...]:
    """Each of ``n`` positions' group number within its block of ``block`` positions, blocks
    counted back from the end as the decode loop counts them (the first may be shorter)."""
    index = [0] * n
    starts = sorted({0, *range(n % block, n, block)})
    for start, stop in zip(starts, [*starts[1:], n], strict=True):
        for g, group in enumerate(dilation_groups(stop - start, base, skip_exp)):
            for o in group:
                index[start + o] = g
    return tuple(index)


@register("dus")
@dataclass
class DUSSampler(Sampler):
    """Reveal, each pass, the eligible positions of the first dilation group that still has
    one (arXiv 2506.19037). Positions given or already revealed drop out of their group; a
    group with nothing left costs no pass.

    base: the dilation factor (the stride is divided by it each group; ~log_base B passes).
    block: the block length B the groups are laid on, counted back from the end of the
        sequence as the decode loop counts its blocks; None = the whole sequence. Set it to
        the decode loop's ``block_size`` for semi-autoregressive decoding (a smaller loop
        block only skips the groups it holds nothing of).
    skip_exp: the first stride is B / base^skip_exp.
    """

    reads_eligible_only: ClassVar[bool] = True

    base: int = 2
    block: int | None = None
    skip_exp: int = 1

    def __post_init__(self):
        require(is_int(self.base) and self.base >= 2,
                f"base: must be an integer >= 2, got {self.base}")
        require(self.block is None or (is_int(self.block) and self.block >= 1),
                f"block: must be None or an integer >= 1, got {self.block}")
        require(is_int(self.skip_exp) and self.skip_exp >= 1,
                f"skip_exp: must be an integer >= 1, got {self.skip_exp}")

    def groups(self, n: int, device) -> torch.Tensor:
        """(N,) long: each position's dilation group (built once per length and device)."""
        key = (n, str(device))
        cached = getattr(self, "_groups", {})
        if key not in cached:
            cached[key] = torch.tensor(_group_index(n, self.block or n, self.base,
                                                    self.skip_exp),
                                       dtype=torch.long, device=device)
            self._groups = cached
        return cached[key]

    def select(self, state: StepState) -> Selection:
        group = self.groups(state.tokens.shape[1], state.tokens.device).expand_as(state.eligible)
        big = torch.iinfo(torch.long).max
        first = torch.where(state.eligible, group, big).min(1, keepdim=True).values  # (B, 1)
        return Selection(state.eligible & (group == first))
