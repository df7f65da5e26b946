"""The greedy dependence scan (``greedy_scan``, DAPD's independent set and DEMASK's bounded
set) against a plain per-row Python reference: the same sets on every input, on a dyadic grid
(exact sums: a load equal to the bound is hit exactly) and on arbitrary floats, with ties in
the scores, ineligible positions, unavailable positions, asymmetric and negative charges and
both aggregates; both ways the scan runs (a compiled loop on the host, the CPU; every rank,
reading nothing, on an accelerator) against the scan as it was first vectorised (one step per
rank, sized by one read) and as it ran on the CPU before (``scan_reference``), kept here as
references."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scan_reference import taken_scan_reference

from unmask.host_reads import as_on_accelerators, count_host_reads
from unmask.samplers.dapd import greedy_independent_set
from unmask.samplers.demask import dependence_bounded_set
from unmask.samplers.scan import greedy_scan, scan_length, scan_rows


def reference_scan(scores, eligible, charges, limit, aggregate, available):
    """One row at a time, positions in descending score (ties to the lower index): take j
    when available and (j is the row's first) or its aggregated charge from those taken
    before is within ``limit``."""
    out = torch.zeros_like(eligible)
    for b in range(scores.shape[0]):
        order = sorted((j for j in range(scores.shape[1]) if eligible[b, j]),
                       key=lambda j: (-float(scores[b, j]), j))
        taken = []
        for rank, j in enumerate(order):
            got = [float(charges[b, i, j]) for i in taken]
            load = max([0.0, *got]) if aggregate == "max" else sum(got)
            if rank == 0 or (bool(available[b, j]) and load <= limit):
                taken.append(j)
        out[b, taken] = True
    return out


def rank_scan_reference(scores, eligible, charges, limit, aggregate="max", available=None):
    """The scan as first vectorised: one step per rank up to the last that may be taken."""
    b, n = scores.shape
    order = torch.argsort(scores.double().masked_fill(~eligible, -torch.inf), dim=1,
                          descending=True, stable=True)
    ok = eligible if available is None else available & eligible
    ok = ok.gather(1, order)
    ok[:, :1] = eligible.gather(1, order[:, :1])
    steps = scan_length(ok)
    if charges.dtype == torch.bool:
        charges = charges.view(torch.uint8)
    pays = scan_rows(charges, order, steps)  # (T, B, N)
    if pays.is_floating_point():
        pays = pays.to(torch.float64, memory_format=torch.contiguous_format)
    load = pays.new_zeros(b, n)
    taken = pays.new_zeros(n, b)
    ok, fits = ok.T[:steps].to(pays.dtype), load.new_empty(b, dtype=torch.bool)
    for t in range(steps):
        torch.le(load[:, t], limit, out=fits)
        torch.mul(ok[t], fits, out=taken[t])
        charge = pays[t] * taken[t][:, None]
        if aggregate == "max":
            torch.maximum(load, charge, out=load)
        else:
            load += charge
    return torch.zeros_like(eligible).scatter_(1, order, taken.T.bool()) & eligible


def both_ways(scan, *args):
    """``scan(*args)`` as it runs on the CPU (the compiled host loop) and on an accelerator
    (a tensor step per rank); asserts they agree and returns the set."""
    host = scan(*args)
    with as_on_accelerators():
        whole = scan(*args)
    assert torch.equal(host, whole)
    return host


def as_before(*args):
    """The set the CPU's scan took before it was compiled (tensor steps, one per position
    taken; 'max' with and without its common prefix first), asserted the same both ways."""
    got = taken_scan_reference(*args)
    assert torch.equal(got, taken_scan_reference(*args, prefix=False))
    return got


@st.composite
def scan_inputs(draw):
    b, n = draw(st.integers(1, 4)), draw(st.integers(1, 10))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    grid = draw(st.booleans())
    charges = torch.rand(b, n, n, generator=gen, dtype=torch.float64)
    if grid:
        charges = (charges * 8).floor() / 16  # multiples of 1/16: sums are exact
    if draw(st.booleans()):
        charges = charges + charges.transpose(1, 2)
    if draw(st.booleans()):
        charges = charges - 0.25  # some negative: a 'sum' load may fall
    eligible = torch.rand(b, n, generator=gen) < draw(st.sampled_from([0.3, 0.8, 1.0]))
    available = torch.rand(b, n, generator=gen) < draw(st.sampled_from([0.5, 1.0]))
    if draw(st.booleans()):
        scores = torch.randint(0, 3, (b, n), generator=gen).double()  # ties
    else:
        scores = torch.rand(b, n, generator=gen, dtype=torch.float64)
    limit = draw(st.sampled_from([0.0, 0.0625, 0.25, 0.5]) if grid else st.floats(0.0, 1.0))
    return scores, eligible, charges, limit, available


@settings(max_examples=300, deadline=None)
@given(scan_inputs(), st.sampled_from(["max", "sum"]))
def test_same_sets_as_the_reference(inputs, aggregate):
    scores, eligible, charges, limit, available = inputs
    want = reference_scan(scores, eligible, charges, limit, aggregate, available)
    got = both_ways(greedy_scan, scores, eligible, charges, limit, aggregate, available)
    assert torch.equal(got, want)
    previous = rank_scan_reference(scores, eligible, charges, limit, aggregate, available)
    assert torch.equal(got, previous)
    assert torch.equal(got, as_before(scores, eligible, charges, limit, aggregate, available))
    # bool charges (DAPD's edges) are scanned as uint8
    edges = charges > limit
    got = both_ways(greedy_scan, scores, eligible, edges, 0, aggregate, available)
    assert torch.equal(got, rank_scan_reference(scores, eligible, edges, 0, aggregate, available))
    assert torch.equal(got, as_before(scores, eligible, edges, 0, aggregate, available))


@settings(max_examples=150, deadline=None)
@given(scan_inputs())
def test_independent_set_is_the_scan_over_bool_edges(inputs):
    scores, eligible, charges, _, available = inputs
    adjacency = charges > 0.25
    adjacency = adjacency | adjacency.transpose(1, 2)
    want = reference_scan(scores, eligible, adjacency.double(), 0.0, "max", available)
    got = both_ways(greedy_independent_set, adjacency, scores, available, eligible)
    assert torch.equal(got, want)
    # no two taken positions share an edge
    pair = got[:, :, None] & got[:, None, :] & ~torch.eye(got.shape[1], dtype=torch.bool)
    assert not (pair & adjacency).any()


@settings(max_examples=150, deadline=None)
@given(scan_inputs(), st.sampled_from(["max", "sum"]))
def test_bounded_set_charges_each_position_its_own_row(inputs, aggregate):
    scores, eligible, mi, bound, _ = inputs
    ones = torch.ones_like(eligible)
    # DEMASK reads I_ji for position j: the scan's charges are mi transposed
    want = reference_scan(scores, eligible, mi.transpose(1, 2), bound + 1e-12, aggregate, ones)
    got = both_ways(dependence_bounded_set, mi, scores, eligible, bound, aggregate)
    assert torch.equal(got, want)


@pytest.mark.parametrize("aggregate", ["max", "sum"])
def test_reads_its_inputs_once_on_the_cpu_and_nothing_on_an_accelerator(aggregate):
    """On the CPU the scan runs on the host: it reads its four inputs there once (views of
    their memory), however many positions it takes; as on an accelerator it reads nothing."""
    gen = torch.Generator().manual_seed(0)
    scores = torch.rand(8, 30, generator=gen)
    eligible = torch.rand(8, 30, generator=gen) < 0.7
    charges = torch.rand(8, 30, 30, generator=gen)
    for limit in (0.0, 0.5, 1.0):
        with count_host_reads() as reads:
            greedy_scan(scores, eligible, charges, limit, aggregate)
        assert reads.total == 4
    with as_on_accelerators(), count_host_reads() as reads:
        greedy_scan(scores, eligible, charges, 0.5, aggregate)
    assert reads.total == 0


def test_large_batches_take_the_sets_of_the_previous_scan():
    """Many rows of many positions, both aggregates, ties in scores, a transposed view."""
    gen = torch.Generator().manual_seed(7)
    for b, n in ((64, 81), (5, 200)):
        scores = torch.randint(0, 20, (b, n), generator=gen).double()
        eligible = torch.rand(b, n, generator=gen) < 0.6
        available = torch.rand(b, n, generator=gen) < 0.8
        charges = torch.rand(b, n, n, generator=gen, dtype=torch.float64) * 0.2
        for c in (charges, charges.transpose(1, 2)):
            for aggregate, limit in (("max", 0.15), ("sum", 0.5)):
                args = (scores, eligible, c, limit, aggregate, available)
                got = both_ways(greedy_scan, *args)
                assert torch.equal(got, rank_scan_reference(*args))
                assert torch.equal(got, as_before(*args))
