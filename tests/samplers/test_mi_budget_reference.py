"""The MI budget rule (``mi_budget_select``) against the per-position scan it replaced.

The reference below is the rule as first written: a Python loop over scan positions, one
row-vectorised step each, reading the number of steps back from the tensors. The shipped
rule must take exactly the same sets on every input: on a dyadic grid (where every sum is
exact, so ties at the budget are hit exactly) and on arbitrary floats, for every
combination of the flags, with ties in the scan scores, ineligible positions, capped MI and
both scan orders. Off the CPU it must read nothing back from the device.
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scan_reference import budget_jump_reference

from unmask import host_reads
from unmask.host_reads import as_on_accelerators, count_host_reads
from unmask.samplers.mi_guided import cap_by_entropy, mi_budget_select


def reference_select(entropy, mi, eligible, scores, gamma, lam, stop_at_first_miss=False,
                     free_head=False, free_max=False):
    """The rule as first shipped (a scan over positions), kept as the reference."""
    b, n = entropy.shape
    ent = entropy.double()
    mi = mi.double()
    order = torch.argsort(scores.double().masked_fill(~eligible, -torch.inf), dim=1,
                          descending=True, stable=True)
    rows = torch.arange(b)
    taken = torch.zeros(b, n, dtype=torch.float64)
    spent, top = torch.zeros(b, dtype=torch.float64), torch.zeros(b, dtype=torch.float64)
    open_ = torch.ones(b, dtype=torch.bool)
    n_scan = int(eligible.sum(1).max()) if b else 0
    for t in range(n_scan):
        i = order[:, t]
        valid = eligible[rows, i] & open_
        own = ent[rows, i]
        if free_head and t == 0:
            own = torch.zeros_like(own)
        charge = own + lam * (mi[rows, i] * taken).sum(1)
        top_new = torch.maximum(top, own) if free_max else top
        take = valid & (spent + charge - top_new <= gamma + 1e-12)
        spent = torch.where(take, spent + charge, spent)
        top = torch.where(take, top_new, top)
        taken[rows, i] = torch.where(take, 1.0, taken[rows, i])
        if stop_at_first_miss:
            open_ = open_ & ~(valid & ~take)
    reveal = taken.bool()
    empty = ~reveal.any(1) & eligible.any(1)
    reveal[rows[empty], order[empty, 0]] = True
    return reveal


FLAGS = [(False, False), (True, False), (False, True)]  # (free_head, free_max)


@st.composite
def rule_inputs(draw):
    """(entropy, mi, eligible, scores, gamma, lam): B x N rows with values on a dyadic grid
    (exact sums: a charge equal to the budget is hit exactly) or arbitrary floats, scores
    with ties (a few distinct values) or by entropy (either scan order), MI symmetric or not,
    capped or not."""
    b, n = draw(st.integers(1, 4)), draw(st.integers(1, 9))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    grid = draw(st.booleans())

    def values(*shape, top):
        x = torch.rand(*shape, generator=gen, dtype=torch.float64) * top
        return (x * 16).floor() / 16 if grid else x

    entropy = values(b, n, top=draw(st.sampled_from([0.25, 1.0, 3.0])))
    mi = values(b, n, n, top=draw(st.sampled_from([0.0, 0.125, 1.0])))
    if draw(st.booleans()):
        mi = mi + mi.transpose(1, 2)
    if draw(st.booleans()):
        mi = cap_by_entropy(mi, entropy)
    eligible = torch.rand(b, n, generator=gen) < draw(st.sampled_from([0.3, 0.8, 1.0]))
    kind = draw(st.sampled_from(["entropy", "confidence", "ties"]))
    if kind == "entropy":
        scores = -entropy
    elif kind == "confidence":
        scores = torch.rand(b, n, generator=gen, dtype=torch.float64)
    else:
        scores = torch.randint(0, 3, (b, n), generator=gen).double()
    gamma = draw(st.sampled_from([0.0, 0.0625, 0.25, 0.5, 1.0, 2.0]) if grid
                 else st.floats(0.0, 3.0))
    lam = draw(st.sampled_from([0.0, 0.5, 1.0, 2.0]))
    return entropy, mi, eligible, scores, gamma, lam


@settings(max_examples=400, deadline=None)
@given(rule_inputs(), st.booleans(), st.sampled_from(FLAGS))
def test_same_sets_as_the_reference_scan(inputs, stop, flags):
    entropy, mi, eligible, scores, gamma, lam = inputs
    free_head, free_max = flags
    want = reference_select(entropy, mi, eligible, scores, gamma, lam, stop, free_head,
                            free_max)
    got = mi_budget_select(entropy, mi, eligible, scores, gamma, lam, stop, free_head,
                           free_max)
    assert torch.equal(got, want)
    with as_on_accelerators():
        assert torch.equal(mi_budget_select(entropy, mi, eligible, scores, gamma, lam, stop,
                                            free_head, free_max), got)
    if not stop:  # the scan, not the closed-form prefix
        assert torch.equal(got, as_before(entropy, mi, eligible, scores, gamma, lam,
                                          free_head, free_max))


def as_before(entropy, mi, eligible, scores, gamma, lam, free_head, free_max):
    """The set the CPU's scan took before it was compiled (tensor steps, one per position
    taken, ``budget_jump_reference``), framed as ``mi_budget_select`` frames its scan."""
    order = torch.argsort(scores.double().masked_fill(~eligible, -torch.inf), dim=1,
                          descending=True, stable=True)
    valid = eligible.gather(1, order)
    own = torch.where(valid, entropy.double().gather(1, order), 0.0)
    if free_head:
        own[:, 0] = 0.0
    take = budget_jump_reference(own, mi, order, valid, gamma + 1e-12, lam, free_max)
    reveal = torch.zeros_like(eligible).scatter_(1, order, take)
    empty = ~reveal.any(1) & eligible.any(1)
    return reveal | torch.zeros_like(eligible).scatter_(1, order[:, :1], empty[:, None])


def test_same_sets_on_many_large_random_batches():
    """Sudoku-sized rows (81 positions), a batch of them, MI in float32 as the estimator
    gives it: the same sets as the reference for every flag combination."""
    gen = torch.Generator().manual_seed(3)
    b, n = 128, 81
    entropy = torch.rand(b, n, generator=gen, dtype=torch.float64) ** 4 * 2
    mi = torch.rand(b, n, n, generator=gen) * 0.02
    mi = mi + mi.transpose(1, 2)
    eligible = torch.rand(b, n, generator=gen) < 0.7
    for scores in (-entropy, torch.rand(b, n, generator=gen, dtype=torch.float64)):
        for gamma in (0.05, 0.3, 1.0):
            for stop in (False, True):
                for free_head, free_max in FLAGS:
                    args = (entropy, mi, eligible, scores, gamma, 1.0, stop, free_head,
                            free_max)
                    assert torch.equal(mi_budget_select(*args), reference_select(*args))


@pytest.mark.parametrize("sized", [True, False], ids=["cpu", "accelerator"])
def test_the_rule_reads_its_inputs_on_the_cpu_only(monkeypatch, sized):
    """On the CPU the scan (not the closed-form prefix) runs on the host: it reads its four
    inputs there once (views of their memory), however many positions it takes; with sizing
    off, as on an accelerator, the rule reads nothing at all."""
    if not sized:
        monkeypatch.setattr(host_reads, "HOST_LOOP_DEVICES", frozenset())
    gen = torch.Generator().manual_seed(5)
    entropy = torch.rand(8, 20, generator=gen, dtype=torch.float64)
    mi = torch.rand(8, 20, 20, generator=gen)
    eligible = torch.rand(8, 20, generator=gen) < 0.6
    for stop in (False, True):
        for free_head, free_max in FLAGS:
            with count_host_reads() as reads:
                mi_budget_select(entropy, mi, eligible, -entropy, 0.3, 1.0, stop, free_head,
                                 free_max)
            assert reads.total == (4 if sized and not stop else 0)
@settings(max_examples=200, deadline=None)
@given(rule_inputs(), st.sampled_from(FLAGS))
def test_the_sized_scan_takes_the_sets_of_the_whole_scan(inputs, flags):
    """The CPU's scan, from taken position to taken position, takes the sets of the scan
    over every position, as an accelerator runs it."""
    entropy, mi, eligible, scores, gamma, lam = inputs
    args = (entropy, mi, eligible, scores, gamma, lam, False, *flags)
    sized = mi_budget_select(*args)
    with as_on_accelerators():
        whole = mi_budget_select(*args)
    assert torch.equal(sized, whole)
