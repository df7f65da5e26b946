"""The decode loop's extras compiled for the CPU (unmask.loop_kernels) against the tensor
operations an accelerator runs: ReMDM's remasking pass and the end-at-EOS check."""

import copy
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from unmask import DecodeConfig, decode, make_sampler
from unmask.generate import StopAtEOS
from unmask.hooks import ReMDMRemask
from unmask.host_reads import as_on_accelerators
from unmask.models.toy import ExactJointMDM
from unmask.rng import row_uniform


def _remdm_states(draw):
    """A hook mid-decode and one pass's inputs, from ``draw`` (hypothesis)."""
    b = draw(st.integers(1, 4))
    n = draw(st.integers(1, 9))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))

    def bits(p):
        return torch.rand(b, n, generator=gen) < p

    strategy = draw(st.sampled_from(["cap", "conf"]))
    start = draw(st.sampled_from([0.0, 0.25, 0.5]))
    hook = ReMDMRemask(eta=draw(st.sampled_from([0.0, 0.05, 0.4, 1.0])), strategy=strategy,
                       start=start, stop=draw(st.sampled_from([start, 0.75, 1.0])),
                       max_remasks=draw(st.integers(0, 2)))
    tokens = torch.where(bits(0.3), 1, 9)
    hook.prepare(SimpleNamespace(mask_id=9), None, tokens)
    hook.counts = torch.randint(0, 3, (b, n), generator=gen)
    hook.revealed_conf = torch.rand(b, n, generator=gen, dtype=torch.float64)
    hook.last_conf = torch.rand(b, n, generator=gen, dtype=torch.float64)
    hook.last_masked = bits(0.5) & ~hook.given
    rows = torch.tensor(sorted(draw(st.sets(st.integers(0, b - 1), min_size=1))))
    r = len(rows)
    masked = (torch.rand(r, n, generator=gen) < draw(st.sampled_from([0.0, 0.3, 0.9]))) \
        & ~hook.given[rows]
    seeds = torch.randint(-2**62, 2**62, (r,), generator=gen)
    steps = torch.randint(0, 100, (r,), generator=gen)
    state = SimpleNamespace(masked=masked, x0_prob=torch.rand(r, n, generator=gen),
                            seeds=seeds, global_step=steps,
                            uniform=lambda stream, shape: row_uniform(seeds, steps, stream,
                                                                      shape))
    return hook, rows, state, bits(0.2)[:r] & ~masked


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_remdm_on_the_host_is_the_tensor_path(data):
    """The CPU's compiled pass (unmask.loop_kernels) sends back the same positions and
    leaves the same state as the tensor operations an accelerator runs."""
    hook, rows, state, remask = _remdm_states(data.draw)
    tensors = copy.deepcopy(hook)
    out = hook.after_write(rows, state, remask.clone())
    with as_on_accelerators():
        want = tensors.after_write(rows, state, remask.clone())
    assert torch.equal(out, want)
    for name in ("counts", "last_masked", "last_conf", "revealed_conf"):
        assert torch.equal(getattr(hook, name), getattr(tensors, name)), name


@pytest.mark.parametrize("strategy", ["cap", "conf"])
def test_remdm_decodes_alike_on_both_paths(strategy):
    model = ExactJointMDM(n=6, v=3, seed=2, concentration=0.3)
    x = torch.full((5, 6), model.mask_id)
    x[1, :3] = 1

    def run():
        return decode(model, x, "topk:k=2", DecodeConfig(temperature=0.8), seed=7,
                      hooks=(ReMDMRemask(eta=0.5, strategy=strategy, max_remasks=2),))

    host = run()
    with as_on_accelerators():
        tensors = run()
    assert host.stats["remasked"].sum() > 0
    for key in ("tokens", "steps", "reveal_step", "nfe"):
        assert torch.equal(getattr(host, key), getattr(tensors, key)), key
    assert torch.equal(host.stats["remasked"], tensors.stats["remasked"])


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_eos_check_on_the_host_is_the_tensor_path(data):
    """StopAtEOS ends the same rows and returns the same selection on both paths; on the
    host, where no row ends, the inner sampler's selection itself."""
    b, block = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4))
    gen_start = data.draw(st.integers(0, 3))
    n = gen_start + block * data.draw(st.integers(1, 4))
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31)))
    eos, mask = 0, 9
    tokens = torch.where(torch.rand(b, n, generator=gen) < 0.6, eos, 1)
    first = torch.randint(0, n + 1, (b,), generator=gen)  # n: no masked position
    masked = torch.arange(n)[None, :] >= first[:, None]
    tokens = tokens.masked_fill(masked, mask)
    eligible = masked & (torch.rand(b, n, generator=gen) < 0.9)
    x0 = torch.randint(1, 3, (b, n), generator=gen)
    entropy = torch.rand(b, n, generator=gen)
    state = SimpleNamespace(tokens=tokens, eligible=eligible, masked=masked, x0=x0,
                            entropy=entropy)
    picked = eligible & (torch.rand(b, n, generator=gen) < 0.5)
    with_entropy = data.draw(st.booleans())

    class Inner:
        def select(self, state):
            from unmask.samplers.base import Selection
            return Selection(picked, entropy=entropy.double() if with_entropy else None)

    wrapper = StopAtEOS(make_sampler("confidence"), eos_id=eos, block=block,
                        gen_start=gen_start)
    wrapper.inner = Inner()
    host = wrapper.select(state)
    with as_on_accelerators():
        want = wrapper.select(state)
    ended = wrapper.ended(state)
    if not ended.any():
        assert host.tokens is None and host.reveal is picked
    else:
        assert torch.equal(host.tokens, want.tokens)
    assert torch.equal(host.reveal, want.reveal)
    assert (host.entropy is None) == (want.entropy is None)
    if host.entropy is not None:
        assert torch.equal(host.entropy, want.entropy)
    expected = torch.where(ended[:, None], eligible, picked)
    assert torch.equal(want.reveal, expected)


def test_a_remdm_hook_decodes_again_as_a_fresh_one():
    """The compiled pass keeps the hook's state as arrays for a decode: a second decode with
    the same hook (another batch shape) is a fresh hook's."""
    model = ExactJointMDM(n=6, v=3, seed=2, concentration=0.3)
    first, second = torch.full((5, 6), model.mask_id), torch.full((3, 6), model.mask_id)
    second[0, :2] = 1

    def run(x, hook):
        return decode(model, x, "topk:k=2", DecodeConfig(temperature=0.8), seed=7,
                      hooks=(hook,))

    hook = ReMDMRemask(eta=0.5, max_remasks=2)
    run(first, hook)
    again, fresh = run(second, hook), run(second, ReMDMRemask(eta=0.5, max_remasks=2))
    assert fresh.stats["remasked"].sum() > 0
    for key in ("tokens", "steps", "reveal_step"):
        assert torch.equal(getattr(again, key), getattr(fresh, key)), key
    assert torch.equal(again.stats["remasked"], fresh.stats["remasked"])
