"""Where does the Sudoku MI estimator lose its ranking: peers or non-peers?

On the held-out contexts of a label folder (pooled unordered masked pairs, as `unmask mi eval`):
- Spearman of the estimator on row/column/box peer pairs and on non-peer pairs, and the share
  of the true top-decile pairs each holds;
- the same for the pairs the probe labels exactly 0 (their symmetrised value (MI + MI^T)/2 came
  out negative and was clipped: the model's conditionals do not form one joint there, so the
  pairs are tied at 0 in the truth while any smooth head spreads them) and those above 0;
- the same for the pairs whose label exceeds its own asymmetry |MI_ij - MI_ji| / 2 (for one
  joint distribution the two directions agree; where they differ by more than the value, the
  label does not resolve the pair's rank) and the rest;
- pooled Spearman and top-decile recall if the estimator were exact on one set;
- where top-decile recall is lost: how close the missed pairs lie to the decile's threshold,
  the recall of the labels themselves under multiplicative noise (truth * exp(s z)), and the
  spread of the estimator's log ratio to the truth on the true top decile;
- candidate pair features in a ridge fit of sqrt(MI) on top of the estimator's prediction
  (fit on even contexts, scored on odd ones): the MI of the two marginals under an
  all-different constraint (closed form), the estimator's own pair units composed over a
  third masked cell (two hops), and all walks over its own predicted MI (the correlations of
  a Gaussian whose couplings are sqrt(MI): every chain, not just two hops). A feature the
  head lacks raises the fitted Spearman.

    PYTHONPATH=src .venv/bin/python experiments/mi_estimator/estimator_structure.py \\
        --labels runs/mi_estimator/labels-FP [--estimator sudoku_mi_estimator] --threads 1
"""

from __future__ import annotations

import argparse

import torch
from estimator_attention import held_out_contexts

from unmask.metrics import spearman, top_decile_recall
from unmask.mi.estimator import load_estimator
from unmask.mi.estimator_eval import masked_pairs
from unmask.sudoku.solver import PEERS


def exclusion_mi(p: torch.Tensor) -> torch.Tensor:
    """(B, N, N) MI in nats of q(a, b) ~ p_i(a) p_j(b) [a != b]: two cells with marginals
    p (B, N, V) under an all-different constraint and nothing else. With Z = 1 - p_i . p_j
    and g = (1 - p) log(1 - p): I = log Z - (p_i . g_j + g_i . p_j) / Z."""
    z = (1 - p @ p.transpose(1, 2)).clamp_min(1e-12)
    g = (1 - p) * torch.log((1 - p).clamp_min(1e-300))
    t = p @ g.transpose(1, 2)
    return (torch.log(z) - (t + t.transpose(1, 2)) / z).clamp_min(0)


def walk_correlation(couplings: torch.Tensor, radius: float = 0.95) -> torch.Tensor:
    """(B, N, N) correlations of a Gaussian with precision I - W for symmetric non-negative
    couplings W (B, N, N): G = (I - W)^-1 sums the walks of every length between two
    positions, rho_ij = G_ij / sqrt(G_ii G_jj). W is scaled down per context where its
    spectral radius exceeds ``radius`` (so I - W stays positive definite)."""
    rad = torch.linalg.eigvalsh(couplings).abs().amax(-1)
    w = couplings / torch.clamp(rad / radius, min=1.0)[:, None, None]
    g = torch.linalg.inv(torch.eye(w.shape[-1], dtype=w.dtype) - w)
    d = g.diagonal(dim1=1, dim2=2)
    return g / torch.sqrt(d[:, :, None] * d[:, None, :])


def ridge_spearman(features, target, fit, truth) -> tuple[float, float]:
    """Spearman and top-decile recall on ~fit rows of a ridge fit of target on features."""
    x = (features - features[fit].mean(0)) / (features[fit].std(0) + 1e-9)
    x = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], 1)
    a = x[fit]
    w = torch.linalg.solve(a.T @ a + 1e-3 * torch.eye(a.shape[1], dtype=a.dtype),
                           a.T @ target[fit])
    pred = x[~fit] @ w
    return spearman(pred, truth[~fit]), top_decile_recall(pred, truth[~fit])


def recall_loss(guess, truth, top, context, n_contexts) -> None:
    """Print where the top-decile recall of ``guess`` against ``truth`` (P,) is lost."""
    threshold = truth[top].min()
    missed = top & (guess < guess.quantile(0.9))
    ratio = truth[missed] / threshold
    q = ", ".join(f"{float(ratio.quantile(x)):.2f}" for x in (0.1, 0.5, 0.9))
    near = float((top & (truth < 1.5 * threshold)).sum() / top.sum())
    print(f"true top decile from {float(threshold):.3f} nats; {near:.0%} of it below 1.5 times "
          f"that; missed pairs at {q} times it (10/50/90%)")
    gen = torch.Generator().manual_seed(0)
    for s in (0.1, 0.2, 0.3, 0.5):
        noisy = truth * torch.exp(s * torch.randn(truth.shape, generator=gen,
                                                  dtype=truth.dtype))
        print(f"  labels times exp({s} z): Spearman {spearman(noisy, truth):.3f}, recall "
              f"{top_decile_recall(noisy, truth):.3f}")
    log_ratio = torch.log(guess + 1e-6) - torch.log(truth + 1e-6)
    ctx = context[top]
    count = torch.bincount(ctx, minlength=n_contexts).clamp_min(1)
    mean = torch.zeros(n_contexts, dtype=truth.dtype).index_add_(0, ctx, log_ratio[top]) / count
    rescaled = guess * torch.exp(-mean[context])
    print(f"  estimator on the true top decile: log(pred / truth) mean "
          f"{float(log_ratio[top].mean()):.2f}, spread {float(log_ratio[top].std()):.2f}; "
          f"recall with each context's mean log ratio removed "
          f"{top_decile_recall(rescaled, truth):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--labels", required=True)
    ap.add_argument("--estimator", default="sudoku_mi_estimator")
    ap.add_argument("--held-out", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokens, mi, masked, resolved = held_out_contexts(args.labels, args.held_out,
                                                            "sudoku")
    mi = mi.double()
    pairs = masked_pairs(masked)
    truth = mi[pairs]
    est = load_estimator(args.estimator, model)
    with torch.inference_mode():
        out = model(tokens)
        features = est.features(out, model)
        pred = est(features, masked).double()
        units = est.pair_units(features).double()
        units = 0.5 * (units + units.transpose(-1, -2))  # symmetrised
    n = tokens.shape[1]
    peer_table = torch.zeros(n, n, dtype=torch.bool)
    peers = torch.as_tensor(PEERS)
    peer_table[torch.arange(n)[:, None].expand_as(peers), peers] = True
    peer = peer_table.expand(len(tokens), n, n)[pairs]
    guess = pred[pairs]
    top = truth >= truth.quantile(0.9)
    print(f"{len(tokens)} held-out contexts, {len(truth):,} pairs; estimator pooled Spearman "
          f"{spearman(guess, truth):.3f}, top-decile recall {top_decile_recall(guess, truth):.3f}")
    zero = truth == 0
    resolved = resolved[pairs]
    for name, part in (("peer", peer), ("non-peer", ~peer), ("label = 0", zero),
                       ("label > 0", ~zero), ("resolved", resolved),
                       ("unresolved", ~resolved)):
        exact = guess.clone()
        exact[part] = truth[part]
        ranked = spearman(guess[part], truth[part])  # nan on a constant truth (label = 0)
        print(f"{name:10s} pairs {int(part.sum()):>8,}: Spearman {ranked:.3f}, share of true top "
              f"decile {(top & part).sum() / top.sum():.2f}; exact on them: Spearman "
              f"{spearman(exact, truth):.3f}, recall {top_decile_recall(exact, truth):.3f}")

    context = torch.arange(len(tokens))[:, None, None].expand_as(pairs)[pairs]
    recall_loss(guess, truth, top, context, len(tokens))
    fit = context % 2 == 0
    target = truth.sqrt()
    probs = torch.softmax(out.logits[..., list(model.real_token_ids)].double(), -1)
    excl = (exclusion_mi(probs) * peer_table)[pairs]
    legs = units * masked[:, None, None, :].double()
    hops = []
    for u in range(units.shape[1]):
        y = legs[:, u] @ units[:, u] / n
        hops.append((0.5 * (y + y.transpose(1, 2)))[pairs])
    hops = torch.stack(hops, 1).clamp_min(0).sqrt()
    own = torch.stack([torch.log(guess + 1e-6), guess.sqrt()], 1)
    peerf = peer.double()[:, None]
    walks = []
    for scope in (peer_table, torch.ones_like(peer_table)):  # couplings on peers, on all pairs
        rho = walk_correlation(pred.sqrt() * scope)[pairs]
        gauss = -0.5 * torch.log1p(-rho.clamp(max=0.999) ** 2)  # a Gaussian pair's MI
        walks.append(torch.stack([rho, gauss, torch.log(gauss + 1e-6)], 1))
    unit_f = units.permute(0, 2, 3, 1)[pairs]
    rows = [("estimator alone", own),
            ("+ its pair units", torch.cat([own, unit_f, unit_f * peerf], 1)),
            ("+ all-different MI of the marginals", torch.cat([own, excl.sqrt()[:, None],
                                                              peerf], 1)),
            ("+ pair units and their two hops", torch.cat([own, unit_f, unit_f * peerf, hops,
                                                          hops * peerf], 1)),
            ("+ all walks over its peer MI", torch.cat([own, walks[0], walks[0] * peerf], 1)),
            ("+ all walks over all its MI", torch.cat([own, walks[1], walks[1] * peerf], 1))]
    print("ridge fit of sqrt(MI), scored on the other half of the contexts:")
    for name, feats in rows:
        s, r = ridge_spearman(feats, target, fit, truth)
        print(f"  {name:38s} Spearman {s:.3f}  recall {r:.3f}")


if __name__ == "__main__":
    main()
