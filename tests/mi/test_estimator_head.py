"""The estimator head: shape guarantees, one forward pass, persistence tied to one MDM."""

import pytest
import torch

import unmask.mi.estimator as estimator_module
from unmask import UnmaskError
from unmask.mi.estimator import EstimatorConfig, MIEstimator, estimate_mi
from unmask.models import MDMTransformer, TransformerConfig


def make_estimator(model, **kw):
    torch.manual_seed(0)
    cfg = EstimatorConfig(hidden_size=model.hidden_size, d=16, n_heads=2, pair_hidden=4,
                          pair_rank=4, model_fingerprint=model.fingerprint(), **kw)
    return MIEstimator(cfg).eval()


def perturb(est):
    """Random weights everywhere, so properties do not hold merely by initialisation."""
    with torch.no_grad():
        for p in est.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    return est


@pytest.mark.parametrize("activation,prior", [("relu", 0), ("gelu", 0), ("relu", 9)])
def test_output_is_symmetric_non_negative_with_zero_diagonal(activation, prior):
    torch.manual_seed(1)
    est = perturb(MIEstimator(EstimatorConfig(hidden_size=12, d=8, n_heads=2, pair_hidden=3,
                                              pair_rank=5, activation=activation,
                                              pair_prior_length=prior)))
    h = torch.randn(4, 7, 12) * 3
    mi = est(h)
    assert mi.shape == (4, 7, 7)
    assert torch.equal(mi, mi.transpose(1, 2))
    assert (mi >= 0).all()
    assert (mi.diagonal(dim1=1, dim2=2) == 0).all()
    assert (mi + torch.eye(7) * 1.0).gt(0).all()  # softplus: strictly positive off-diagonal
    masked = torch.rand(4, 7) < 0.5
    mm = est(h, masked)
    both = masked[:, :, None] & masked[:, None, :]
    assert torch.equal(mm[both], mi[both])
    assert (mm[~both] == 0).all()


def test_pairs_match_the_hadamard_mlp_written_out():
    """z_u(i, j) = q_i^u . k_j^u + b_u -> act -> weighted sum -> softplus, symmetrised."""
    torch.manual_seed(2)
    est = perturb(MIEstimator(EstimatorConfig(hidden_size=6, d=4, n_heads=2, mixer_layers=0,
                                              pair_hidden=3, pair_rank=2)))
    h = torch.randn(2, 5, 6)
    a = est.norm(torch.nn.functional.gelu(est.adapter(h)))
    q = est.query(a).view(2, 5, 3, 2)
    k = est.key(a).view(2, 5, 3, 2)
    z = torch.einsum("biur,bjur->biju", q, k) + est.pair_bias
    raw = torch.nn.functional.softplus(torch.relu(z) @ est.out.weight[0] + est.out.bias)
    want = (raw + raw.transpose(1, 2)) / 2 * (1 - torch.eye(5))
    assert torch.allclose(est(h), want, atol=1e-6)


def test_two_hop_units_add_their_legs_over_masked_positions_written_out():
    """y_h(i, j) = sum_{k masked} relu(z_h(i, k)) relu(z_h(k, j)) / N for the first H units,
    weighted by the output layer's extra columns before the softplus."""
    torch.manual_seed(3)
    est = perturb(MIEstimator(EstimatorConfig(hidden_size=6, d=4, n_heads=2, mixer_layers=0,
                                              pair_hidden=3, pair_rank=2, two_hop=2)))
    b, n = 2, 5
    h = torch.randn(b, n, 6)
    masked = torch.tensor([[True, True, False, True, True], [True, False, True, True, False]])
    a = est.norm(torch.nn.functional.gelu(est.adapter(h)))
    q = est.query(a).view(b, n, 3, 2)
    k = est.key(a).view(b, n, 3, 2)
    z = torch.relu(torch.einsum("biur,bjur->biju", q, k) + est.pair_bias)  # (B, N, N, U)
    w = est.out.weight[0]
    logit = z @ w[:3] + est.out.bias
    for r in range(b):
        for i in range(n):
            for j in range(n):
                for u in range(2):
                    legs = sum(z[r, i, kk, u] * z[r, kk, j, u] for kk in range(n)
                               if masked[r, kk])
                    logit[r, i, j] += w[3 + u] * legs / n
    raw = torch.nn.functional.softplus(logit)
    both = masked[:, :, None] & masked[:, None, :] & ~torch.eye(n, dtype=torch.bool)
    want = (raw + raw.transpose(1, 2)) / 2 * both
    assert torch.allclose(est(h, masked), want, atol=1e-5)


def test_two_hop_is_bounded_by_the_pair_units():
    with pytest.raises(UnmaskError, match="two_hop"):
        EstimatorConfig(hidden_size=4, pair_hidden=3, two_hop=4)


def test_pair_prior_adds_a_symmetric_table_to_the_logit():
    torch.manual_seed(4)
    cfg = dict(hidden_size=6, d=4, n_heads=2, pair_hidden=2, pair_rank=2)
    plain = perturb(MIEstimator(EstimatorConfig(**cfg)))
    prior = MIEstimator(EstimatorConfig(**cfg, pair_prior_length=6))
    prior.load_state_dict({**plain.state_dict(), "pair_prior": torch.zeros(6, 6)})
    h = torch.randn(2, 5, 6)
    assert torch.equal(prior(h), plain(h))  # a zero table changes nothing
    with torch.no_grad():
        prior.pair_prior[0, 1] = 100.0  # +50 on both directed logits of the pair (0, 1)
        high = prior(h)
        prior.pair_prior[0, 1] = 80.0  # +40: softplus is linear up there
        low = prior(h)
    assert torch.allclose(high[:, 0, 1] - low[:, 0, 1], torch.full((2,), 10.0), atol=1e-4)
    assert torch.equal(high[:, 1, 0], high[:, 0, 1])
    assert torch.equal(high[:, 2:, 2:], plain(h)[:, 2:, 2:])
    with pytest.raises(UnmaskError, match="pair prior"):
        prior(torch.randn(1, 7, 6))


def test_bad_hidden_shape_names_the_field():
    est = MIEstimator(EstimatorConfig(hidden_size=8, d=8, n_heads=2))
    with pytest.raises(UnmaskError, match="hidden"):
        est(torch.randn(2, 5, 7))
    with pytest.raises(UnmaskError, match="masked"):
        est(torch.randn(2, 5, 8), torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(UnmaskError, match="d: "):
        EstimatorConfig(hidden_size=8, d=6, n_heads=4)


class CountingModel(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.inner, self.calls = model, 0

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.inner, name)

    def forward(self, tokens, output_hidden_layers=False):
        self.calls += 1
        return self.inner(tokens, output_hidden_layers)


def test_estimate_mi_is_one_forward_pass_and_zero_off_masked_pairs(tiny_transformer):
    est = perturb(make_estimator(tiny_transformer))
    torch.manual_seed(3)
    tokens = torch.randint(0, 5, (3, 12))
    tokens[torch.rand(3, 12) < 0.5] = tiny_transformer.mask_id
    counting = CountingModel(tiny_transformer)
    counting.fingerprint = tiny_transformer.fingerprint
    counting.check_tokens = tiny_transformer.check_tokens
    mi = estimate_mi(counting, est, tokens)
    assert counting.calls == 1
    masked = tokens == tiny_transformer.mask_id
    with torch.no_grad():
        want = est(tiny_transformer(tokens).hidden, masked)
    assert torch.allclose(mi, want)
    assert (mi[~(masked[:, :, None] & masked[:, None, :])] == 0).all()
    # a caller holding the forward output (a decoder) pays no extra pass
    out = tiny_transformer(tokens)
    estimate_mi(counting, est, tokens, output=out)
    assert counting.calls == 1


def test_layer_index_reads_that_hidden_layer(tiny_transformer):
    est = perturb(make_estimator(tiny_transformer, layer=1))
    tokens = torch.full((2, 12), tiny_transformer.mask_id)
    tokens[0, :4] = torch.tensor([0, 1, 2, 3])
    with torch.no_grad():
        layers = tiny_transformer(tokens, output_hidden_layers=True).hidden_layers
        want = est(layers[1], tokens == tiny_transformer.mask_id)
    assert torch.allclose(estimate_mi(tiny_transformer, est, tokens), want)
    assert not torch.allclose(want, est(layers[2], tokens == tiny_transformer.mask_id))
    far = make_estimator(tiny_transformer, layer=7)
    with pytest.raises(UnmaskError, match="layer: 7"):
        estimate_mi(tiny_transformer, far, tokens)


def test_extra_layers_concatenate_after_the_selected_states(tiny_transformer, tmp_path):
    est = perturb(make_estimator(tiny_transformer, extra_layers=[1, 2]))
    d = tiny_transformer.hidden_size
    assert est.config.extra_layers == (1, 2) and est.config.feature_size == 3 * d
    tokens = torch.full((2, 12), tiny_transformer.mask_id)
    tokens[0, :4] = torch.tensor([0, 1, 2, 3])
    with torch.no_grad():
        out = tiny_transformer(tokens, output_hidden_layers=True)
        feats = est.features(out, tiny_transformer)
        want = est(torch.cat([out.hidden, out.hidden_layers[1], out.hidden_layers[2]], -1),
                   tokens == tiny_transformer.mask_id)
    assert feats.shape == (2, 12, 3 * d)
    assert torch.equal(feats[..., d:2 * d], out.hidden_layers[1])
    assert torch.allclose(estimate_mi(tiny_transformer, est, tokens), want)
    est.save(tmp_path / "est")
    back = MIEstimator.load(tmp_path / "est", model=tiny_transformer)
    assert back.config == est.config and back.config.extra_layers == (1, 2)
    with pytest.raises(UnmaskError, match="extra_layers"):
        make_estimator(tiny_transformer, extra_layers=[1.5])


def test_save_load_round_trip(tiny_transformer, tmp_path):
    est = perturb(make_estimator(tiny_transformer, layer=-1))
    est.save(tmp_path / "est", extra={"note": "kept"})
    back = MIEstimator.load(tmp_path / "est", model=tiny_transformer)
    assert back.config == est.config
    assert back.metadata["note"] == "kept"
    h = torch.randn(2, 12, tiny_transformer.hidden_size)
    assert torch.equal(back(h), est(h))
    # the head's own fingerprint survives the round trip and follows its weights alone
    assert back.fingerprint() == est.fingerprint() != tiny_transformer.fingerprint()
    with torch.no_grad():
        next(back.parameters()).view(-1)[0] += 1e-3
    assert back.fingerprint() != est.fingerprint()
    assert sorted(p.name for p in (tmp_path / "est").iterdir()) == ["config.json",
                                                                     "estimator.safetensors"]


def test_another_model_is_refused(tiny_transformer, tmp_path):
    est = make_estimator(tiny_transformer)
    est.save(tmp_path / "est")
    torch.manual_seed(99)
    other = MDMTransformer(tiny_transformer.config).eval()
    with pytest.raises(UnmaskError, match="fingerprint"):
        MIEstimator.load(tmp_path / "est", model=other)
    with pytest.raises(UnmaskError, match="fingerprint"):
        estimate_mi(other, est, torch.full((1, 12), other.mask_id))
    # the check follows in-place weight changes of the same model object
    estimate_mi(tiny_transformer, est, torch.full((1, 12), tiny_transformer.mask_id))
    with torch.no_grad():
        tiny_transformer.head.bias.add_(1.0)
    try:
        with pytest.raises(UnmaskError, match="fingerprint"):
            estimate_mi(tiny_transformer, est, torch.full((1, 12), tiny_transformer.mask_id))
    finally:
        with torch.no_grad():
            tiny_transformer.head.bias.sub_(1.0)
    wide = MDMTransformer(TransformerConfig(vocab_size=6, mask_id=5, max_length=12, d_model=8,
                                            n_layers=1, n_heads=2, d_ff=16))
    with pytest.raises(UnmaskError, match="hidden size"):
        estimate_mi(wide, est, torch.full((1, 12), 5))


def test_load_rejects_other_folders(tmp_path, tiny_transformer):
    with pytest.raises(UnmaskError, match="estimator"):
        MIEstimator.load(tmp_path)
    tiny_transformer.save_pretrained(tmp_path / "m")
    (tmp_path / "m" / "estimator.safetensors").write_bytes(b"")
    with pytest.raises(UnmaskError, match="not an mi-estimator"):
        MIEstimator.load(tmp_path / "m")


def test_entropy_gate_bounds_each_pair_by_its_smaller_marginal_entropy():
    """M_ij = sigmoid(logit_ij) * min(H_i, H_j): never above either cell's entropy, zero for a
    cell that is certain."""
    torch.manual_seed(3)
    k = 4
    gated = perturb(MIEstimator(EstimatorConfig(hidden_size=6, d=8, n_heads=2, pair_hidden=3,
                                                pair_rank=2, marginal_size=k,
                                                entropy_gate=True)))
    hidden = torch.randn(3, 7, 6) * 3
    probs = torch.softmax(torch.randn(3, 7, k) * 2, -1)
    probs[0, 2] = torch.tensor([1.0, 0, 0, 0])  # a certain cell
    ent = torch.special.entr(probs).sum(-1)
    feats = torch.cat([hidden, probs, ent[..., None]], -1)
    mi = gated(feats)
    bound = torch.minimum(ent[:, :, None], ent[:, None, :]) * (1 - torch.eye(7))
    assert (mi <= bound + 1e-7).all() and (mi >= 0).all()
    assert (mi[0, 2] == 0).all() and (mi[0, :, 2] == 0).all()
    assert torch.equal(mi, mi.transpose(1, 2))
    # written out: the same unit logits as the ungated head, through sigmoid * bound
    z = gated.pair_units(feats)  # (B, U, N, N)
    logit = torch.einsum("buij,u->bij", z, gated.out.weight[0]) + gated.out.bias
    raw = torch.sigmoid(logit) * torch.minimum(ent[:, :, None], ent[:, None, :])
    assert torch.allclose(mi, (raw + raw.transpose(1, 2)) / 2 * (1 - torch.eye(7)), atol=1e-6)


def test_entropy_gate_needs_the_marginals():
    with pytest.raises(UnmaskError, match="entropy_gate"):
        EstimatorConfig(hidden_size=4, entropy_gate=True)


@pytest.mark.parametrize("kw", [{}, {"pair_prior_length": 9}, {"activation": "gelu"},
                                {"marginal_size": 4, "entropy_gate": True},
                                {"two_hop": 2}])
@pytest.mark.parametrize("small", [True, False])
def test_rows_gives_the_pairs_touching_them_and_zero_elsewhere(kw, small, monkeypatch):
    """forward(..., rows=R) equals the full matrix on every pair with an end in R (computed
    from those rows alone on large inputs unless two-hop units need every pair; from every
    pair on small ones, ``small``) and is 0 on the others."""
    if not small:  # every input counts as large: the rows' own pairs are computed
        monkeypatch.setattr(estimator_module, "ALL_PAIRS_ELEMENTS", 0)
    torch.manual_seed(4)
    est = perturb(MIEstimator(EstimatorConfig(hidden_size=6, d=8, n_heads=2, pair_hidden=3,
                                              pair_rank=2, **kw)))
    feats = torch.randn(5, 9, est.config.feature_size) * 2
    if kw.get("entropy_gate"):
        feats[..., -1] = feats[..., -1].abs()
    masked = torch.rand(5, 9) < 0.7
    rows = (torch.rand(5, 9) < 0.25) & masked
    rows[0] = False  # a row asking for nothing
    full = est(feats, masked)
    part = est(feats, masked, rows=rows)
    touch = rows[:, :, None] | rows[:, None, :]
    assert torch.allclose(part[touch], full[touch], atol=1e-6)
    assert (part[~touch] == 0).all()
    assert torch.equal(part, part.transpose(1, 2))
    every = est(feats, masked, rows=torch.ones(5, 9, dtype=torch.bool))
    assert torch.equal(every, full)
    with pytest.raises(UnmaskError, match="rows"):
        est(feats, masked, rows=rows[:, :4])
