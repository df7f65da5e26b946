"""Pairwise mutual information between masked positions: ground truth by probing, labels,
the neural estimator, and :func:`fit` (an estimator for any model within a CPU budget,
:mod:`unmask.mi.fitting`, imported when first read)."""

from unmask.lazy import lazy_exports
from unmask.mi.probe import (
    PerturbationMI,
    directed_error_bound,
    floor_sequences,
    naive_sequences,
    perturbation_mi,
    symmetrize,
)

__getattr__, _ = lazy_exports(__name__, {"fit": "fitting", "FitBudget": "fitting"})

__all__ = [
    "FitBudget",
    "PerturbationMI",
    "directed_error_bound",
    "fit",
    "floor_sequences",
    "naive_sequences",
    "perturbation_mi",
    "symmetrize",
]
