"""Exact behaviour of the MI-guided selection rule on hand-made entropy / MI inputs."""

import json
from types import SimpleNamespace

import pytest
import torch

from unmask import DecodeConfig, ExactJointMDM, UnmaskError, decode, host_reads, make_sampler
from unmask.host_reads import count_host_reads
from unmask.samplers.mi_guided import mi_budget_select
from unmask.samplers.scan import scan_order_scores


def select(entropy, mi, gamma, lam, eligible=None, scores=None, stop=False, free_head=False,
           free_max=False):
    entropy = torch.tensor([entropy], dtype=torch.float64)
    mi = torch.tensor([mi], dtype=torch.float64)
    eligible = torch.ones_like(entropy, dtype=torch.bool) if eligible is None else \
        torch.tensor([eligible])
    scores = -entropy if scores is None else torch.tensor([scores], dtype=torch.float64)
    return mi_budget_select(entropy, mi, eligible, scores, gamma, lam, stop,
                            free_head, free_max)[0].tolist()


ZERO = [[0.0] * 4 for _ in range(4)]


def test_budget_consumed_in_entropy_order():
    # ascending entropy: 0.05 (pos 2), 0.1 (pos 0), 0.2 (pos 3), 0.4 (pos 1); budget 0.36
    assert select([0.1, 0.4, 0.05, 0.2], ZERO, gamma=0.36, lam=1.0) == [True, False, True, True]
    # budget 0.3: 0.05 + 0.1 = 0.15 taken, 0.2 no longer fits (0.15 left); 0.4 neither
    assert select([0.1, 0.4, 0.05, 0.2], ZERO, gamma=0.3, lam=1.0) == [True, False, True, False]


def test_continue_scanning_vs_stop_at_first_miss():
    # order 0.1, 0.25, 0.05? no: scan order given by scores: pos0, pos1, pos2
    ent, scores = [0.1, 0.25, 0.05, 9.0], [3.0, 2.0, 1.0, 0.0]
    assert select(ent, ZERO, 0.2, 1.0, scores=scores) == [True, False, True, False]
    assert select(ent, ZERO, 0.2, 1.0, scores=scores, stop=True) == [True, False, False, False]


def test_always_at_least_one():
    assert select([0.5, 0.9, 0.7, 0.6], ZERO, gamma=0.1, lam=1.0) == [True, False, False, False]
    assert select([0.5, 0.9, 0.7, 0.6], ZERO, gamma=0.0, lam=1.0,
                  eligible=[False, True, True, False]) == [False, False, True, False]


def test_independent_positions_all_taken_when_lambda_is_zero():
    mi = [[0.0, 5.0, 5.0, 5.0], [5.0, 0.0, 5.0, 5.0], [5.0, 5.0, 0.0, 5.0],
          [5.0, 5.0, 5.0, 0.0]]
    assert select([0.01, 0.02, 0.03, 0.04], mi, gamma=1.0, lam=0.0) == [True] * 4


def test_dependent_pair_is_split():
    # positions 0 and 1 are strongly dependent, 2 and 3 are independent of everything
    mi = [[0.0, 0.6, 0.0, 0.0], [0.6, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0],
          [0.0, 0.0, 0.0, 0.0]]
    got = select([0.01, 0.02, 0.03, 0.04], mi, gamma=0.5, lam=1.0)
    assert got == [True, False, True, True]
    # the same inputs without the MI term take the pair together
    assert select([0.01, 0.02, 0.03, 0.04], mi, gamma=0.5, lam=0.0) == [True] * 4


def test_cost_includes_lambda_times_summed_mi():
    mi = [[0.0, 0.1, 0.1, 0.0], [0.1, 0.0, 0.1, 0.0], [0.1, 0.1, 0.0, 0.0],
          [0.0, 0.0, 0.0, 0.0]]
    # taken 0 (cost 0); 1 costs 0 + 2*0.1 = 0.2; 2 costs 2*(0.1+0.1) = 0.4 > 0.5-0.2
    assert select([0.0, 0.0, 0.0, 1.0], mi, gamma=0.5, lam=2.0) == [True, True, False, False]
    assert select([0.0, 0.0, 0.0, 1.0], mi, gamma=0.6, lam=2.0) == [True, True, True, False]


def test_free_head_is_taken_uncharged_and_riders_pay_their_mi_with_it():
    # scan order pos0 (the head, H=0.5 > gamma), pos1, pos2, pos3
    ent, scores = [0.5, 0.1, 0.15, 0.05], [3.0, 2.0, 1.0, 0.0]
    mi = [[0.0, 0.0, 0.2, 0.0], [0.0, 0.0, 0.0, 0.0], [0.2, 0.0, 0.0, 0.0],
          [0.0, 0.0, 0.0, 0.0]]
    # charged head: 0.5 does not fit 0.3, so the pass goes on without it (0.1 + 0.15 fit)
    assert select(ent, mi, 0.3, 0.0, scores=scores) == [False, True, True, True]
    # free head: taken for nothing; 0.1 fits (0.2 left); pos2 costs 0.15 + 1 * 0.2 > 0.2; 0.05 fits
    assert select(ent, mi, 0.3, 1.0, scores=scores, free_head=True) == [True, True, False, True]
    # at gamma 0 only the head goes: one position per pass, sequential decoding in scan order
    assert select(ent, ZERO, 0.0, 1.0, scores=scores, free_head=True) == [True, False, False, False]
    assert select(ent, ZERO, 0.0, 1.0, scores=scores, free_head=True,
                  eligible=[False, True, True, True]) == [False, True, False, False]


def test_free_max_waives_the_largest_entropy_but_not_its_mi():
    # scan order pos0..pos3; pos1 is uncertain (0.5) and shares 0.1 nats with pos0
    ent, scores = [0.01, 0.5, 0.02, 0.3], [3.0, 2.0, 1.0, 0.0]
    mi = [[0.0, 0.1, 0.0, 0.0], [0.1, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0],
          [0.0, 0.0, 0.0, 0.0]]
    # lam 0 (EB's bound): 0.5 rides free beside 0.01 (charge 0.01); with 0.02 the set costs
    # 0.53 - 0.5 = 0.03; 0.3 would make it 0.83 - 0.5 = 0.33 > 0.05
    assert select(ent, mi, 0.05, 0.0, scores=scores, free_max=True) == [True, True, True, False]
    # lam 1: pos1 would cost 0.01 + 0.1 of MI > 0.05 and waits; 0.02 then costs 0.01, and 0.3
    # becomes the free one: 0.33 - 0.3 = 0.03 <= 0.05
    assert select(ent, mi, 0.05, 1.0, scores=scores, free_max=True) == [True, False, True, True]
    # stopping at the first miss ends the lam-1 pass at pos1
    assert select(ent, mi, 0.05, 1.0, scores=scores, stop=True,
                  free_max=True) == [True, False, False, False]
    with pytest.raises(UnmaskError, match="free_head, free_max"):
        select(ent, mi, 0.05, 1.0, free_head=True, free_max=True)
    with pytest.raises(UnmaskError, match="free_head, free_max"):
        make_sampler("mi-guided", free_head=True, free_max=True)


@pytest.mark.parametrize("order", ["entropy", "confidence"])
@pytest.mark.parametrize("gamma", [0.0, 0.05, 0.3, 1.0])
def test_free_max_at_lambda_zero_is_eb_sampler(order, gamma):
    # EB's prefix with sum - max <= gamma is the rule's free_max form at lam 0 with
    # stop_at_first_miss, row for row, whatever the MI
    gen = torch.Generator().manual_seed(7)
    b, n = 64, 12
    ent = torch.rand(b, n, generator=gen, dtype=torch.float64) ** 3 * 2
    state = SimpleNamespace(entropy=ent, eligible=torch.rand(b, n, generator=gen) < 0.8,
                            x0_prob=torch.rand(b, n, generator=gen, dtype=torch.float64))
    mi = torch.rand(b, n, n, generator=gen, dtype=torch.float64)
    eb = make_sampler("eb", gamma=gamma, order=order).select(state).reveal
    got = mi_budget_select(ent, mi + mi.transpose(1, 2), state.eligible,
                           scan_order_scores(state, order), gamma, 0.0,
                           stop_at_first_miss=True, free_max=True)
    assert torch.equal(got, eb)
    # gamma 0 is one position per pass; above it the comparison covers larger passes
    assert (eb.sum() > b) == (gamma > 0)


def test_batch_rows_independent():
    ent = torch.tensor([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]], dtype=torch.float64)
    mi = torch.zeros(2, 3, 3, dtype=torch.float64)
    el = torch.ones(2, 3, dtype=torch.bool)
    got = mi_budget_select(ent, mi, el, -ent, 0.35, 1.0)
    assert got.tolist() == [[True, True, False], [False, True, True]]


@pytest.mark.parametrize("bad, field", [({"gamma": -1.0}, "gamma"), ({"lam": -0.5}, "lam"),
                                        ({"order": "random"}, "order")])
def test_bad_config(bad, field):
    with pytest.raises(UnmaskError, match=field):
        make_sampler("mi-guided", **bad)


def twin_pair_model():
    """Exact MDM with X0 = X1 (MI log 2) and X2 independent, all uniform; all masked (1, 3)."""
    joint = torch.zeros(2, 2, 2, dtype=torch.float64)
    joint[0, 0, :] = 0.25
    joint[1, 1, :] = 0.25
    m = ExactJointMDM(joint)
    return m, torch.full((1, 3), m.mask_id)


def test_oracle_on_exact_model_never_reveals_a_dependent_pair_together():
    # X0 = X1 exactly (MI log 2), X2 independent: a budget that fits both marginals but not
    # their MI must reveal 0 and 1 in different passes
    m, x = twin_pair_model()
    res = decode(m, x, make_sampler("mi-oracle", gamma=2.0, lam=1.0, eps=0.0),
                 DecodeConfig(record_history=True))
    steps = res.reveal_step[0].tolist()
    assert steps[0] != steps[1]
    assert res.tokens[0, 0] == res.tokens[0, 1]
    # EB with the same budget takes all three at once and can break the pair
    eb = decode(m, x, make_sampler("eb", gamma=2.0))
    assert eb.steps.item() == 1


@pytest.mark.parametrize("free", ["free_head", "free_max"])
def test_oracle_with_a_free_cell_still_splits_the_dependent_pair(free):
    # X0 = X1 exactly, X2 independent, every marginal log 2 = 0.69: the free cell plus one
    # more fit gamma = 0.8, but not the twin of a taken one (its MI is another log 2); with
    # free_max only cells with H <= gamma are probed, which here is all of them
    m, x = twin_pair_model()
    res = decode(m, x, make_sampler("mi-oracle", gamma=0.8, lam=1.0, eps=0.0, **{free: True}),
                 DecodeConfig(record_history=True))
    steps = res.reveal_step[0].tolist()
    assert steps[0] != steps[1] and sorted(steps).count(min(steps)) == 2
    assert res.tokens[0, 0] == res.tokens[0, 1]


def test_oracle_below_every_marginal_free_head_goes_one_by_one_free_max_does_not():
    m, x = twin_pair_model()
    # at gamma 0.5 no marginal fits the budget, yet every pass still takes its head: one
    # position per pass
    seq = decode(m, x, make_sampler("mi-oracle", gamma=0.5, lam=1.0, eps=0.0, free_head=True))
    assert seq.steps.item() == 3
    # free_max: the first pass reveals X0 alone, unprobed (no H <= 0.5); then its twin is
    # certain (probed) and X2 rides free beside it
    res = decode(m, x, make_sampler("mi-oracle", gamma=0.5, lam=1.0, eps=0.0, free_max=True),
                 DecodeConfig(record_history=True))
    assert res.reveal_step[0].tolist() == [0, 1, 1]
    assert res.tokens[0, 0] == res.tokens[0, 1]
    assert res.sequences.item() == 1 + (1 + 2)  # pass 2 probes X1's two values


@pytest.mark.parametrize("verify", [False, True])
def test_an_estimator_given_by_path_reading_a_hidden_layer_works_from_pass_one(
        tiny_transformer, tmp_path, verify):
    """The sampler loads its estimator in ``prepare`` (before the first pass), so the loop
    knows from pass 1 that the estimator reads a hidden layer other than the last."""
    from unmask import Verified
    from unmask.mi.estimator import EstimatorConfig, MIEstimator

    m = tiny_transformer
    torch.manual_seed(0)
    est = MIEstimator(EstimatorConfig(hidden_size=m.hidden_size, layer=1,
                                      model_fingerprint=m.fingerprint()))
    est.save(tmp_path / "est")
    x = torch.full((2, 12), m.mask_id)
    sampler = make_sampler("mi-guided", estimator=str(tmp_path / "est"), gamma=1.0)
    assert not sampler.needs_hidden_layers  # nothing loaded yet
    res = decode(m, x, Verified(sampler) if verify else sampler, seed=0)
    assert not (res.tokens == m.mask_id).any() and sampler.needs_hidden_layers
    # the same decode as with the estimator object itself
    same = decode(m, x, make_sampler("mi-guided", estimator=est, gamma=1.0)
                  if not verify else Verified(make_sampler("mi-guided", estimator=est,
                                                           gamma=1.0)), seed=0)
    assert torch.equal(res.tokens, same.tokens) and torch.equal(res.nfe, same.nfe)


@pytest.mark.parametrize("uncharged", ["none", "free_head", "free_max"])
@pytest.mark.parametrize("stop", [False, True])
@pytest.mark.parametrize("gamma", [0.0, 0.1, 0.5])
def test_mi_off_the_candidates_never_changes_the_set(uncharged, stop, gamma):
    """The rule's set is the same with the MI of every pair as with only the pairs that have
    an end among its candidates (the rest 0): what lets the estimator compute those alone."""
    gen = torch.Generator().manual_seed(11)
    b, n = 256, 10
    own = torch.rand(b, n, generator=gen, dtype=torch.float64) ** 3 * 0.8
    eligible = torch.rand(b, n, generator=gen) < 0.8
    scores = torch.rand(b, n, generator=gen, dtype=torch.float64)
    mi = torch.rand(b, n, n, generator=gen, dtype=torch.float64) * 0.2
    mi = (mi + mi.transpose(1, 2)) * (1 - torch.eye(n, dtype=torch.float64))
    flags = {"free_head": uncharged == "free_head", "free_max": uncharged == "free_max"}
    sampler = make_sampler("mi-guided", gamma=gamma, lam=1.0, stop_at_first_miss=stop, **flags)
    cand = sampler.candidates(own, scores, eligible)
    touch = cand[:, :, None] | cand[:, None, :]
    want = mi_budget_select(own, mi, eligible, scores, gamma, 1.0, stop, **flags)
    got = mi_budget_select(own, mi * touch, eligible, scores, gamma, 1.0, stop, **flags)
    assert torch.equal(got, want)
    assert (cand <= eligible).all()
    # the candidates are a real restriction (most rows leave positions out) ...
    assert (cand.sum(1) < eligible.sum(1)).double().mean() > 0.5
    # ... and a needed one: where a row takes two or more, its MI mattered, and with all MI
    # zeroed off the candidates' complement only would some sets change (checked at one setting)
    if gamma == 0.5 and not stop and uncharged == "none":
        far = mi_budget_select(own, mi * ~touch, eligible, scores, gamma, 1.0, stop, **flags)
        assert not torch.equal(far, want)


def test_mi_cap_bounds_each_pair_by_the_smaller_entropy():
    """mi_cap charges min(I_ij, H_i, H_j): a near-certain position rides along with a
    position the estimator calls strongly dependent on it; without the cap it waits."""
    from unmask.samplers.mi_guided import cap_by_entropy

    ent = torch.tensor([[0.01, 0.02, 0.5]], dtype=torch.float64)
    mi = torch.tensor([[[0.0, 2.0, 0.3], [2.0, 0.0, 0.1], [0.3, 0.1, 0.0]]],
                      dtype=torch.float64)
    capped = cap_by_entropy(mi, ent)
    assert capped[0].tolist() == [[0.0, 0.01, 0.01], [0.01, 0.0, 0.02], [0.01, 0.02, 0.0]]
    state = SimpleNamespace(entropy=ent, eligible=torch.ones(1, 3, dtype=torch.bool),
                            confidence=-ent)
    plain = make_sampler("mi-guided", gamma=0.1, lam=1.0)
    capped_sampler = make_sampler("mi-guided", gamma=0.1, lam=1.0, mi_cap=True)
    for s in (plain, capped_sampler):
        s.mutual_information = lambda state, rows=None: mi
    # scan: pos 0 (0.01), pos 1 (0.02 + 2.0 MI, or + 0.01 capped), pos 2 (0.5 > budget)
    assert plain.select(state).reveal[0].tolist() == [True, False, False]
    assert capped_sampler.select(state).reveal[0].tolist() == [True, True, False]


def _estimator_folder(model, folder, recommended=None):
    from unmask.mi.estimator import EstimatorConfig, MIEstimator

    torch.manual_seed(0)
    MIEstimator(EstimatorConfig(hidden_size=model.hidden_size,
                                model_fingerprint=model.fingerprint())).save(folder)
    if recommended is not None:
        (folder / "recommended.json").write_text(json.dumps(recommended))
    return str(folder)


def test_unset_fields_take_the_estimators_recommended_setting(tiny_transformer, tmp_path):
    m = tiny_transformer
    folder = _estimator_folder(m, tmp_path / "est", {
        "params": {"gamma": 0.7, "free_max": True, "stop_at_first_miss": True,
                   "order": "confidence"}, "chosen_on": "a test"})
    plain = make_sampler("mi-guided", estimator=folder)
    assert (plain.gamma, plain.free_max, plain.order) == (0.3, False, "entropy")  # unprepared
    plain.prepare(m)
    assert (plain.gamma, plain.lam, plain.free_max, plain.stop_at_first_miss, plain.order) == (
        0.7, 1.0, True, True, "confidence")
    plain.prepare(m)  # prepared again (a second decode): still the recommendation
    assert plain.gamma == 0.7 and plain.free_max
    # a spec that sets any of the rule's fields is the rule it names: the others keep the
    # sampler's defaults, recommendation or not
    mine = make_sampler("mi-guided", estimator=folder, gamma=0.2)
    mine.prepare(m)
    assert (mine.gamma, mine.order, mine.free_max, mine.stop_at_first_miss) == (
        0.2, "entropy", False, False)
    # the plain sampler decodes as the recommended setting spelled out
    x = torch.full((3, 12), m.mask_id)
    spelled = ("mi-guided:gamma=0.7,free_max=true,stop_at_first_miss=true,order=confidence,"
               f"estimator={folder}")
    a, b = decode(m, x, f"mi-guided:estimator={folder}"), decode(m, x, spelled)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.nfe, b.nfe)
    # the result says that a recommended setting decoded it, and only then
    assert a.stats["recommended"].tolist() == [1, 1, 1] and "recommended" not in b.stats
    assert plain.recommended == {"gamma": 0.7, "free_max": True, "stop_at_first_miss": True,
                                 "order": "confidence"} and mine.recommended == {}


def test_without_a_recommendation_the_rule_defaults_hold(tiny_transformer, tmp_path):
    from unmask.samplers.mi_guided import RULE_DEFAULTS

    s = make_sampler("mi-guided", estimator=_estimator_folder(tiny_transformer, tmp_path / "e"))
    s.prepare(tiny_transformer)
    assert {k: getattr(s, k) for k in RULE_DEFAULTS} == RULE_DEFAULTS


@pytest.mark.parametrize("text, match", [
    ("{", "recommended setting"), ('{"gamma": 1}', "recommended setting"),
    ('{"params": {"beta": 1}}', "unknown parameter"),
    ('{"params": {"gamma": -1}}', "gamma: must be >= 0"),
    ('{"params": {"free_head": true, "free_max": true}}', "free_head, free_max"),
    ('{"params": {"gamma": "1"}}', r"recommended.json: sampler 'mi-guided': gamma: expected"),
    ('{"params": {"gamma": null}}', r"recommended.json: \['gamma'\]: null is not"),
    ('{"params": {"stop_at_first_miss": "false"}}', "stop_at_first_miss: expected True"),
    ('{"params": {"gamma": 1e999}}', "must be finite"),
    ('{"params": {"lam": 1e308, "gamma": 1e308}}', None),
    ('{"params": {"estimator": "/etc"}}', "unknown parameter")])
def test_a_bad_recommendation_is_refused_by_name(tiny_transformer, tmp_path, text, match):
    folder = _estimator_folder(tiny_transformer, tmp_path / "est")
    (tmp_path / "est" / "recommended.json").write_text(text)
    if match is None:  # finite, however large: accepted
        make_sampler("mi-guided", estimator=folder).prepare(tiny_transformer)
        return
    with pytest.raises(UnmaskError, match=match):
        make_sampler("mi-guided", estimator=folder).prepare(tiny_transformer)


@pytest.mark.parametrize("name", ["sudoku_mi_estimator", "antiberty_mi_estimator"])
def test_the_shipped_estimators_recommend_a_valid_setting(name):
    from unmask.pretrained import pretrained_path
    from unmask.samplers.mi_guided import RULE_DEFAULTS, read_recommended

    params = read_recommended(pretrained_path(name))
    assert params and set(params) <= set(RULE_DEFAULTS)
    make_sampler("mi-guided", **params)  # typed and checked as a spec's parameters are


@pytest.mark.parametrize("sized", [False, True], ids=["accelerator", "cpu"])
@pytest.mark.parametrize("stop", [False, True])
def test_a_pass_reads_nothing_back_off_the_cpu(tiny_transformer, tmp_path, monkeypatch, stop,
                                               sized):
    """Selecting a pass (estimator and rule) reads no tensor value back to the host where a
    read would stall a device's queue (here: the scan's sizing switched off, as on an
    accelerator); on the CPU the scan runs on the host and reads its inputs there (views of
    their memory)."""
    if not sized:
        monkeypatch.setattr(host_reads, "HOST_LOOP_DEVICES", frozenset())
    m = tiny_transformer
    sampler = make_sampler("mi-guided", estimator=_estimator_folder(m, tmp_path / "e"),
                           gamma=0.5, stop_at_first_miss=stop, mi_cap=True)
    reads, select = [0], sampler.select

    def counting(state):
        with count_host_reads() as counted:
            chosen = select(state)
        reads[0] += counted.total
        return chosen

    sampler.select = counting
    res = decode(m, torch.full((4, 12), m.mask_id), sampler)
    assert (res.tokens != m.mask_id).all()
    if sized and not stop:  # its inputs, every pass
        assert reads[0] >= int(res.steps.max())
    else:
        assert reads[0] == 0
