"""Perturbation-probing MI against the analytic MI of the exact toy MDM, and its pruning bound."""

import math

import pytest
import torch

from unmask import ExactJointMDM, UnmaskError
from unmask.mi import floor_sequences, naive_sequences, perturbation_mi
from unmask.models.handle import ModelHandle


def random_contexts(model: ExactJointMDM, b: int, seed: int, p_mask: float = 0.6):
    """(b, N) contexts: full states drawn from the joint, cells masked with prob p_mask; row 0
    fully masked, so revealed tokens always have positive probability."""
    g = torch.Generator().manual_seed(seed)
    states = model.states[torch.multinomial(model.probs, b, replacement=True, generator=g)]
    mask = torch.rand(b, model.n, generator=g) < p_mask
    x = torch.where(mask, model.mask_id, states)
    x[0] = model.mask_id
    return x


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_unpruned_probing_equals_analytic_mi(seed):
    model = ExactJointMDM(n=5, v=3, seed=seed, concentration=0.3)
    x = random_contexts(model, 12, seed)
    ref = model.conditional_mi(x)
    res = perturbation_mi(model, x, batch_size=5)
    assert (res.mi - ref).abs().max() < 1e-6
    # the exact model's conditionals form one joint, so the raw directed MI is symmetric too
    assert (res.directed - ref).abs().max() < 1e-6
    assert res.mi.diagonal(dim1=1, dim2=2).abs().max() == 0
    assert float(res.error_bound.max()) < 1e-12
    # entropies are the exact marginal entropies of masked positions
    p = model.conditionals(x)
    h = torch.special.entr(p).sum(-1).masked_fill(x != model.mask_id, 0.0)
    assert torch.allclose(res.entropy, h, atol=1e-12)


def test_counts_and_chunking(toy):
    x = random_contexts(toy, 9, 3)
    x[4] = toy.states[7]  # nothing masked: costs nothing
    masked = x == toy.mask_id
    ref = perturbation_mi(toy, x, batch_size=10_000)
    res = perturbation_mi(toy, x, batch_size=4)
    assert torch.allclose(res.mi, ref.mi, atol=1e-12)
    # every joint entry of a Dirichlet draw is positive, so eps=0 probes all |M||V| tokens
    expected = torch.where(masked.any(1), 1 + masked.sum(1) * 3, 0)
    assert res.row_sequences.tolist() == expected.tolist()
    assert res.sequences == int(expected.sum())
    assert naive_sequences(x, toy.mask_id, 3).tolist() == expected.tolist()
    active = int(masked.any(1).sum())
    probes = int(masked.sum()) * 3
    assert res.model_calls == math.ceil(active / 4) + math.ceil(probes / 4)
    assert ref.model_calls == 2


def test_model_handle_is_charged_per_original_row(toy):
    x = random_contexts(toy, 3, 5)
    handle = ModelHandle(toy, 10, x.device)
    rows = torch.tensor([7, 2, 5])
    res = perturbation_mi(handle, x, row_ids=rows, batch_size=4)
    assert handle.sequences[rows].tolist() == res.row_sequences.tolist()
    assert int(handle.sequences.sum()) == res.sequences
    others = torch.ones(10, dtype=torch.bool)
    others[rows] = False
    assert int(handle.calls[others].sum()) == 0 and int(handle.calls[rows].min()) >= 1


@pytest.mark.parametrize("renormalize", [True, False])
@pytest.mark.parametrize("eps", [0.05, 0.1, 0.25, 0.5])
def test_pruned_probing_stays_within_its_bound(renormalize, eps):
    errors, saved = [], []
    for seed in range(3):
        model = ExactJointMDM(n=5, v=3, seed=seed, concentration=0.3)
        x = random_contexts(model, 10, seed + 10)
        exact = perturbation_mi(model, x)
        res = perturbation_mi(model, x, eps=eps, renormalize=renormalize)
        err = res.directed - exact.directed
        assert (err.abs() <= res.directed_error_bound + 1e-12).all()
        assert ((res.mi - exact.mi).abs() <= res.error_bound + 1e-12).all()
        # every bound is at most the SPEC bound d_i log|V|
        assert (res.directed_error_bound
                <= res.dropped_mass[:, :, None] * math.log(3) + 1e-12).all()
        if not renormalize:  # dropping probes can only overestimate MI
            assert float(err.min()) >= -1e-12
        assert res.sequences <= exact.sequences
        saved.append(exact.sequences - res.sequences)
        errors.append(float(err.abs().max()))
    # pruning at these eps really skipped probes and changed the result
    assert sum(saved) > 0 and max(errors) > 0


def test_renormalised_bound_is_attained():
    # X0 = 2 with small mass q leaves X1 uniform; X0 in {0, 1} fixes X1. Pruning token 2 of
    # row 0 makes the kept conditional entropy A = 0 while the dropped one is log 3, so the
    # error of MI_01 is exactly q log 3 = d_0 max(A, log 3 - A).
    q = 0.03
    joint = torch.zeros(3, 3, dtype=torch.float64)
    joint[0, 0] = joint[1, 1] = 0.5 - q / 2
    joint[2, :] = q / 3
    model = ExactJointMDM(joint)
    x = torch.full((1, 2), model.mask_id)
    exact = perturbation_mi(model, x)
    res = perturbation_mi(model, x, eps=0.05)
    assert res.dropped_mass[0, 0].item() == pytest.approx(q, abs=1e-12)
    err = (res.directed - exact.directed)[0, 0, 1].item()
    assert err == pytest.approx(q * math.log(3), abs=1e-12)
    assert res.directed_error_bound[0, 0, 1].item() == pytest.approx(q * math.log(3), abs=1e-12)


def test_positions_restrict_the_probed_rows(toy):
    x = torch.full((2, 5), toy.mask_id)
    x[1, 2] = 1
    positions = torch.zeros(2, 5, dtype=torch.bool)
    positions[0, [0, 3]] = True
    positions[1, [1, 2]] = True  # position 2 is revealed: not probed
    full = perturbation_mi(toy, x)
    res = perturbation_mi(toy, x, positions=positions)
    assert res.probed.tolist() == (positions & (x == toy.mask_id)).tolist()
    assert torch.allclose(res.directed[res.probed], full.directed[res.probed], atol=1e-12)
    assert res.directed[~res.probed].abs().max() == 0
    # pair (0, 3) probed both ways: the symmetric mean; (0, 1): only row 0 was probed
    assert res.mi[0, 0, 3].item() == pytest.approx(full.mi[0, 0, 3].item(), abs=1e-12)
    assert res.mi[0, 1, 0].item() == pytest.approx(max(full.directed[0, 0, 1].item(), 0),
                                                   abs=1e-12)
    assert res.mi[0, 1, 2].item() == 0  # neither 1 nor 2 probed in context 0
    assert res.sequences == 2 + 3 * 3
    assert res.row_sequences.tolist() == [1 + 2 * 3, 1 + 1 * 3]


def test_nothing_masked_costs_nothing(toy):
    x = toy.states[[3, 100]]
    res = perturbation_mi(toy, x)
    assert res.model_calls == 0 and res.sequences == 0
    assert res.mi.shape == (2, 5, 5) and res.mi.abs().max() == 0
    empty = perturbation_mi(toy, torch.zeros(0, 5, dtype=torch.long))
    assert empty.mi.shape == (0, 5, 5) and empty.model_calls == 0


def test_floor_counts_tokens_above_eps(toy):
    x = random_contexts(toy, 6, 8)
    res = perturbation_mi(toy, x, eps=0.2)
    p = toy.conditionals(x)  # (B, N, 3) the exact marginals the base pass reads
    admitted = (p >= 0.2) & res.probed[..., None]
    assert res.support.tolist() == admitted.sum(-1).tolist()
    manual = [(1 + int(admitted[r].sum())) if res.probed[r].any() else 0 for r in range(6)]
    assert floor_sequences(res).tolist() == manual
    # each row keeps at least its top token, so the cost is at least the floor
    assert res.probes.tolist() == torch.where(res.probed, res.support.clamp_min(1), 0).tolist()
    assert (res.row_sequences >= floor_sequences(res)).all()


def test_transformer_properties(tiny_transformer):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 5, (3, 12), generator=g)
    x[torch.rand(3, 12, generator=g) < 0.6] = tiny_transformer.mask_id
    res = perturbation_mi(tiny_transformer, x, batch_size=16)
    masked = x == tiny_transformer.mask_id
    assert torch.equal(res.mi, res.mi.transpose(1, 2))
    assert res.mi.min() >= 0 and res.mi.diagonal(dim1=1, dim2=2).abs().max() == 0
    revealed_pair = ~(masked[:, :, None] & masked[:, None, :])
    assert res.mi[revealed_pair].abs().max() == 0
    assert res.directed[revealed_pair].abs().max() == 0
    other = perturbation_mi(tiny_transformer, x, batch_size=1000)
    assert torch.allclose(res.mi, other.mi, atol=1e-5)


@pytest.mark.parametrize("kwargs, field", [
    ({"eps": -0.1}, "eps"), ({"eps": 1.0}, "eps"), ({"batch_size": 0}, "batch_size"),
    ({"positions": torch.ones(2, 4, dtype=torch.bool)}, "positions"),
    ({"row_ids": torch.arange(3)}, "row_ids"),
])
def test_bad_arguments(toy, kwargs, field):
    with pytest.raises(UnmaskError, match=field):
        perturbation_mi(toy, torch.full((2, 5), toy.mask_id), **kwargs)


def test_tokens_that_do_not_fit_the_model(toy):
    with pytest.raises(UnmaskError, match="tokens"):
        perturbation_mi(toy, torch.full((2, 6), toy.mask_id))  # longer than the model
    with pytest.raises(UnmaskError, match="tokens"):
        perturbation_mi(toy, torch.full((2, 5), 7))  # outside the vocabulary


def test_lean_float64_log_probs_equal_the_shared_helper():
    from unmask.mi.probe import _log_probs64
    from unmask.probs import real_log_probs

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 4, 50, generator=g) * 5
    real = torch.rand(50, generator=g) > 0.2
    assert torch.equal(_log_probs64(logits, real), real_log_probs(logits.double(), real))
    assert _log_probs64(logits, real).dtype == torch.float64
