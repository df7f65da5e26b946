"""Statistics shared by the trainers and their evaluations: ranks and correlations, top-decile
recall, ROC AUC, and the held-out split by group.

Spearman uses average ranks for ties; the held-out split hashes (seed, group), so a group keeps
its side however many others a data set holds.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from unmask.errors import require


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on uint64: a fixed, well-spread hash of each value."""
    x = x.astype(np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def held_out_mask(groups: torch.Tensor, fraction: float, seed: int = 0) -> torch.Tensor:
    """(M,) bool: the contexts whose group hashes into the held-out ``fraction``."""
    require(0.0 < fraction < 1.0, f"held_out: must be in (0, 1), got {fraction}")
    g = groups.cpu().numpy().astype(np.int64).view(np.uint64)
    with np.errstate(over="ignore"):
        h = _mix64(g ^ _mix64(np.full(g.shape, seed, dtype=np.uint64)))
    u = (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)  # uniform in [0, 1)
    return torch.from_numpy(u < fraction)




def rankdata(x: torch.Tensor) -> torch.Tensor:
    """(P,) float64 ranks 1..P of ``x`` (P,), tied values sharing their average rank."""
    x = x.double().flatten()
    order = torch.argsort(x, stable=True)
    _, inverse, counts = torch.unique(x[order], return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).double()  # last 1-based rank of each run of ties
    avg = ends - (counts.double() - 1) / 2
    ranks = torch.empty_like(x)
    ranks[order] = avg[inverse]
    return ranks


def pearson(a: torch.Tensor, b: torch.Tensor) -> float:
    """Pearson correlation of two (P,) vectors; nan when either is constant."""
    a, b = a.double() - a.double().mean(), b.double() - b.double().mean()
    denom = math.sqrt(float((a * a).sum()) * float((b * b).sum()))
    return float((a * b).sum()) / denom if denom > 0 else float("nan")


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    return pearson(rankdata(a), rankdata(b))


def top_decile_recall(pred: torch.Tensor, true: torch.Tensor, fraction: float = 0.1) -> float:
    """Of the ``fraction`` of pairs with the largest true MI, the share that are also among the
    ``fraction`` with the largest predicted MI (k = ceil(fraction * P) pairs each)."""
    p = true.numel()
    if p == 0:
        return float("nan")
    k = max(1, math.ceil(fraction * p))
    top_true = torch.argsort(true.double(), descending=True, stable=True)[:k]
    top_pred = torch.argsort(pred.double(), descending=True, stable=True)[:k]
    hit = torch.zeros(p, dtype=torch.bool)
    hit[top_true] = True
    return float(hit[top_pred].sum()) / k


def pair_metrics(pred: torch.Tensor, true: torch.Tensor) -> dict:
    """MSE, Pearson, Spearman, top-decile recall of predicted vs true values (P,)."""
    if true.numel() == 0:
        return {"pairs": 0}
    return {"pairs": int(true.numel()),
            "mse": float(((pred.double() - true.double()) ** 2).mean()),
            "pearson": pearson(pred, true), "spearman": spearman(pred, true),
            "top_decile_recall": top_decile_recall(pred, true),
            "true_mean": float(true.double().mean())}


def roc_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve of ``scores`` (n,) for bool ``labels`` (n,) (ties: average
    ranks); nan when one class is absent."""
    pos = int(labels.sum())
    neg = len(labels) - pos
    if not pos or not neg:
        return math.nan
    ranks = rankdata(scores.double())
    return float((ranks[labels].sum() - pos * (pos + 1) / 2) / (pos * neg))
