"""Evaluation metrics on hand inputs, the held-out split and the pair loss."""

import math

import pytest
import torch

from unmask import UnmaskError
from unmask.metrics import (
    held_out_mask,
    pair_metrics,
    pearson,
    rankdata,
    spearman,
    top_decile_recall,
)
from unmask.mi.estimator_eval import evaluate_predictions, masked_pairs, probe_agreement
from unmask.mi.estimator_losses import pair_mse
from unmask.mi.estimator_train import EstimatorTrainConfig
from unmask.mi.label_set import label_resolution


def test_rankdata_averages_ties():
    assert rankdata(torch.tensor([3.0, 1.0, 2.0, 2.0])).tolist() == [4.0, 1.0, 2.5, 2.5]
    assert rankdata(torch.tensor([5.0, 5.0, 5.0])).tolist() == [2.0, 2.0, 2.0]


def test_correlations_on_hand_inputs():
    x = torch.tensor([0.1, 0.5, 0.2, 2.0, 0.0, 1.1])
    assert spearman(x.exp() * 3 + 1, x) == pytest.approx(1.0)  # any monotone transform
    assert spearman(-x, x) == pytest.approx(-1.0)
    assert pearson(2 * x + 1, x) == pytest.approx(1.0)
    assert pearson(x**3, x) < 1 - 1e-3  # Pearson sees the curvature Spearman ignores
    a, b = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 3.0, 2.0])
    assert pearson(a, b) == pytest.approx(0.5)
    assert math.isnan(pearson(torch.ones(4), x[:4]))


def test_top_decile_recall_on_hand_inputs():
    true = torch.arange(20.0)  # k = 2: the true top pairs are 19 and 18
    assert top_decile_recall(true, true) == 1.0
    assert top_decile_recall(true.exp(), true) == 1.0
    assert top_decile_recall(-true, true) == 0.0
    pred = true.clone()
    pred[18] = -1.0  # predicted top 2 = {19, 17}
    assert top_decile_recall(pred, true) == 0.5
    assert top_decile_recall(torch.arange(21.0), torch.arange(21.0)) == 1.0  # k = ceil(2.1)


def test_pair_metrics_perfect_and_mse():
    true = torch.tensor([0.0, 0.5, 1.0, 0.25])
    m = pair_metrics(true + 0.5, true)
    assert m["mse"] == pytest.approx(0.25)
    assert m["pearson"] == pytest.approx(1.0) and m["spearman"] == pytest.approx(1.0)
    assert m["top_decile_recall"] == 1.0 and m["pairs"] == 4


def test_evaluate_predictions_uses_unordered_masked_pairs_per_bucket():
    torch.manual_seed(0)
    n = 8
    masked = torch.zeros(3, n, dtype=torch.bool)
    masked[0, :2] = True   # ratio 0.25 -> bucket [0.25, 0.5): 1 pair
    masked[1, :6] = True   # ratio 0.75 -> last bucket: 15 pairs
    masked[2] = True       # ratio 1.0 -> last bucket (closed): 28 pairs
    true = torch.rand(3, n, n)
    true = (true + true.transpose(1, 2)) / 2
    pred = true * 2
    r = evaluate_predictions(pred, true, masked)
    assert r["pairs"] == 1 + 15 + 28 and r["contexts"] == 3
    assert r["spearman"] == pytest.approx(1.0) and r["top_decile_recall"] == 1.0
    counts = [(b["mask_ratio"], b["contexts"], b["pairs"]) for b in r["buckets"]]
    assert counts == [([0.0, 0.25], 0, 0), ([0.25, 0.5], 1, 1), ([0.5, 0.75], 0, 0),
                      ([0.75, 1.0], 2, 43)]
    iu = torch.triu_indices(n, n, 1)
    want = ((pred[2] - true[2])[iu[0], iu[1]] ** 2).mean()
    assert r["buckets"][3]["mse"] == pytest.approx(
        (float(want) * 28 + float(((pred[1] - true[1])[:6, :6].triu(1) ** 2).sum())) / 43)
    assert r["spearman_within"] == pytest.approx(1.0)


def test_label_resolution_compares_each_label_with_its_probe_asymmetry():
    # pair (0, 1): directions 0.3 and 0.1, label 0.2 > |0.3 - 0.1| / 2 = 0.1: resolved
    # pair (0, 2): directions 0.05 and -0.04, label 0.005 < 0.045: not resolved
    # pair (1, 2): directions -0.01 and -0.03, label clipped to 0: not resolved
    directed = torch.tensor([[[0.0, 0.3, 0.05], [0.1, 0.0, -0.01], [-0.04, -0.03, 0.0]]])
    mi = ((directed + directed.transpose(1, 2)) / 2).clamp_min(0) * (1 - torch.eye(3))
    got = label_resolution(mi, directed)[0]
    assert [bool(got[0, 1]), bool(got[0, 2]), bool(got[1, 2])] == [True, False, False]
    assert torch.equal(got, got.T) and not got.diagonal().any()


def test_evaluate_predictions_reports_the_resolved_pairs_alone():
    torch.manual_seed(1)
    n = 6
    masked = torch.ones(2, n, dtype=torch.bool)
    true = torch.rand(2, n, n)
    true = (true + true.transpose(1, 2)) / 2
    resolved = true > 0.5
    # directions true +- 0.5: every pair's asymmetry |MI_ij - MI_ji| / 2 is 0.5
    skew = 0.5 * (torch.ones(n, n).triu(1) - torch.ones(n, n).tril(-1))
    directed = true + skew
    # right order on the resolved pairs, reversed on the rest
    pred = torch.where(resolved, true, 1 - true)
    r = evaluate_predictions(pred, true, masked, directed=directed)
    iu = torch.triu_indices(n, n, 1)
    share = float(resolved[:, iu[0], iu[1]].float().mean())
    assert r["resolved"]["share"] == pytest.approx(share) and 0 < share < 1
    assert r["resolved"]["spearman"] == pytest.approx(1.0)
    assert r["resolved"]["pairs"] == int(resolved[:, iu[0], iu[1]].sum())
    assert r["spearman"] < 0.9
    assert "resolved" not in evaluate_predictions(pred, true, masked)
    # each direction is the label shifted by a constant: the probe agrees with itself in rank
    assert r["probe"]["one_direction"]["spearman"] == pytest.approx(1.0)
    assert r["probe"]["one_direction"]["mse"] == pytest.approx(0.25)
    assert r["probe"]["between_directions"]["top_decile_recall"] == 1.0


def test_probe_agreement_scores_one_direction_and_the_two_against_each_other():
    torch.manual_seed(2)
    n = 7
    masked = torch.ones(1, n, dtype=torch.bool)
    masked[0, 6] = False  # 15 pairs among the 6 masked positions
    forward = torch.rand(1, n, n).triu(1)
    # the backward direction reverses the forward ranking: MI_ji = 1 - MI_ij
    directed = forward + (1 - forward).transpose(1, 2).tril(-1)
    true = (directed + directed.transpose(1, 2)) / 2  # 0.5 everywhere off the diagonal
    got = probe_agreement(true, directed, masked)
    assert got["between_directions"]["pairs"] == 15
    assert got["between_directions"]["spearman"] == pytest.approx(-1.0)
    iu = torch.triu_indices(6, 6, 1)
    assert got["one_direction"]["mse"] == pytest.approx(
        float(((forward[0, :6, :6] - 0.5)[iu[0], iu[1]] ** 2).mean()))


def test_probe_ceiling_is_what_the_truth_scores_against_two_noisy_directions():
    # each direction the true value plus independent noise: the ceiling, computed from the two
    # directions alone, must be what the (hidden) truth itself scores against their mean
    gen = torch.Generator().manual_seed(3)
    m, n = 40, 60
    s = torch.randn(m, n, n, generator=gen)
    s = (s + s.transpose(1, 2)) / 2 ** 0.5  # symmetric truth, unit variance off the diagonal
    directed = s + 0.8 * torch.randn(m, n, n, generator=gen)
    true = (directed + directed.transpose(1, 2)) / 2  # the labels, unclipped
    masked = torch.ones(m, n, dtype=torch.bool)
    got = probe_agreement(true, directed, masked)["ceiling"]
    pairs = masked_pairs(masked)
    want = pair_metrics(s[pairs], true[pairs])
    assert got["pearson"] == pytest.approx(want["pearson"], abs=3e-3)
    assert got["spearman"] == pytest.approx(want["spearman"], abs=1e-2)
    assert got["mse"] == pytest.approx(want["mse"], rel=0.02)
    assert got["pearson"] < 0.95  # the noise is there: not a ceiling of 1 by construction
    # a probe whose two directions agree has nothing the labels cannot resolve
    agree = probe_agreement(s, s, masked)["ceiling"]
    assert agree["mse"] == 0.0
    assert agree["pearson"] == pytest.approx(1.0) and agree["spearman"] == pytest.approx(1.0)


def test_pair_mse_counts_ordered_masked_pairs_off_the_diagonal():
    masked = torch.tensor([[True, True, False]])
    pred = torch.tensor([[[9.0, 1.0, 9.0], [3.0, 9.0, 9.0], [9.0, 9.0, 9.0]]])
    assert float(pair_mse(pred, torch.zeros(1, 3, 3), masked)) == pytest.approx((1 + 9) / 2)


def test_pair_mse_on_the_sqrt_scale():
    masked = torch.tensor([[True, True, False]])
    true = torch.zeros(1, 3, 3)
    true[0, 0, 1] = true[0, 1, 0] = 0.0099  # sqrt(0.0099 + 1e-4) - 1e-2 = 0.09
    pred = torch.full((1, 3, 3), 5.0)
    pred[0, 0, 1] = 0.0399  # 0.2 - 0.01 = 0.19 on the sqrt scale
    pred[0, 1, 0] = 0.0     # 0 on the sqrt scale
    want = ((0.19 - 0.09) ** 2 + 0.09 ** 2) / 2
    assert float(pair_mse(pred, true, masked, "sqrt")) == pytest.approx(want, rel=1e-5)
    # the scale is monotone: a perfect prediction costs nothing on either scale
    assert float(pair_mse(true, true, masked, "sqrt")) == 0.0
    with pytest.raises(UnmaskError, match="loss_scale"):
        pair_mse(pred, true, masked, "ln")
    with pytest.raises(UnmaskError, match="loss_scale"):
        EstimatorTrainConfig(loss_scale="ln")


def test_pair_mse_on_the_log_scale_counts_strong_pairs_relative():
    masked = torch.tensor([[True, True, True]])
    true = torch.zeros(1, 3, 3)
    true[0, 0, 1] = true[0, 1, 0] = 0.15   # log(1 + 0.15 / 0.05) = log 4
    true[0, 0, 2] = true[0, 2, 0] = 0.95   # log(1 + 0.95 / 0.05) = log 20
    pred = true.clone()
    pred[0, 0, 1] = pred[0, 1, 0] = 0.35   # log 8: twice the true value + floor
    pred[0, 0, 2] = pred[0, 2, 0] = 1.95   # log 40: the same factor on a pair 6x as strong
    got = float(pair_mse(pred, true, masked, "log"))
    assert got == pytest.approx(2 * math.log(2) ** 2 / 3, rel=1e-5)
    assert float(pair_mse(true, true, masked, "log")) == 0.0


def test_held_out_split_is_by_group_and_stable_across_set_sizes():
    groups = torch.arange(5000)
    held = held_out_mask(groups, 0.1, seed=3)
    assert 0.08 < held.float().mean() < 0.12
    assert torch.equal(held_out_mask(groups[:700], 0.1, seed=3), held[:700])
    assert not torch.equal(held_out_mask(groups, 0.1, seed=4), held)
    # contexts of one puzzle fall on one side
    rep = torch.arange(300).repeat_interleave(4)
    h = held_out_mask(rep, 0.2)
    assert (h.view(300, 4).all(1) | (~h.view(300, 4)).all(1)).all()
    with pytest.raises(UnmaskError, match="held_out"):
        held_out_mask(groups, 1.0)


def test_rank_loss_pays_for_misordered_pairs_only():
    from unmask.mi.estimator_losses import pair_rank_loss

    torch.manual_seed(0)
    n = 6
    true = torch.rand(3, n, n)
    true = (true + true.transpose(1, 2)) / 2
    masked = torch.tensor([[True] * n, [True, True, False, True, False, True], [True] * n])
    gen = torch.Generator().manual_seed(1)
    right = pair_rank_loss(true.clone(), true, masked, 256, gen)
    gen = torch.Generator().manual_seed(1)
    wrong = pair_rank_loss(1.0 / (true + 0.1), true, masked, 256, gen)
    assert wrong > right + 0.1
    # a sharper correct ordering costs less; every draw is softplus(-|margin|) < log 2
    gen = torch.Generator().manual_seed(1)
    sharp = pair_rank_loss(true ** 8, true, masked, 256, gen)
    assert sharp < right < torch.log(torch.tensor(2.0))
    # two masked positions: the only pairs are (i, j) and (j, i), of equal MI: nothing to rank
    two = torch.zeros(1, n, dtype=torch.bool)
    two[0, :2] = True
    assert pair_rank_loss(torch.rand(1, n, n), true[:1], two, 64) == 0

