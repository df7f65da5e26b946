"""Verified parallel reveals (the ``Verified`` sampler wrapper, :mod:`unmask.samplers.verified`)."""

import dataclasses

import pytest
import torch

from unmask import DecodeConfig, Verified, decode, make_sampler, parse_spec
from unmask.errors import UnmaskError
from unmask.hooks import corrector_hooks
from unmask.models.toy import ExactJointMDM
from unmask.probs import real_log_probs
from unmask.rng import row_gumbel

#: CI reruns these under every CPU kernel set and thread count (make test-kernels)
pytestmark = pytest.mark.kernels


def _v(name, tolerance=1.0, max_draft=None, **params):
    return Verified(make_sampler(name, **params), tolerance=tolerance, max_draft=max_draft)


def _proposal(model, tokens, temperature, seed, step):
    """(N,) the loop's proposal at every position of one state (N,), and its confidence."""
    lp = real_log_probs(model(tokens[None]).logits, model.real_token_mask)[0]
    if temperature > 0:
        noise = row_gumbel(torch.tensor([seed]), torch.tensor([step]), 0, tuple(lp.shape))[0]
        x0 = (lp.double() / temperature + noise).argmax(-1)
    else:
        x0 = lp.argmax(-1)
    return x0, lp.exp().gather(-1, x0[:, None]).squeeze(-1)


def _replay(model, x, res, temperature, seed):
    """Check every verified pass of row 0: each token it revealed, in confidence order, is the
    proposal of the model given the state before the pass and the pass's earlier tokens.
    Returns the passes as lists of positions in that order."""
    passes = []
    prev = x[0]
    for t, state in enumerate(res.history):
        state = state[0]
        new = (state != prev).nonzero().squeeze(1)
        if not new.numel():
            break
        x0, conf = _proposal(model, prev, temperature, seed, t)
        order = new[torch.argsort(conf[new].double(), descending=True, stable=True)]
        cur = prev.clone()
        for pos in order.tolist():
            here, _ = _proposal(model, cur, temperature, seed, t)
            assert int(here[pos]) == int(state[pos]), (t, pos)
            assert int(x0[pos]) == int(state[pos])  # the drafted token itself
            cur[pos] = state[pos]
        assert torch.equal(cur, state)
        passes.append(order.tolist())
        prev = state
    return passes


@pytest.mark.parametrize("temperature", [0.0, 0.8])
@pytest.mark.parametrize("seed", range(4))
def test_every_verified_token_is_its_predecessors_proposal(temperature, seed):
    model = ExactJointMDM(n=6, v=3, seed=seed, concentration=0.3)
    x = torch.full((1, 6), model.mask_id)
    cfg = DecodeConfig(temperature=temperature, record_history=True)
    # top-k with k = N drafts every masked position every pass
    res = decode(model, x, _v("topk", k=6), cfg, seed=seed)
    passes = _replay(model, x, res, temperature, seed)
    assert sum(map(len, passes)) == 6
    assert int(res.stats["rejected"][0]) == sum(6 - sum(map(len, passes[:t])) - len(p)
                                       for t, p in enumerate(passes))


@pytest.mark.parametrize("seed", range(6))
def test_the_accepted_prefix_is_the_longest_consistent_one(seed):
    """With every masked position drafted, the pass stops exactly at the first position
    whose proposal its predecessors change."""
    model = ExactJointMDM(n=6, v=3, seed=seed, concentration=0.3)
    x = torch.full((1, 6), model.mask_id)
    res = decode(model, x, _v("topk", k=6), DecodeConfig(record_history=True))
    prev = x[0]
    for t, state in enumerate(res.history):
        state = state[0]
        if torch.equal(state, prev):
            break
        x0, conf = _proposal(model, prev, 0.0, 0, t)
        masked = (prev == model.mask_id).nonzero().squeeze(1)
        order = masked[torch.argsort(conf[masked].double(), descending=True, stable=True)]
        n_new = int((state != prev).sum())
        if n_new < len(order):  # the next drafted position was rejected under the accepted
            nxt = int(order[n_new])
            here, _ = _proposal(model, state, 0.0, 0, t)
            assert int(here[nxt]) != int(x0[nxt])
        prev = state


def test_a_pair_its_own_head_would_change_is_split():
    """joint[x0, x1]: p(x0 = 1) = 0.6 and p(x1 = 1) = 0.65, so top-2 writes (1, 1); but given
    x1 = 1 (the surer one, first), x0 = 0 is likelier (0.40 against 0.25)."""
    model = ExactJointMDM(torch.tensor([[0.0, 0.40], [0.35, 0.25]]))
    x = torch.full((1, 2), model.mask_id)
    plain = decode(model, x, make_sampler("topk", k=2))
    verified = decode(model, x, _v("topk", k=2))
    assert plain.tokens.tolist() == [[1, 1]] and plain.nfe.tolist() == [1]
    assert verified.tokens.tolist() == [[0, 1]]
    assert verified.stats["rejected"].tolist() == [1] and verified.steps.tolist() == [2]
    # the base pass, then one call on the one prefix with a MASK left, reused as pass 2's
    assert verified.nfe.tolist() == [2] and verified.sequences.tolist() == [2]


def test_a_sequential_sampler_is_unchanged(toy):
    x = torch.full((4, 5), toy.mask_id)
    x[1, 2] = 0
    for temperature in (0.0, 0.9):
        plain = decode(toy, x, "confidence", DecodeConfig(temperature=temperature), seed=3)
        verified = decode(toy, x, _v("confidence"), DecodeConfig(temperature=temperature),
                          seed=3)
        for key in ("tokens", "nfe", "sequences", "steps", "reveal_step", "cumulative_entropy"):
            assert torch.equal(getattr(plain, key), getattr(verified, key)), key
        assert verified.stats["rejected"].tolist() == [0, 0, 0, 0]


def test_verify_max_one_is_sequential_confidence(toy):
    x = torch.full((3, 5), toy.mask_id)
    seq = decode(toy, x, "confidence")
    capped = decode(toy, x, _v("topk", max_draft=1, k=5))
    assert torch.equal(seq.tokens, capped.tokens) and torch.equal(seq.nfe, capped.nfe)


def test_passes_cost_one_call_each(tiny_transformer):
    m = tiny_transformer
    x = torch.full((4, 12), m.mask_id)
    res = decode(m, x, _v("eb", gamma=2.0), seed=0)
    # one call per pass (the last pass's verifying call may be the only extra one)
    assert ((res.nfe >= res.steps) & (res.nfe <= res.steps + 1)).all()
    assert (res.sequences >= 12 + res.stats["rejected"]).all()


def test_verify_refuses_what_it_cannot_check(toy):
    x = torch.full((1, 5), toy.mask_id)
    with pytest.raises(UnmaskError, match="verify: sampler 'info-gain' evaluates its next"):
        Verified(make_sampler("info-gain"))
    with pytest.raises(UnmaskError, match=r"verify: sampler 'topk\+verify'"):
        Verified(_v("topk"))  # a verified sampler evaluates its next state

    class Corrector:
        def check_model(self, model):
            pass

        def wrong_probs(self, output, tokens):
            return torch.zeros(tokens.shape)

    with pytest.raises(UnmaskError, match="verify: not with a corrector"):
        decode(toy, x, _v("topk"), hooks=corrector_hooks(Corrector()))
    with pytest.raises(UnmaskError, match="max_draft: must be None or an integer >= 1"):
        _v("topk", max_draft=0)
    with pytest.raises(UnmaskError, match="max_draft: must be None or an integer >= 1"):
        _v("topk", max_draft=True)
    for bad in (-0.1, 1.5, True, "0.1"):
        with pytest.raises(UnmaskError, match="verify_tolerance: must be in"):
            _v("topk", tolerance=bad)
    with pytest.raises(UnmaskError, match="inner: expected a Sampler"):
        Verified("topk")


def test_bench_spec_suffix():
    e = parse_spec("eb:gamma=0.3,order=confidence+verify")
    assert e.verified and not e.corrected and e.params == {"gamma": 0.3, "order": "confidence"}
    assert e.label == "eb gamma=0.3 order=confidence +verify"
    assert isinstance(e.build(), Verified) and e.build().tolerance == 1.0
    for bad in ("eb+verify+corrector", "eb+corrector+verify"):
        with pytest.raises(UnmaskError, match=r"\+verify and \+corrector cannot be combined"):
            parse_spec(bad)
    with pytest.raises(UnmaskError, match="'lookum' evaluates its next state itself"):
        parse_spec("lookum+verify")
    e = parse_spec("mi-guided:gamma=1.0,order=confidence+verify=0.01")
    assert e.verified and e.verify == 0.01 and e.params["gamma"] == 1.0
    assert e.label == "mi-guided gamma=1.0 order=confidence +verify=0.01"
    from unmask.bench.plot import plot_family

    assert plot_family({"name": "eb", "label": "eb gamma=1.0 +verify=0.01", "verified": True,
                        "verify_tolerance": 0.01}) == "eb +verify"
    for bad in ("eb+verify=2", "eb+verify=x", "eb+verify=true"):
        with pytest.raises(UnmaskError, match=r"takes a tolerance in \[0, 1\]"):
            parse_spec(bad)


@pytest.mark.parametrize("seed", range(5))
def test_tolerance_zero_is_sequential_confidence_decoding(seed):
    model = ExactJointMDM(n=6, v=3, seed=seed, concentration=0.3)
    x = torch.full((3, 6), model.mask_id)
    x[1, 0] = 1
    x[2, 3] = 2
    seq = decode(model, x, "confidence")
    exact = decode(model, x, _v("topk", tolerance=0.0, k=6))
    loose = decode(model, x, _v("topk", k=6))
    assert torch.equal(exact.tokens, seq.tokens)
    # each position pays its entropy given what was revealed before it, as sequentially
    assert torch.allclose(exact.cumulative_entropy, seq.cumulative_entropy, atol=1e-9)
    assert not torch.allclose(loose.cumulative_entropy, seq.cumulative_entropy, atol=1e-3)
    # the order too: what sequential decoding reveals first is never revealed later
    a, b = seq.reveal_step, exact.reveal_step
    before = (a[:, :, None] < a[:, None, :]) & (a[:, :, None] >= 0)
    assert not (before & (b[:, :, None] > b[:, None, :])).any()
    assert (exact.steps >= loose.steps).all() and (exact.nfe <= seq.nfe + 1).all()


def test_tolerance_zero_matches_sequential_on_a_transformer(tiny_transformer):
    m = tiny_transformer
    x = torch.full((6, 12), m.mask_id)
    x[::2, ::3] = 1
    seq = decode(m, x, "confidence")
    exact = decode(m, x, _v("eb", tolerance=0.0, gamma=5.0, order="confidence"))
    assert torch.equal(exact.tokens, seq.tokens)
    assert torch.allclose(exact.cumulative_entropy, seq.cumulative_entropy, atol=1e-4)
    assert (exact.nfe <= seq.nfe).all() and bool((exact.nfe < seq.nfe).any())


def test_calls_split_by_rows_change_nothing(tiny_transformer, monkeypatch):
    """Prefixes split over many calls (one sequence per call at most, so a row that needs more
    takes a call alone and rows that need none join it) decode as one call per pass does, and
    still charge each row one call per pass."""
    import functools

    import unmask.samplers.verified as verified

    m = tiny_transformer
    x = torch.full((5, 12), m.mask_id)
    x[1] = 1  # nothing to decode
    x[3, :10] = 2  # two cells left
    one = decode(m, x, _v("eb", tolerance=0.2, gamma=3.0), seed=0)
    monkeypatch.setattr(verified, "verify_reveal",
                        functools.partial(verified.verify_reveal, max_sequences=1))
    split = decode(m, x, _v("eb", tolerance=0.2, gamma=3.0), seed=0)
    for key in ("tokens", "nfe", "sequences", "steps", "cumulative_entropy"):
        assert torch.equal(getattr(one, key), getattr(split, key)), key
    assert torch.equal(one.stats["rejected"], split.stats["rejected"])
    assert int(one.stats["rejected"].sum()) > 0


def _largest_power_of_two_at_most(j: int) -> int:
    return 1 << (j.bit_length() - 1)


@pytest.mark.parametrize("temperature", [0.0, 0.8])
@pytest.mark.parametrize("seed", range(4))
def test_doubling_checks_each_token_under_the_last_evaluated_prefix(temperature, seed):
    model = ExactJointMDM(n=7, v=3, seed=seed, concentration=0.3)
    x = torch.full((1, 7), model.mask_id)
    cfg = DecodeConfig(temperature=temperature, record_history=True)
    sampler = Verified(make_sampler("topk", k=7), prefixes="doubling")
    res = decode(model, x, sampler, cfg, seed=seed)
    prev = x[0]
    for t, state in enumerate(res.history):
        state = state[0]
        new = (state != prev).nonzero().squeeze(1)
        if not new.numel():
            break
        masked = int((prev == model.mask_id).sum())
        # the pass reveals an evaluated prefix: a power of two long, or the whole draft
        assert new.numel() == masked or new.numel() == _largest_power_of_two_at_most(
            new.numel())
        x0, conf = _proposal(model, prev, temperature, seed, t)
        order = new[torch.argsort(conf[new].double(), descending=True, stable=True)].tolist()
        for j in range(2, len(order) + 1):  # d_j under P_s, s = the largest power of 2 < j
            s = _largest_power_of_two_at_most(j - 1)
            cur = prev.clone()
            cur[order[:s]] = state[order[:s]]
            here, _ = _proposal(model, cur, temperature, seed, t)
            assert int(here[order[j - 1]]) == int(state[order[j - 1]]), (t, j)
        assert all(int(x0[p]) == int(state[p]) for p in order)
        prev = state


def test_doubling_evaluates_about_log2_of_the_draft(tiny_transformer):
    m = tiny_transformer
    x = torch.full((3, 12), m.mask_id)
    every = decode(m, x, Verified(make_sampler("topk", k=12)), seed=0)
    doubling = decode(m, x, Verified(make_sampler("topk", k=12), prefixes="doubling"), seed=0)
    # a draft of K <= 12 evaluates at most the lengths 1, 2, 4, 8 and K: 5 sequences a pass
    assert (doubling.sequences <= 5 * doubling.nfe).all()
    assert doubling.sequences.sum() < every.sequences.sum()


@pytest.mark.parametrize("tolerance", [0.0, 0.05, 1.0])
def test_doubling_equals_all_for_drafts_of_two(toy, tolerance):
    x = torch.full((4, 5), toy.mask_id)
    a = decode(toy, x, Verified(make_sampler("topk", k=2), tolerance=tolerance), seed=1)
    d = decode(toy, x, Verified(make_sampler("topk", k=2), tolerance=tolerance,
                                prefixes="doubling"), seed=1)
    for key in ("tokens", "nfe", "sequences", "steps", "reveal_step", "cumulative_entropy"):
        assert torch.equal(getattr(a, key), getattr(d, key)), key


def test_prefixes_must_be_known():
    with pytest.raises(UnmaskError, match="verify prefixes: expected one of"):
        Verified(make_sampler("topk"), prefixes="bisect")


@pytest.mark.parametrize("spec", ["topk:k=3+verify=0.5",
                                  "eb:gamma=1.0+verify=0.05,prefixes=doubling", "info-gain"])
def test_a_handed_over_pass_carries_the_loops_own_log_probs(spec, tiny_transformer,
                                                            monkeypatch):
    """A verifier (with a tolerance below 1, which reads every prefix's log-probabilities)
    or a lookahead sampler that ran the model on the next state hands the loop that pass with
    its real-token log-probabilities, computed on its own batch of prefixes or candidates:
    exactly what the loop would compute from the logits (so skipping the loop's computation
    changes nothing), and the decode equals one where nothing is handed over."""
    from unmask.decode import _Loop

    m = tiny_transformer
    x = torch.full((3, 12), m.mask_id)
    x[1, ::4] = 2
    handed = []
    step_state = _Loop.step_state

    def spy(self, rows, x, masked, eligible, out, hooks, cols):
        if out.log_probs is not None:
            handed.append(out)
        return step_state(self, rows, x, masked, eligible, out, hooks, cols)

    monkeypatch.setattr(_Loop, "step_state", spy)
    res = decode(m, x, parse_spec(spec).build())
    assert handed
    for out in handed:
        assert torch.equal(out.log_probs, real_log_probs(out.logits, m.real_token_mask))
    monkeypatch.setattr(_Loop, "step_state", lambda self, *a: step_state(
        self, *a[:4], dataclasses.replace(a[4], log_probs=None), *a[5:]))
    plain = decode(m, x, parse_spec(spec).build())
    for field in ("tokens", "steps", "nfe", "sequences", "cumulative_entropy", "reveal_step"):
        assert torch.equal(getattr(res, field), getattr(plain, field)), field
