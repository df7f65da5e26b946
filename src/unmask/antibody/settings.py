"""The three antibody decoding settings, as infilling templates with their truth.

Each setting returns :class:`InfillCase` rows: a ``template`` in the syntax of
:func:`unmask.infill` (a residue string, ``<mask:N>`` for N masked positions), the ``truth``
(the natural sequence, or None where there is none) and the ``masked`` positions. The
templates run unchanged through ``unmask.infill(model, [c.template for c in cases], ...)``
for any protein model (AntiBERTy, ESM folders, the shipped protein MDM).

- :func:`cdr_infilling`: the CDR residues of each chain masked, the framework given.
- :func:`random_masking`: a high share of each chain's residues masked at random.
- :func:`unconditional`: every position masked, lengths drawn from a fixed distribution (the
  held-out V genes', or :data:`HEAVY_LENGTHS` for whole heavy chains).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from unmask.antibody.data import CDRS, HeavyChain, heavy_chains
from unmask.errors import require
from unmask.validation import is_int


@dataclass(frozen=True)
class InfillCase:
    """One sequence to fill.

    name: the chain's name (``"unconditional 0"`` ...); template: residues with
    ``<mask:N>`` runs (:func:`unmask.infill` syntax); truth: the natural residue string of
    the same length, or None (unconditional); masked: (L,) bool, True where masked.
    """

    name: str
    template: str
    truth: str | None
    masked: np.ndarray

    @property
    def length(self) -> int:
        return len(self.masked)


def make_template(sequence: str, masked: np.ndarray) -> str:
    """``sequence`` with each run of masked positions written ``<mask:N>``."""
    require(len(sequence) == len(masked), "masked: one flag per residue")
    out, i = [], 0
    while i < len(sequence):
        if masked[i]:
            j = i
            while j < len(sequence) and masked[j]:
                j += 1
            out.append(f"<mask:{j - i}>")
            i = j
        else:
            out.append(sequence[i])
            i += 1
    return "".join(out)


def cdr_infilling(chains: list[HeavyChain], regions: tuple[str, ...] = CDRS
                  ) -> list[InfillCase]:
    """Mask the residues of ``regions`` (IMGT CDR1 27-38, CDR2 56-65 and the germline start
    of CDR3 105-106 by default) in each chain; the framework is given."""
    cases = []
    for c in heavy_chains(chains):
        masked = c.region_mask(regions)
        require(masked.any(), f"{c.name}: no residue in {', '.join(regions)}")
        cases.append(InfillCase(c.name, make_template(c.sequence, masked), c.sequence, masked))
    return cases


def random_masking(chains: list[HeavyChain], ratio: float | tuple[float, float] = (0.6, 0.9),
                   seed: int = 0) -> list[InfillCase]:
    """Mask round(r * L) residues of each chain (at least 1), at positions drawn at random;
    r is ``ratio`` or uniform in ``[lo, hi)``. Chain i draws from a generator keyed by
    (seed, i), so a case does not depend on the others."""
    chains = heavy_chains(chains)
    lo, hi = (ratio, ratio) if isinstance(ratio, (int, float)) else ratio
    require(0.0 < lo <= hi <= 1.0, f"ratio: need 0 < lo <= hi <= 1, got {ratio}")
    cases = []
    for i, c in enumerate(chains):
        rng = np.random.default_rng([int(seed), i])
        r = lo + (hi - lo) * rng.random()
        n = max(1, round(r * len(c.sequence)))
        masked = np.zeros(len(c.sequence), dtype=bool)
        masked[rng.permutation(len(c.sequence))[:n]] = True
        cases.append(InfillCase(c.name, make_template(c.sequence, masked), c.sequence, masked))
    return cases


def length_distribution(chains: list[HeavyChain]) -> dict[int, float]:
    """{length: share} of the chains' residue counts (the natural lengths)."""
    lengths, counts = np.unique([len(c.sequence) for c in heavy_chains(chains)],
                                return_counts=True)
    return {int(n): float(k / counts.sum()) for n, k in zip(lengths, counts, strict=True)}


#: full heavy-chain variable-domain lengths (V gene, CDR3 and J gene: 118-125 residues), each
#: as likely: the lengths of the ``heavy`` generation setting
HEAVY_LENGTHS = {n: 1.0 / 8 for n in range(118, 126)}


def unconditional(count: int, lengths: dict[int, float], seed: int = 0) -> list[InfillCase]:
    """``count`` all-masked templates, case i of length drawn from ``lengths``
    ({length: share}, e.g. :func:`length_distribution` of the held-out chains) by a generator
    keyed by (seed, i); no truth."""
    require(is_int(count) and count >= 1, f"count: must be an integer >= 1, got {count}")
    require(len(lengths) > 0 and all(is_int(n) and n >= 1 for n in lengths),
            "lengths: need {length: share} with integer lengths >= 1")
    sizes = np.array(sorted(lengths))
    share = np.array([lengths[n] for n in sizes], dtype=float)
    require(bool((share >= 0).all()) and share.sum() > 0, "lengths: shares must be >= 0, "
                                                          "not all 0")
    cases = []
    for i in range(count):
        n = int(np.random.default_rng([int(seed), i]).choice(sizes, p=share / share.sum()))
        cases.append(InfillCase(f"unconditional {i}", f"<mask:{n}>", None,
                                np.ones(n, dtype=bool)))
    return cases
