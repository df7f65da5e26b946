"""Chain type of antibody sequences from ANARCI's hidden Markov models, in process.

The ``anarci`` package (BSD-3-Clause) ships ``dat/HMMs/ALL.hmm``: one profile HMM per species
and chain type, named ``species_T`` with T one of ``H`` (heavy), ``K`` (kappa), ``L``
(lambda) and the T-cell receptor chains ``A``, ``B``, ``G``, ``D``. :func:`chain_types`
scores each sequence against all of them with pyhmmer's ``hmmscan`` (no HMMER binary, no
call into ``anarci``'s own code) and, as ANARCI does, takes the best-scoring model whose bit
score reaches a threshold (80 bits, ANARCI's default); below it the sequence has no type.

    from unmask.antibody.typing import chain_types, heavy_share
    heavy_share(chain_types(["EVQLVESGGGLVQPGGSLRLSCAAS..."]))   # 1.0
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from unmask.errors import require

#: ANARCI's default bit-score threshold for a domain to count as typed
BIT_SCORE_THRESHOLD = 80.0
#: chain-type letters of the HMM names -> what they are
CHAIN_TYPES = {"H": "heavy", "K": "kappa", "L": "lambda", "A": "TCR alpha", "B": "TCR beta",
               "G": "TCR gamma", "D": "TCR delta"}


@dataclass(frozen=True)
class ChainType:
    """The typing of one sequence.

    chain: ``H``, ``K``, ``L``, ``A``, ``B``, ``G`` or ``D`` (:data:`CHAIN_TYPES`), or None
    when no model reaches the threshold; species: the best model's species (None untyped);
    score: the best model's bit score (0 when nothing hit); heavy_margin: the best heavy
    model's bit score minus the best other model's (0 for a missing side), a graded measure
    of how heavy the sequence looks.
    """

    chain: str | None
    species: str | None
    score: float
    heavy_margin: float

    @property
    def heavy(self) -> bool:
        return self.chain == "H"


def hmm_file() -> Path:
    """``anarci/dat/HMMs/ALL.hmm`` of the installed anarci package."""
    spec = importlib.util.find_spec("anarci")
    require(spec is not None and bool(spec.submodule_search_locations),
            "chain typing: the HMMs come from the anarci package; pip install "
            "'unmask[antibody]'")
    path = Path(list(spec.submodule_search_locations)[0]) / "dat" / "HMMs" / "ALL.hmm"
    require(path.is_file(), f"chain typing: {path} is missing; reinstall anarci")
    return path


@lru_cache(maxsize=2)
def _profiles(path: str | None = None) -> tuple:
    """(alphabet, the optimised profiles of every HMM in ``path``), read once."""
    from pyhmmer import plan7

    with plan7.HMMFile(str(path or hmm_file())) as f:
        hmms = list(f)
    require(len(hmms) > 0, f"chain typing: {path or hmm_file()} holds no HMM")
    alphabet = hmms[0].alphabet
    background = plan7.Background(alphabet)
    profiles = []
    for hmm in hmms:
        profile = plan7.Profile(hmm.M, alphabet)
        profile.configure(hmm, background)
        profiles.append(profile.to_optimized())
    return alphabet, tuple(profiles)


def _name(x) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def chain_types(sequences: Sequence[str], threshold: float = BIT_SCORE_THRESHOLD,
                path: str | None = None) -> list[ChainType]:
    """One :class:`ChainType` per residue string of ``sequences``, in order (an empty string
    is untyped). ``path``: another HMM file with ANARCI's ``species_T`` names."""
    from pyhmmer import easel, hmmer

    require(all(isinstance(s, str) for s in sequences), "sequences: expected residue strings")
    alphabet, profiles = _profiles(path)
    queries = [easel.TextSequence(name=str(i).encode(), sequence=s).digitize(alphabet)
               for i, s in enumerate(sequences) if s]
    found: dict[int, ChainType] = {}
    for hits in hmmer.hmmscan(queries, profiles, cpus=1, T=0.0, domT=0.0):
        best: dict[str, tuple[float, str]] = {}  # chain letter -> (score, species)
        for hit in hits:
            species, _, chain = _name(hit.name).rpartition("_")
            if hit.score > best.get(chain, (-float("inf"), ""))[0]:
                best[chain] = (float(hit.score), species)
        index = int(_name(hits.query.name if hasattr(hits, "query") else hits.query_name))
        found[index] = _typed(best, threshold)
    untyped = ChainType(None, None, 0.0, 0.0)
    return [found.get(i, untyped) for i in range(len(sequences))]


def _typed(best: dict[str, tuple[float, str]], threshold: float) -> ChainType:
    """The :class:`ChainType` from each chain letter's best (score, species)."""
    heavy = best.get("H", (0.0, ""))[0]
    other = max((s for c, (s, _) in best.items() if c != "H"), default=0.0)
    if not best:
        return ChainType(None, None, 0.0, 0.0)
    chain, (score, species) = max(best.items(), key=lambda kv: kv[1][0])
    if score < threshold:
        return ChainType(None, None, score, heavy - other)
    return ChainType(chain, species, score, heavy - other)


def heavy_share(types: Sequence[ChainType]) -> float:
    """The share of ``types`` typed as heavy chain."""
    require(len(types) > 0, "types: need at least one")
    return sum(t.heavy for t in types) / len(types)


__all__ = ["BIT_SCORE_THRESHOLD", "CHAIN_TYPES", "ChainType", "chain_types", "heavy_share",
           "hmm_file"]
