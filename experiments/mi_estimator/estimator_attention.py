"""Does the MDM's own attention carry pair information the MI estimator lacks?

On the held-out contexts of a label folder, scores against the ground-truth MI (Spearman over
the unordered masked pairs, pooled as `unmask mi eval` does):
- each head's symmetrised attention weights A + A^T, layer by layer;
- a linear fit of sqrt(MI) on the log attention of every head (fit on even contexts, scored on
  odd ones);
- the estimator's prediction alone, and with the attention features, in the same linear fit.
If the last two are equal, attention adds nothing the estimator does not already read.

    PYTHONPATH=src .venv/bin/python experiments/mi_estimator/estimator_attention.py \\
        --labels runs/mi_estimator/labels-FP [--estimator sudoku_mi_estimator] --threads 1
"""

from __future__ import annotations

import argparse

import torch

from unmask.mi.estimator import load_estimator
from unmask.mi.estimator_train import LabelSet, held_out_mask, masked_pairs, spearman
from unmask.pretrained import load_model


def attention_maps(model, tokens: torch.Tensor) -> torch.Tensor:
    """(B, L, H, N, N) symmetrised attention weights of every block of an MDMTransformer."""
    relations = getattr(model, "relations", None)
    maps = []
    with torch.inference_mode():
        x = model.embed(tokens)
        for blk in model.blocks:
            p = blk.attention_probs(x, relations)
            maps.append(p + p.transpose(-1, -2))
            x = blk(x, relations)
    return torch.stack(maps, 1)


def held_out_contexts(labels_dir: str, held_out: float, model_name: str | None = None):
    """The MDM a label folder was probed on (default: its task's shipped model) and the
    folder's held-out contexts: (model, tokens (C, N), mi (C, N, N), masked (C, N),
    resolved (C, N, N) bool or None: see ``label_resolution``)."""
    labels = LabelSet.from_dir(labels_dir)
    model = load_model(model_name or labels.identity.get("task", "sudoku")).eval()
    labels.check_model(model)
    keep = held_out_mask(labels.groups, held_out)
    tokens = labels.tokens[keep]
    resolved = labels.resolved[keep] if labels.resolved is not None else None
    return model, tokens, labels.mi[keep], tokens == model.mask_id, resolved


def linear_fit_spearman(features: torch.Tensor, target: torch.Tensor, fit: torch.Tensor,
                        truth: torch.Tensor) -> float:
    """Spearman on ~fit rows of a least-squares fit of ``target`` on ``features`` (P, K) + 1."""
    x = torch.cat([features, torch.ones(len(features), 1, dtype=features.dtype)], 1)
    w = torch.linalg.lstsq(x[fit], target[fit]).solution
    return spearman(x[~fit] @ w, truth[~fit])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--labels", required=True)
    ap.add_argument("--estimator", default="sudoku_mi_estimator")
    ap.add_argument("--model", default=None, help="default: the labels' task's shipped model")
    ap.add_argument("--held-out", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokens, mi, masked, _ = held_out_contexts(args.labels, args.held_out, args.model)
    pairs = masked_pairs(masked)
    truth = mi[pairs].double()
    maps = attention_maps(model, tokens)
    print(f"{len(tokens)} held-out contexts, {len(truth):,} pairs")
    for layer in range(maps.shape[1]):
        row = " ".join(f"{spearman(maps[:, layer, h][pairs], truth):.3f}"
                       for h in range(maps.shape[2]))
        print(f"layer {layer}: Spearman per head {row}")
    context = torch.arange(len(tokens))[:, None, None].expand_as(pairs)[pairs]
    fit = context % 2 == 0
    target = truth.sqrt()
    att = torch.log(maps.flatten(1, 2).permute(0, 2, 3, 1)[pairs].double() + 1e-6)
    est = load_estimator(args.estimator, model)
    with torch.inference_mode():
        pred = est(est.features(model(tokens), model), masked)[pairs].double()
    own = torch.stack([torch.log(pred + 1e-6), pred.sqrt()], 1)
    rows = [("linear fit on log attention, all heads", att),
            ("estimator alone (same linear fit)", own),
            ("estimator + attention (same linear fit)", torch.cat([own, att], 1))]
    for name, features in rows:
        print(f"{name:42s} {linear_fit_spearman(features, target, fit, truth):.3f}")


if __name__ == "__main__":
    main()
