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


def row_counts(tokens: Sequences) -> np.ndarray:
    """(R, 20) amino-acid counts of each row (MASK, PAD and other ids >= 20 not counted)."""
    x = _rows(tokens)
    rows = np.broadcast_to(np.arange(len(x))[:, None], x.shape)
    ok = x < N_AA
    flat = np.bincount(rows[ok] * N_AA + x[ok], minlength=len(x) * N_AA)
    return flat.reshape(len(x), N_AA).astype(np.float64)


def jsd_std_error(tokens: Sequences, reference: np.ndarray, n_boot: int = 1000,
                  seed: int = 0) -> float:
    """Bootstrap standard error of the pooled-composition JSD (nats) of rows ``tokens``
    (R, N) against ``reference`` (20,): the rows are resampled with replacement ``n_boot``
    times. It is the sampling noise of R proteins: two samplers' JSD (same R, same lengths)
    must differ by a few of these before the difference means anything. (A percentile
    interval would not do: near 0 resampling only adds divergence, so the bootstrap values
    sit above the estimate.)"""
    counts = row_counts(tokens)
    if len(counts) == 0:
        return float("nan")
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(len(counts), np.full(len(counts), 1.0 / len(counts)),
                              size=n_boot).astype(np.float64)  # (n_boot, R)
    pooled = weights @ counts
    pooled /= np.maximum(pooled.sum(1, keepdims=True), 1.0)
    return float(np.std(jsd(pooled, np.asarray(reference, dtype=np.float64)[None, :]),
                        ddof=1))


def per_sequence_jsd(tokens: torch.Tensor, reference: np.ndarray) -> np.ndarray:
    """(B,) JSD (nats) of each row's own composition against ``reference`` (20,)."""
    counts = row_counts(tokens)
    own = counts / np.maximum(counts.sum(1, keepdims=True), 1.0)
    return jsd(own, reference[None, :])


def low_complexity(tokens: torch.Tensor, share: float = LOW_COMPLEXITY_SHARE) -> np.ndarray:
    """(B,) bool: the row's most common residue makes up more than ``share`` of its residues."""
    counts = row_counts(tokens)
    length = np.maximum(counts.sum(1), 1)
    return counts.max(1) > share * length


def generation_metrics(tokens: torch.Tensor, heldout: Sequences,
                       background: np.ndarray) -> dict:
    """Every composition metric of generated (or natural) rows ``tokens`` (B, N).

    jsd_heldout / jsd_background: pooled amino-acid composition vs the held-out proteins and
    vs HMMER's background; jsd_heldout_se: its bootstrap standard error over rows
    (:func:`jsd_std_error`); jsd_2mer: pooled dipeptides vs held-out; jsd_per_seq: mean over rows
    of each row's own composition vs held-out (large for short rows even when natural);
    low_complexity: share of rows whose most common residue exceeds 40%; distinct: share of
    distinct rows.
    """
    ref = composition(heldout)
    comp = composition(tokens)
    x = _rows(tokens)
    return {
        "jsd_heldout": jsd(comp, ref),
        "jsd_heldout_se": jsd_std_error(tokens, ref),
        "jsd_background": jsd(comp, background),
        "jsd_2mer": jsd(dipeptide_composition(tokens), dipeptide_composition(heldout)),
        "jsd_per_seq": float(per_sequence_jsd(tokens, ref).mean()),
        "low_complexity": float(low_complexity(tokens).mean()),
        "distinct": len({r.tobytes() for r in x}) / max(len(x), 1),
    }


__all__ = ["LOW_COMPLEXITY_SHARE", "composition", "dipeptide_composition",
           "generation_metrics", "jsd", "jsd_std_error", "low_complexity", "per_sequence_jsd",
           "row_counts"]
