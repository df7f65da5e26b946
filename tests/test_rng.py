"""The counter-based row noise against a plain-Python statement of the same construction:
exact values for any seed, step, stream and slice, both ways they are computed (the tensor
arithmetic of other devices, split to stay below int64 overflow, and the CPU's compiled
loop), and a slice of a draw equals the same elements of the whole draw."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from unmask.rng import mix32, row_uniform, row_uniform_tensors

M32 = 0xFFFFFFFF


def py_mix32(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    return x ^ (x >> 16)


def py_uniform(seed: int, step: int, stream: int, index: int) -> float:
    key = py_mix32((seed & M32) ^ py_mix32((seed >> 32) & M32))
    key = py_mix32((key + py_mix32((step & M32) + 0x632BE5AB)) & M32)
    key = py_mix32((key ^ py_mix32((stream & M32) + 0x85EBCA77)) & M32)
    h = py_mix32((key + py_mix32(index)) & M32)
    h1, h2 = py_mix32((h + 0x9E3779B9) & M32), py_mix32((h ^ 0x27D4EB2F) & M32)
    return ((h1 >> 6) * 2**26 + (h2 >> 6) + 0.5) / 2**52


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=3),
       st.integers(0, 2**40), st.integers(0, 2**32 - 1), st.integers(0, 500),
       st.integers(1, 6))
def test_values_follow_the_construction(seeds, step, stream, start, numel):
    seeds_t, steps = torch.tensor(seeds), torch.full((len(seeds),), step)
    got = row_uniform(seeds_t, steps, stream, (numel,), start)  # the CPU's compiled loop
    want = [[py_uniform(s, step, stream, start + i) for i in range(numel)] for s in seeds]
    assert got.tolist() == want
    # the tensor operations of other devices, here on the CPU
    assert row_uniform_tensors(seeds_t, steps, stream, numel, start).tolist() == want


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64))
def test_mix32_is_the_32_bit_hash(values):
    assert mix32(torch.tensor(values)).tolist() == [py_mix32(v) for v in values]


def test_a_slice_is_the_same_elements_of_the_whole_draw():
    seeds, step = torch.tensor([3, -7]), torch.tensor([0, 11])
    whole = row_uniform(seeds, step, 1, (6, 4))
    assert torch.equal(row_uniform(seeds, step, 1, (2, 4), start=8), whole[:, 2:4])
