"""The step's shared top-2 (``StepState.top2``, what margin reads): the two largest
probabilities per position exactly as a sort gives them, ties and zeros included, at every
temperature; margin and KLASS decode as their sorted and copying forms did."""

import dataclasses

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from unmask import DecodeConfig, ExactJointMDM, decode, make_sampler
from unmask.probs import propose, real_log_probs
from unmask.samplers.base import Selection, StepState, top_k_mask
from unmask.samplers.klass import KLASSSampler
from unmask.samplers.margin import MarginSampler


def state_of(logits: torch.Tensor, real: torch.Tensor, temperature: float) -> StepState:
    b, n, v = logits.shape
    lp = real_log_probs(logits, real)
    noise = (torch.empty(b, n, v, dtype=torch.float64).exponential_().log().neg()
             if temperature > 0 else None)
    x0 = propose(lp, temperature, noise)
    probs = lp.exp()
    zeros = torch.zeros(b, dtype=torch.long)
    return StepState(
        tokens=torch.full((b, n), v - 1), masked=torch.ones(b, n, dtype=torch.bool),
        eligible=torch.ones(b, n, dtype=torch.bool), output=None, log_probs=lp, probs=probs,
        entropy=torch.zeros(b, n), x0=x0, x0_prob=probs.gather(-1, x0[..., None])[..., 0],
        step=zeros, global_step=zeros, block_masked=zeros + n, row_ids=torch.arange(b),
        seeds=zeros, temperature=temperature, model=None, mask_id=v - 1, real_mask=real)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3), st.integers(1, 6), st.integers(2, 7), st.integers(0, 2**31),
       st.sampled_from([0.0, 0.7]), st.booleans(), st.booleans())
def test_top2_is_the_sorted_two_largest(b, n, v, seed, temperature, ties, double):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(b, n, v, generator=gen, dtype=torch.float64 if double else None)
    if ties:  # few distinct values: equal top probabilities
        logits = logits.round()
    real = torch.rand(v, generator=gen) < 0.8
    real[0] = True  # at least one real token; the others may be 0
    state = state_of(logits, real, temperature)
    assert torch.equal(state.top2, state.probs.topk(2, dim=-1).values)
    assert state.top2 is state.top2  # computed once


def test_a_states_rows_compute_their_own():
    gen = torch.Generator().manual_seed(0)
    state = state_of(torch.randn(4, 5, 6, generator=gen), torch.ones(6, dtype=torch.bool), 0.0)
    whole = state.top2
    state = dataclasses.replace(state, output=_NoRows())
    part = state.rows(torch.tensor([2, 0])).top2
    assert torch.equal(part, whole[[2, 0]])


class _NoRows:
    def rows(self, index):
        return self


class SortedMargin(MarginSampler):
    """Margin as it was first written: a sort of every position's probabilities."""

    def select(self, state):
        top2 = state.probs.topk(2, dim=-1).values
        return Selection(top_k_mask(state.widen(top2[..., 0] - top2[..., 1]), state.eligible,
                                    self.count(state)))


class CopyingKLASS(KLASSSampler):
    """KLASS keeping its history as it first did: gathered and written back every pass."""

    def select(self, state):
        rows, lp = state.row_ids, state.log_probs
        if self._prev is None:
            b, n, v = self._batch_size, lp.shape[1], lp.shape[2]
            self._prev = torch.full((b, n, v), -torch.inf, dtype=lp.dtype)
            self._kl = torch.full((b, self.history, n), torch.inf, dtype=lp.dtype)
        kl = torch.nansum(state.probs * (lp - self._prev[rows]), -1)
        kls = torch.cat([kl[:, None], self._kl[rows, :-1]], dim=1)
        self._kl[rows] = kls
        self._prev[rows] = lp
        stable = (kls < self.kl_threshold).all(1)
        reveal = stable & (state.x0_prob > self.conf_threshold) & state.eligible
        fallback = top_k_mask(state.x0_prob, state.eligible, self.count(state))
        return Selection(torch.where(reveal.any(1, keepdim=True), reveal, fallback))


def test_margin_and_klass_decode_as_before():
    m = ExactJointMDM(n=7, v=3, seed=2, concentration=0.5)
    x = torch.full((5, 7), m.mask_id)
    x[1, :3] = 1  # rows finish at different passes
    for temperature in (0.0, 0.8):
        cfg = DecodeConfig(temperature=temperature)
        for new, old in ((MarginSampler(k=2), SortedMargin(k=2)),
                         (make_sampler("klass", kl_threshold=0.05, conf_threshold=0.5),
                          CopyingKLASS(kl_threshold=0.05, conf_threshold=0.5))):
            got, want = decode(m, x, new, cfg, seed=3), decode(m, x, old, cfg, seed=3)
            assert torch.equal(got.tokens, want.tokens)
            assert torch.equal(got.reveal_step, want.reveal_step)
