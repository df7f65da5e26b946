"""Pairwise mutual information between masked positions: ground truth by probing, labels."""

from unmask.mi.probe import (
    PerturbationMI,
    directed_error_bound,
    floor_sequences,
    naive_sequences,
    perturbation_mi,
    symmetrize,
)

__all__ = [
    "PerturbationMI",
    "directed_error_bound",
    "floor_sequences",
    "naive_sequences",
    "perturbation_mi",
    "symmetrize",
]
