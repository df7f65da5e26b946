"""Numbers at the edges of a decode's settings: subnormal temperatures, integers past 64 bits
in a spec, a ramp rate whose cap would overflow. Each is refused in one line naming the field,
or decodes as its limit does; never an OverflowError, a RuntimeError or a token that is not
a token."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unmask import DecodeConfig, UnmaskError, decode, parse_spec
from unmask.samplers.base import MAX_PARAM_INT, make_sampler
from unmask.samplers.ramp import ramp_cap
from unmask.validation import MIN_TEMPERATURE

FAST = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def _masked(toy, rows: int = 2) -> torch.Tensor:
    return torch.full((rows, toy.max_length), toy.mask_id)


@pytest.mark.parametrize("t", [5e-324, 1e-320, 1e-310, 1e-300, MIN_TEMPERATURE / 2])
def test_a_subnormal_temperature_is_refused_in_one_line(t):
    with pytest.raises(UnmaskError, match=r"temperature: must be .* at least 1e-06"):
        DecodeConfig(temperature=t)
    for spec in (f"info-gain:tau_tok={t!r}", f"lookum:tau_pos={t!r}"):
        with pytest.raises(UnmaskError, match="tau_"):
            parse_spec(spec)


@FAST
@given(t=st.floats(MIN_TEMPERATURE, 1e6), seed=st.integers(0, 2**31))
def test_any_allowed_temperature_decodes_real_tokens(toy, t, seed):
    res = decode(toy, _masked(toy), make_sampler("confidence"), DecodeConfig(temperature=t),
                 seed=seed)
    real = toy.real_token_mask
    assert bool(real[res.tokens].all())


def test_the_smallest_temperature_is_the_argmax_it_tends_to(toy):
    cold = decode(toy, _masked(toy), make_sampler("confidence"),
                  DecodeConfig(temperature=MIN_TEMPERATURE), seed=3)
    argmax = decode(toy, _masked(toy), make_sampler("confidence"), DecodeConfig(), seed=3)
    assert torch.equal(cold.tokens, argmax.tokens)


@pytest.mark.parametrize("spec", [
    "topk:k=1000000000000000000000000", "topk:k=9223372036854775808",
    "topk:k=-9223372036854775809", "topk:k=8+ramp=0.5,min=1000000000000000000000",
    "topk:k=2+verify,max_draft=100000000000000000000000",
    "confidence+wino,max_checks=99999999999999999999", "uniform:steps=4294967296"])
def test_integers_past_the_bound_are_refused_at_their_position(spec):
    with pytest.raises(UnmaskError, match=r"out of range .* at position \d+"):
        parse_spec(spec)


@FAST
@given(k=st.one_of(st.integers(MAX_PARAM_INT + 1, 2**200),
                   st.integers(-(2**200), -MAX_PARAM_INT - 1)))
def test_make_sampler_refuses_integers_past_the_bound(k):
    with pytest.raises(UnmaskError, match="k: out of range"):
        make_sampler("topk", k=k)


@FAST
@given(k=st.integers(1, MAX_PARAM_INT))
def test_any_count_within_the_bound_decodes(toy, k):
    res = decode(toy, _masked(toy, 1), parse_spec(f"topk:k={k}").build(), DecodeConfig())
    assert int(res.nfe[0]) >= 1 and not bool((res.tokens == toy.mask_id).any())


@FAST
@given(rate=st.floats(1.0, 1e308), known=st.lists(st.integers(0, 10_000), min_size=1,
                                                    max_size=4), least=st.integers(1, 2**40))
def test_the_ramp_cap_never_overflows(rate, known, least):
    """A larger rate never caps less (before: floor(known * rate) past int64 became the
    minimum: one position a pass)."""
    k = torch.tensor(known)
    cap = ramp_cap(k, rate, least)
    assert bool((cap >= least).all()) and bool((cap >= ramp_cap(k, 1.0, least)).all())
    assert bool((cap[k > 0] >= torch.minimum(k[k > 0] * 1, torch.tensor(2**53))).all())


@pytest.mark.parametrize("rate", ["1e18", "1e300"])
def test_a_huge_ramp_rate_decodes_as_a_large_one(toy, rate):
    runs = [decode(toy, _masked(toy), parse_spec(f"topk:k=8+ramp={r}").build(),
                   DecodeConfig(), seed=1) for r in (rate, "100")]
    assert torch.equal(runs[0].tokens, runs[1].tokens)
    assert torch.equal(runs[0].nfe, runs[1].nfe)


@pytest.mark.parametrize("samples", [10**9, 2**63])
def test_infill_refuses_more_draws_than_a_run_holds_before_building_them(run, samples):
    run("infill", "--model", "protein", "--template", "M<mask:2>",
        "--samples", samples).refused("--samples")
