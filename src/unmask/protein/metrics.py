"""How close generated proteins are to natural ones: Jensen-Shannon divergences (nats) of
amino-acid and dipeptide composition, and a low-complexity check.

Compositions are pooled: counts summed over every residue of a set of sequences, then
normalised. Sets are given as (B, N) token tensors whose rows end in PAD (generated proteins,
crops) or as lists of token arrays (whole proteins); tokens >= 20 (MASK, PAD) never count.
"""

from __future__ import annotations

import numpy as np
import torch

from unmask.protein.tokens import AMINO_ACIDS, PAD_ID

N_AA = len(AMINO_ACIDS)
LOW_COMPLEXITY_SHARE = 0.4

Sequences = torch.Tensor | np.ndarray | list


def _rows(seqs: Sequences) -> np.ndarray:
    """(R, N) int64 rows; a list of arrays becomes one row with PAD between the proteins, so
    no dipeptide spans two proteins."""
    if isinstance(seqs, torch.Tensor):
        return seqs.detach().cpu().numpy().astype(np.int64)
    if isinstance(seqs, np.ndarray) and seqs.ndim == 2:
        return seqs.astype(np.int64)
    parts = []
    for s in seqs:
        parts += [np.asarray(s, dtype=np.int64), np.array([PAD_ID])]
    return np.concatenate(parts)[None, :] if parts else np.zeros((0, 0), dtype=np.int64)


def composition(seqs: Sequences) -> np.ndarray:
    """(20,) pooled amino-acid frequencies (zeros if there are no residues)."""
    x = _rows(seqs)
    counts = np.bincount(x[x < N_AA], minlength=N_AA).astype(np.float64)
    return counts / max(counts.sum(), 1.0)


def dipeptide_composition(seqs: Sequences) -> np.ndarray:
    """(400,) pooled frequencies of adjacent residue pairs (a, b) at index 20 a + b."""
    x = _rows(seqs)
    a, b = x[:, :-1], x[:, 1:]
    ok = (a < N_AA) & (b < N_AA)
    counts = np.bincount((a * N_AA + b)[ok], minlength=N_AA * N_AA).astype(np.float64)
    return counts / max(counts.sum(), 1.0)


def jsd(p: np.ndarray, q: np.ndarray) -> float | np.ndarray:
    """Jensen-Shannon divergence in nats of distributions (..., K) (in [0, ln 2])."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    m = 0.5 * (p + q)

    def kl(a):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(a > 0, a * np.log(a / np.where(m > 0, m, 1.0)), 0.0).sum(-1)

    out = 0.5 * kl(p) + 0.5 * kl(q)
    return float(out) if np.ndim(out) == 0 else out


def per_sequence_jsd(tokens: torch.Tensor, reference: np.ndarray) -> np.ndarray:
    """(B,) JSD (nats) of each row's own composition against ``reference`` (20,)."""
    x = _rows(tokens)
    counts = np.stack([(x == a).sum(1) for a in range(N_AA)], 1).astype(np.float64)
    own = counts / np.maximum(counts.sum(1, keepdims=True), 1.0)
    return jsd(own, reference[None, :])


def low_complexity(tokens: torch.Tensor, share: float = LOW_COMPLEXITY_SHARE) -> np.ndarray:
    """(B,) bool: the row's most common residue makes up more than ``share`` of its residues."""
    x = _rows(tokens)
    counts = np.stack([(x == a).sum(1) for a in range(N_AA)], 1)
    length = np.maximum(counts.sum(1), 1)
    return counts.max(1) > share * length


def generation_metrics(tokens: torch.Tensor, heldout: Sequences,
                       background: np.ndarray) -> dict:
    """Every composition metric of generated (or natural) rows ``tokens`` (B, N).

    jsd_heldout / jsd_background: pooled amino-acid composition vs the held-out proteins and
    vs HMMER's background; jsd_2mer: pooled dipeptides vs held-out; jsd_per_seq: mean over rows
    of each row's own composition vs held-out (large for short rows even when natural);
    low_complexity: share of rows whose most common residue exceeds 40%; distinct: share of
    distinct rows.
    """
    ref = composition(heldout)
    comp = composition(tokens)
    x = _rows(tokens)
    return {
        "jsd_heldout": jsd(comp, ref),
        "jsd_background": jsd(comp, background),
        "jsd_2mer": jsd(dipeptide_composition(tokens), dipeptide_composition(heldout)),
        "jsd_per_seq": float(per_sequence_jsd(tokens, ref).mean()),
        "low_complexity": float(low_complexity(tokens).mean()),
        "distinct": len({r.tobytes() for r in x}) / max(len(x), 1),
    }


__all__ = ["LOW_COMPLEXITY_SHARE", "composition", "dipeptide_composition",
           "generation_metrics", "jsd", "low_complexity", "per_sequence_jsd"]
