"""WINO's narrow-out check and ReMDM-style remasking as decode hooks (unmask.hooks)."""

import pytest
import torch

from unmask import DecodeConfig, decode
from unmask.errors import UnmaskError
from unmask.hooks import Hook, ReMDMRemask, WinoVerify
from unmask.host_reads import count_host_reads
from unmask.models.toy import ExactJointMDM, FixedOutputModel
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


class _Reads(Hook):
    """Reads each pass after the write and sends nothing back (``rewrites`` False)."""

    reads_eligible_only = True  # the loop computes the current blocks only, as without it

    def __init__(self):
        self.passes = 0

    def after_write(self, rows, state, remask):
        self.passes += 1
        return remask


class _WritesInto(Hook):
    rewrites = True

    def after_write(self, rows, state, remask):
        remask |= state.masked  # the remask it was handed: refused
        return remask


class _MasksAgainUnsaid(Hook):
    def after_write(self, rows, state, remask):  # rewrites left False
        return remask | ~state.masked


def test_a_hook_that_only_reads_after_the_write_costs_no_read_and_changes_nothing():
    """An after_write that returns what it was given leaves the loop following the rows'
    blocks (its one read a pass; without that, a read a pass more to find them) and the
    decode as without it."""
    model = FixedOutputModel(n=32, v=9, seed=3)
    x = torch.full((3, model.n), model.mask_id)
    config = DecodeConfig(block_size=8)
    with count_host_reads() as alone:
        want = decode(model, x, "confidence", config, seed=1)
    hook = _Reads()
    with count_host_reads() as reads:
        got = decode(model, x, "confidence", config, seed=1, hooks=(hook,))
    assert torch.equal(got.tokens, want.tokens)
    assert torch.equal(got.reveal_step, want.reveal_step)
    assert hook.passes == int(want.steps.max()) == model.n
    assert reads.total == alone.total


@pytest.mark.parametrize("hook, says", [(_WritesInto(), "wrote into the remask"),
                                        (_MasksAgainUnsaid(), "rewrites is False")])
def test_a_hook_that_breaks_the_remask_contract_is_named(hook, says):
    model = ExactJointMDM(n=6, v=3, seed=0)
    x = torch.full((2, 6), model.mask_id)
    with pytest.raises(UnmaskError, match=f"hook {type(hook).__name__}: .*{says}"):
        decode(model, x, "topk:k=2", hooks=(hook,))


@pytest.mark.parametrize("eta, back", [(0.0, False), (1.0, True)])
def test_remdm_hands_back_the_remask_it_was_given_where_nothing_goes_back(eta, back):
    model = ExactJointMDM(n=6, v=3, seed=1)
    x = torch.full((2, 6), model.mask_id)
    hook = ReMDMRemask(eta=eta, strategy="cap", max_remasks=1)
    seen = []
    after_write = hook.after_write

    def spy(rows, state, remask):
        out = after_write(rows, state, remask)
        seen.append(out is remask)
        return out

    hook.after_write = spy
    res = decode(model, x, "topk:k=2", seed=3, hooks=(hook,))
    assert (res.tokens != model.mask_id).all()
    assert bool(res.stats["remasked"].any()) == back
    assert all(seen) != back  # eta 0: every pass hands it back; eta 1: some pass does not
