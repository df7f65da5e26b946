"""WINO's narrow-out check and ReMDM-style remasking as decode hooks (unmask.hooks)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from unmask import DecodeConfig, decode
from unmask.errors import UnmaskError
from unmask.hooks import ReMDMRemask, WinoVerify
from unmask.models.toy import ExactJointMDM
from unmask.probs import real_log_probs


def _loo_conf(model, state, pos):
    """p(state[pos] | state with pos masked) under the model."""
    x = state.clone()
    x[pos] = model.mask_id
    lp = real_log_probs(model(x[None]).logits, model.real_token_mask)[0]
    return float(lp[pos, state[pos]].exp())


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("tau2", [0.3, 0.6])
def test_wino_masks_again_exactly_the_tokens_the_model_no_longer_backs(seed, tau2):
    model = ExactJointMDM(n=6, v=3, seed=seed, concentration=0.3)
    x = torch.full((1, 6), model.mask_id)
    hook = WinoVerify(tau2=tau2, max_checks=6, max_remasks=1)
    res = decode(model, x, "topk:k=2", DecodeConfig(record_history=True), seed=seed,
                 hooks=(hook,))
    prev, counts = x[0], torch.zeros(6, dtype=torch.long)
    for state in res.history:
        state = state[0]
        if (prev == model.mask_id).any():  # a pass on a row still decoding checks its tokens
            for pos in range(6):
                if prev[pos] == model.mask_id or counts[pos] >= 1:
                    continue
                back = bool(state[pos] == model.mask_id)
                assert back == (_loo_conf(model, prev, pos) < tau2), pos
                counts[pos] += back
        prev = state
    assert (res.tokens != model.mask_id).all()
    assert res.stats["remasked"].tolist() == [int(counts.sum())]
    # each check is one more sequence; the pass itself is one call
    assert (res.sequences >= res.nfe).all()


def test_wino_that_backs_everything_changes_nothing(toy):
    x = torch.full((3, 5), toy.mask_id)
    plain = decode(toy, x, "threshold:tau=0.5")
    checked = decode(toy, x, "threshold:tau=0.5", hooks=(WinoVerify(tau2=1e-12),))
    assert torch.equal(plain.tokens, checked.tokens)
    assert torch.equal(plain.steps, checked.steps)
    assert checked.stats["remasked"].tolist() == [0, 0, 0]


def test_remdm_with_eta_zero_changes_nothing(toy):
    x = torch.full((3, 5), toy.mask_id)
    plain = decode(toy, x, "topk:k=2", DecodeConfig(temperature=0.7), seed=4)
    hooked = decode(toy, x, "topk:k=2", DecodeConfig(temperature=0.7), seed=4,
                    hooks=(ReMDMRemask(eta=0.0),))
    for key in ("tokens", "nfe", "steps", "reveal_step"):
        assert torch.equal(getattr(plain, key), getattr(hooked, key)), key


def test_remdm_cap_one_sends_every_decoded_token_back_once():
    model = ExactJointMDM(n=6, v=3, seed=0, concentration=0.3)
    x = torch.full((1, 6), model.mask_id)
    res = decode(model, x, "topk:k=2", DecodeConfig(record_history=True),
                 hooks=(ReMDMRemask(eta=1.0, strategy="cap", max_remasks=1),))
    # pass 1 reveals 2; pass 2 reveals 2 more and sends pass 1's back
    first, second = res.history[0][0], res.history[1][0]
    assert int((first != model.mask_id).sum()) == 2
    assert (second[first != model.mask_id] == model.mask_id).all()
    assert int((second != model.mask_id).sum()) == 2
    assert (res.tokens != model.mask_id).all()
    assert res.stats["remasked"].tolist() == [int(res.stats["remasked"][0])]
    assert 1 <= int(res.stats["remasked"][0]) <= 6


@pytest.mark.parametrize("strategy", ["cap", "conf"])
def test_remdm_rows_are_reproducible_alone(toy, strategy):
    x = torch.full((4, 5), toy.mask_id)
    hooks = (ReMDMRemask(eta=0.4, strategy=strategy, max_remasks=2),)
    batch = decode(toy, x, "topk:k=2", seed=10, hooks=hooks)
    for r in range(4):
        alone = decode(toy, x[r:r + 1], "topk:k=2", seed=10 + r,
                       hooks=(ReMDMRemask(eta=0.4, strategy=strategy, max_remasks=2),))
        assert torch.equal(alone.tokens[0], batch.tokens[r])
        assert alone.stats["remasked"][0] == batch.stats["remasked"][r]
    assert (batch.stats["remasked"] <= 2 * 5).all()


def test_remdm_window_outside_the_decode_changes_nothing(toy):
    x = torch.full((2, 5), toy.mask_id)
    plain = decode(toy, x, "topk:k=2")
    late = decode(toy, x, "topk:k=2", hooks=(ReMDMRemask(eta=1.0, start=1.0, stop=1.0),))
    assert torch.equal(plain.tokens, late.tokens) and late.stats["remasked"].sum() == 0


def test_bad_hook_settings():
    with pytest.raises(UnmaskError, match="tau2: must be in"):
        WinoVerify(tau2=0.0)
    with pytest.raises(UnmaskError, match="max_checks: must be >= 1"):
        WinoVerify(max_checks=0)
    with pytest.raises(UnmaskError, match="eta: must be in"):
        ReMDMRemask(eta=1.5)
    with pytest.raises(UnmaskError, match="strategy: expected one of"):
        ReMDMRemask(strategy="rescale")
    with pytest.raises(UnmaskError, match="start, stop"):
        ReMDMRemask(start=0.8, stop=0.2)


@pytest.mark.parametrize("hook", [lambda: WinoVerify(tau2=0.6, max_checks=3),
                                  lambda: ReMDMRemask(eta=0.3, strategy="conf"),
                                  lambda: ReMDMRemask(eta=0.3, strategy="cap")])
def test_a_batch_whose_rows_finish_apart_decodes_each_row_as_alone(hook):
    """The hooks keep per-row state for the whole batch; while every row decodes they read
    and write it whole, once rows have left by row: each row decodes as it does alone."""
    model = ExactJointMDM(n=6, v=3, seed=5, concentration=0.3)
    x = torch.full((4, 6), model.mask_id)
    x[1, :4] = 1  # finishes first
    x[2, :2] = 2
    batch = decode(model, x, "topk:k=2", seed=3, hooks=(hook(),))
    for r in range(4):
        alone = decode(model, x[r:r + 1], "topk:k=2", seed=3 + r, hooks=(hook(),))
        assert torch.equal(batch.tokens[r], alone.tokens[0])
        assert torch.equal(batch.reveal_step[r], alone.reveal_step[0])
        assert torch.equal(batch.stats["remasked"][r], alone.stats["remasked"][0])


def _remdm_states(draw):
    """A hook mid-decode and one pass's inputs, from ``draw`` (hypothesis)."""
    from types import SimpleNamespace

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
    noise = torch.rand(r, n, generator=gen, dtype=torch.float64)
    state = SimpleNamespace(masked=masked, x0_prob=torch.rand(r, n, generator=gen),
                            uniform=lambda stream, shape: noise)
    return hook, rows, state, bits(0.2)[:r] & ~masked


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_remdm_on_the_host_is_the_tensor_path(data):
    """The CPU's compiled pass (unmask.remask_kernels) sends back the same positions and
    leaves the same state as the tensor operations an accelerator runs."""
    import copy

    from unmask.host_reads import as_on_accelerators

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
    from unmask.host_reads import as_on_accelerators

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
