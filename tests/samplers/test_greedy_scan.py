"""The greedy dependence scan (``greedy_scan``, DAPD's independent set and DEMASK's bounded
set) against a plain per-row Python reference: the same sets on every input, on a dyadic grid
(exact sums: a load equal to the bound is hit exactly) and on arbitrary floats, with ties in
the scores, ineligible positions, unavailable positions, asymmetric charges and both
aggregates; and no host read beyond the one that sizes the scan."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from unmask.host_reads import count_host_reads
from unmask.samplers.base import greedy_scan
from unmask.samplers.dapd import greedy_independent_set
from unmask.samplers.demask import dependence_bounded_set


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
    assert torch.equal(greedy_scan(scores, eligible, charges, limit, aggregate, available),
                       want)


@settings(max_examples=150, deadline=None)
@given(scan_inputs())
def test_independent_set_is_the_scan_over_bool_edges(inputs):
    scores, eligible, charges, _, available = inputs
    adjacency = charges > 0.25
    adjacency = adjacency | adjacency.transpose(1, 2)
    want = reference_scan(scores, eligible, adjacency.double(), 0.0, "max", available)
    got = greedy_independent_set(adjacency, scores, available, eligible)
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
    assert torch.equal(dependence_bounded_set(mi, scores, eligible, bound, aggregate), want)


def test_one_host_read_sizes_the_scan():
    gen = torch.Generator().manual_seed(0)
    scores = torch.rand(8, 30, generator=gen)
    eligible = torch.rand(8, 30, generator=gen) < 0.7
    charges = torch.rand(8, 30, 30, generator=gen)
    with count_host_reads() as reads:
        greedy_scan(scores, eligible, charges, 0.5, "sum")
    assert reads.total == 1
