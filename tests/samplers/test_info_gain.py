"""Info-Gain and LookUM on the exact toy MDM: objectives by hand, bypass, de-duplication."""

import pytest
import torch

from unmask import DecodeConfig, ExactJointMDM, UnmaskError, decode, make_sampler
from unmask.samplers.info_gain import InfoGainSampler
from unmask.samplers.lookum import LookUMSampler


def recording(cls):
    """A subclass of ``cls`` that keeps (state, LookaheadStep) of every step."""

    class Recording(cls):
        def begin(self, batch_size, seq_len):
            super().begin(batch_size, seq_len)
            self.record = []

        def score(self, state):
            step = super().score(state)
            self.record.append((state, step))
            return step

    return Recording


def entropy(p):
    return float(torch.special.entr(p).sum())


def hbar(model, x, remaining="mean"):
    """Mean (or sum) over masked positions of the exact conditional entropies of state x (N,)."""
    p = model.conditionals(x[None])[0]
    masked = (x == model.mask_id).nonzero().flatten().tolist()
    if not masked:
        return 0.0
    total = sum(entropy(p[i]) for i in masked)
    return total if remaining == "sum" else total / len(masked)


def hand_objective(model, x, action, cost_weight=1.0, remaining="mean"):
    """J of revealing action {position: token} in state x (N,), from the joint table."""
    p = model.conditionals(x[None])[0]
    cost = sum(entropy(p[i]) for i in action)
    y = x.clone()
    for i, v in action.items():
        y[i] = v
    return hbar(model, x, remaining) - hbar(model, y, remaining) - cost_weight * cost


def first_states(toy):
    full = torch.full((1, 5), toy.mask_id)
    part = full.clone()
    part[0, 1] = int(toy.conditionals(full)[0, 1].argmax())
    return torch.cat([full, part])


@pytest.mark.parametrize("cls,weight", [(InfoGainSampler, 1.0), (LookUMSampler, 0.0)])
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("remaining", ["mean", "sum"])
def test_objective_of_every_candidate_matches_hand_computation(toy, cls, weight, k, remaining):
    s = recording(cls)(k=k, n_candidates=8, tau_pos=0.5, tau_tok=1.0, remaining=remaining)
    x = first_states(toy)
    decode(toy, x, s, DecodeConfig(temperature=0.5), seed=3)
    checked = 0
    for state, step in s.record:
        cands = step.candidates
        for r in range(state.tokens.shape[0]):
            z = state.tokens[r]
            best = -float("inf")
            for c in range(cands.valid.shape[1]):
                if not cands.valid[r, c]:
                    assert step.objective[r, c] == -float("inf")
                    continue
                pos = cands.reveal[r, c].nonzero().flatten().tolist()
                # the next state is z with exactly the action written
                assert len(pos) == min(k, int(state.eligible[r].sum()))
                keep = ~cands.reveal[r, c]
                assert torch.equal(cands.tokens[r, c][keep], z[keep])
                action = {i: int(cands.tokens[r, c, i]) for i in pos}
                j = hand_objective(toy, z, action, weight, remaining)
                assert step.objective[r, c].item() == pytest.approx(j, abs=1e-9)
                best = max(best, j)
                checked += 1
            assert step.objective[r, step.winner[r]].item() == pytest.approx(best, abs=1e-9)
    assert checked > 10


def test_lookum_and_info_gain_differ_by_the_cost(toy):
    x = first_states(toy)
    ig, lu = recording(InfoGainSampler)(tau_pos=1.0), recording(LookUMSampler)(tau_pos=1.0)
    decode(toy, x, ig, seed=0)
    decode(toy, x, lu, seed=0)
    (_, a), (_, b) = ig.record[0], lu.record[0]
    assert torch.equal(a.candidates.tokens, b.candidates.tokens)
    valid = a.candidates.valid
    assert torch.allclose(b.objective[valid] - a.objective[valid], a.candidates.cost[valid])


def test_duplicate_candidates_are_dropped(toy):
    # N=5 positions and greedy tokens: at most 5 distinct single-token actions among 32
    s = recording(InfoGainSampler)(n_candidates=32, tau_pos=100.0)
    x = torch.full((3, 5), toy.mask_id)
    res = decode(toy, x, s, seed=0)
    state, step = s.record[0]
    nxt = step.candidates.tokens
    for r in range(3):
        rows = [tuple(t.tolist()) for t in nxt[r]]
        distinct = set(rows)
        assert 1 < len(distinct) <= 5
        assert int(step.candidates.valid[r].sum()) == len(distinct)
        # the kept ones are the first occurrence of each distinct next state
        firsts = sorted(rows.index(d) for d in distinct)
        assert step.candidates.valid[r].nonzero().flatten().tolist() == firsts
    # sequences evaluated: the first loop call plus every distinct non-final candidate
    assert (res.sequences > res.nfe).all()


def test_one_candidate_is_sequential_confidence_decoding(toy):
    x = torch.full((4, 5), toy.mask_id)
    x[1, 2] = 0
    x[2, [0, 4]] = torch.tensor([1, 2])
    greedy = decode(toy, x, "confidence")
    ig = decode(toy, x, make_sampler("info-gain", tau_pos=0.0, tau_tok=0.0))
    assert torch.equal(ig.tokens, greedy.tokens)
    assert torch.equal(ig.reveal_step, greedy.reveal_step)
    # the winner's lookahead output is reused: one model call per step, none after the last
    assert torch.equal(ig.nfe, greedy.nfe) and torch.equal(ig.nfe, ig.steps)
    assert torch.equal(ig.sequences, ig.nfe)
    assert torch.allclose(ig.cumulative_entropy, greedy.cumulative_entropy)


def test_model_calls_stay_one_per_step_and_cumulative_entropy_is_the_cost(toy):
    s = recording(InfoGainSampler)(k=2, tau_pos=0.3)
    x = torch.full((2, 5), toy.mask_id)
    res = decode(toy, x, s, seed=5)
    assert torch.equal(res.nfe, res.steps)  # steps = 3 (2 + 2 + 1), calls = 3
    assert res.steps.tolist() == [3, 3]
    cost = torch.zeros(2, dtype=torch.float64)
    for state, step in s.record:
        cost[state.row_ids] += step.candidates.cost.gather(1, step.winner[:, None]).squeeze(1)
    assert torch.allclose(res.cumulative_entropy, cost)


def test_bypass_fires_exactly_when_a_position_clears_gamma():
    m = ExactJointMDM(n=5, v=3, seed=2, concentration=0.3)
    x = torch.full((6, 5), m.mask_id)
    g = torch.Generator().manual_seed(0)
    for r in range(1, 6):  # condition some rows on a likely token so confidence varies
        i = int(torch.randint(0, 5, (1,), generator=g))
        x[r, i] = int(m.conditionals(x[r:r + 1])[0, i].argmax())
    conf = m.conditionals(x).max(-1).values.masked_fill(x != m.mask_id, -1)
    gamma = float(conf.max(1).values.median())
    s = recording(InfoGainSampler)(bypass=gamma, tau_pos=1.0)
    decode(m, x, s, seed=0)
    fired = held = 0
    for state, step in s.record:
        sure = (state.x0_prob >= gamma) & state.eligible
        assert torch.equal(step.bypass, sure.any(1))
        rows = step.bypass
        # a bypassing row reveals exactly its confident positions, with no other candidate
        assert torch.equal(step.candidates.reveal[rows, 0], sure[rows])
        assert not step.candidates.valid[rows, 1:].any()
        assert (step.winner[rows] == 0).all()
        fired += int(rows.sum())
        held += int((~rows).sum())
    assert fired > 0 and held > 0


def test_bypass_off_by_default_and_validation():
    assert make_sampler("info-gain").bypass is None
    for bad in ({"n_candidates": 0}, {"tau_pos": -1.0}, {"tau_tok": -0.1}, {"bypass": 1.5},
                {"remaining": "max"}, {"k": 0}):
        with pytest.raises(UnmaskError, match=next(iter(bad))):
            make_sampler("info-gain", **bad)


def test_semi_autoregressive_blocks_measure_the_whole_sequence():
    # the objective's Hbar covers masked positions outside the current block as well
    s = recording(InfoGainSampler)(tau_pos=1.0)
    m = ExactJointMDM(n=4, v=3, seed=5, concentration=0.3)
    x = torch.full((1, 4), m.mask_id)
    decode(m, x, s, DecodeConfig(block_size=2), seed=1)
    state, step = s.record[0]
    assert not state.eligible[0, 2:].any()
    for c in step.candidates.valid[0].nonzero().flatten().tolist():
        pos = step.candidates.reveal[0, c].nonzero().flatten().tolist()
        action = {i: int(step.candidates.tokens[0, c, i]) for i in pos}
        assert pos[0] < 2
        j = hand_objective(m, state.tokens[0], action)
        assert step.objective[0, c].item() == pytest.approx(j, abs=1e-9)


def test_keep_one_evaluates_the_greedy_candidate_only():
    model = ExactJointMDM(n=6, v=3, seed=2, concentration=0.3)
    x = torch.full((3, 6), model.mask_id)
    cfg = DecodeConfig(temperature=0.8)
    seq = decode(model, x, "confidence", cfg, seed=5)
    one = decode(model, x, make_sampler("info-gain", keep=1), cfg, seed=5)
    assert torch.equal(one.tokens, seq.tokens) and torch.equal(one.nfe, seq.nfe)
    # the greedy candidate's state is the next pass: one sequence per pass, as sequential's
    assert torch.equal(one.sequences, seq.sequences)
    sure = decode(model, x, make_sampler("info-gain", prune=1e9), cfg, seed=5)
    assert torch.equal(sure.tokens, one.tokens) and torch.equal(sure.sequences, one.sequences)


@pytest.mark.parametrize("keep", [2, 3])
def test_keep_bounds_sequences_per_pass(keep):
    model = ExactJointMDM(n=6, v=3, seed=1, concentration=0.3)
    x = torch.full((4, 6), model.mask_id)
    sampler = recording(InfoGainSampler)(keep=keep, n_candidates=8, tau_tok=1.0)
    res = decode(model, x, sampler, seed=0)
    assert (res.sequences <= keep * res.nfe).all()
    full = recording(InfoGainSampler)(n_candidates=8, tau_tok=1.0)
    assert decode(model, x, full, seed=0).sequences.sum() > res.sequences.sum()
    for _state, step in sampler.record:
        kept = step.candidates.valid
        assert (kept.sum(1) <= keep).all() and kept[:, 0].all()
        # the kept alternatives are the cheapest by C(a) among the distinct ones
        nxt = step.candidates.tokens
        for r in range(kept.shape[0]):
            distinct = torch.tensor([not any(torch.equal(nxt[r, c], nxt[r, d]) for d in range(c))
                                     for c in range(nxt.shape[1])])
            others = step.candidates.cost[r, 1:][kept[r, 1:]]
            dropped = step.candidates.cost[r, 1:][distinct[1:] & ~kept[r, 1:]]
            if others.numel() and dropped.numel():
                assert others.max() <= dropped.min() + 1e-12


def test_prune_and_keep_are_checked():
    with pytest.raises(UnmaskError, match="prune: must be None or a number >= 0"):
        make_sampler("info-gain", prune=-1.0)
    with pytest.raises(UnmaskError, match="keep: must be None or an integer >= 1"):
        make_sampler("info-gain", keep=0)


def test_block_bypass_fills_the_block_only_when_every_position_is_sure():
    m = ExactJointMDM(n=5, v=3, seed=2, concentration=0.3)
    x = torch.full((6, 5), m.mask_id)
    x[1:, 0] = m.conditionals(x[1:])[:, 0].argmax(-1)
    s = recording(InfoGainSampler)(bypass=0.5, bypass_rule="block", tau_pos=1.0)
    res = decode(m, x, s, seed=0)
    fired = held = 0
    for state, step in s.record:
        top = state.probs.amax(-1)
        every = ((top >= 0.5) | ~state.eligible).all(1)
        assert torch.equal(step.bypass, every)
        rows = step.bypass
        assert torch.equal(step.candidates.reveal[rows, 0], state.eligible[rows])
        assert not step.candidates.valid[rows, 1:].any()
        fired, held = fired + int(rows.sum()), held + int((~rows).sum())
    assert fired > 0 and held > 0
    assert int(res.stats["bypassed"].sum()) == fired


def test_stats_count_bypasses_candidates_and_lookahead_sequences():
    m = ExactJointMDM(n=6, v=3, seed=1, concentration=0.3)
    x = torch.full((4, 6), m.mask_id)
    s = recording(InfoGainSampler)(n_candidates=8, tau_tok=1.0, bypass=0.9)
    res = decode(m, x, s, seed=0)
    scored = torch.zeros(4, dtype=torch.long)
    for state, step in s.record:
        scored[state.row_ids] += step.candidates.valid.sum(1).masked_fill(step.bypass, 0)
    assert torch.equal(res.stats["candidates"], scored)
    # the loop's first pass plus what the lookahead evaluated: every later pass is reused
    assert torch.equal(res.sequences, 1 + res.stats["lookahead"])
    assert (res.stats["bypassed"] <= res.steps).all()


def test_positions_dedupe_keeps_one_candidate_per_position_set(toy):
    s = recording(InfoGainSampler)(n_candidates=16, tau_tok=2.0, tau_pos=100.0,
                                   dedupe="positions")
    decode(toy, torch.full((3, 5), toy.mask_id), s, seed=0)
    for _state, step in s.record:
        r = step.candidates.reveal
        for row in range(r.shape[0]):
            kept = [tuple(r[row, c].tolist()) for c in range(r.shape[1])
                    if step.candidates.valid[row, c]]
            assert len(kept) == len(set(kept))
            assert len(kept) == len({tuple(r[row, c].tolist()) for c in range(r.shape[1])})


def test_gumbel_draws_follow_the_tempered_distribution():
    m = ExactJointMDM(n=3, v=3, seed=4, concentration=1.0)
    x = torch.full((4000, 3), m.mask_id)
    s = recording(InfoGainSampler)(n_candidates=2, tau_tok=0.7, draw="gumbel", tau_pos=0.0)
    s.begin(len(x), 3)
    from unmask.decode import _Loop

    loop = _Loop(m, x, DecodeConfig(temperature=0.7), 0)
    rows = torch.arange(len(x))
    xx, masked, eligible = loop.enter_blocks(rows)
    state = loop.step_state(rows, xx, masked, eligible, loop.forward(xx, rows, False,
                                                                     slice(0, 3)), (),
                            slice(0, 3))
    drawn = s._draw_tokens(state, 0.7, 1)[:, 0, 0]  # (B,) tokens at position 0
    p = torch.softmax(state.log_probs[0, 0].double() / 0.7, -1)
    freq = torch.bincount(drawn, minlength=p.numel()).double() / len(x)
    assert torch.allclose(freq[:3], p[:3], atol=0.03)


def test_new_options_are_checked():
    for bad in ({"bypass_rule": "all"}, {"dedupe": "tokens"}, {"draw": "inverse"}):
        with pytest.raises(UnmaskError, match=next(iter(bad))):
            make_sampler("info-gain", **bad)
