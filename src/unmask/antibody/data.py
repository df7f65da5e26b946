"""Real antibody heavy chains: the germline heavy-chain V genes that ANARCI ships.

Source: the ``anarci`` package on PyPI (BSD-3-Clause; ``pip install 'unmask[antibody]'``)
ships, in ``anarci/germlines.py``, the IMGT germline V and J gene sequences of eight
species, each aligned to the 128 positions of IMGT numbering (``-`` where a gene has no
residue). It is read at run time from the installed package, never imported (the file is
one Python literal, parsed with :func:`ast.literal_eval`, so no code of it runs) and never
copied into this project.

A :class:`HeavyChain` is one V gene allele: its residues (IMGT positions 1-~106: FR1,
CDR1, FR2, CDR2, FR3 and the start of CDR3) and the IMGT position of each residue.
A germline V gene ends two or three residues into CDR3 (IMGT 105-106, the ``AR`` after
the conserved Cys 104); the rest of CDR3 (D gene, N additions, J gene) is made by
recombination and is not in any germline table, so ``cdr3`` here means that germline-encoded
start only.

Split (:func:`split_of`): alleles of one gene (``IGHV1-2*01``, ``IGHV1-2*02``) are
near-identical, so the split is by gene: a gene is held out when the first byte of the
sha256 of ``"species/gene"`` is below 256 * :data:`HELD_OUT_FRACTION`. Identical residue
strings are kept once (the first name in sorted order), so no sequence is in both splits.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from unmask.errors import require

#: where the sequences come from (for reports)
SOURCE = ("IMGT germline heavy-chain V genes shipped by the anarci package "
          "(anarci/germlines.py, BSD-3-Clause)")
#: IMGT regions of a V domain (inclusive IMGT position ranges)
REGIONS = {"fr1": (1, 26), "cdr1": (27, 38), "fr2": (39, 55), "cdr2": (56, 65),
           "fr3": (66, 104), "cdr3": (105, 117), "fr4": (118, 128)}
CDRS = ("cdr1", "cdr2", "cdr3")
SPECIES = ("human", "mouse", "rat", "rabbit", "rhesus", "pig", "alpaca", "cow")
SPLITS = ("train", "held_out", "all")
HELD_OUT_FRACTION = 0.2
_IMGT_LENGTH = 128


@dataclass(frozen=True)
class HeavyChain:
    """One germline heavy-chain V gene allele.

    name: ``"species IGHV..*NN"``; sequence: its residues (one letter each, no gaps);
    imgt: the IMGT position (1-128) of each residue, ascending, ``len(imgt) == len(sequence)``.
    """

    name: str
    species: str
    sequence: str
    imgt: tuple[int, ...]

    def region_mask(self, regions: tuple[str, ...] = CDRS) -> np.ndarray:
        """(L,) bool: the residues whose IMGT position lies in one of ``regions``."""
        for r in regions:
            require(r in REGIONS, f"regions: {r!r} is not one of {', '.join(REGIONS)}")
        pos = np.asarray(self.imgt)
        out = np.zeros(len(pos), dtype=bool)
        for r in regions:
            lo, hi = REGIONS[r]
            out |= (pos >= lo) & (pos <= hi)
        return out


def germline_file() -> Path:
    """``anarci/germlines.py`` of the installed anarci package (nothing of it is imported)."""
    spec = importlib.util.find_spec("anarci")
    require(spec is not None and bool(spec.submodule_search_locations),
            "antibody: the sequences come from the anarci package; pip install "
            "'unmask[antibody]'")
    path = Path(list(spec.submodule_search_locations)[0]) / "germlines.py"
    require(path.is_file(), f"antibody: {path} is missing; reinstall anarci")
    return path


@lru_cache(maxsize=4)
def germline_table(path: str | None = None) -> dict:
    """The ``all_germlines`` literal of ``path`` (default :func:`germline_file`):
    ``{"V"|"J": {chain: {species: {allele: IMGT-gapped string}}}}``."""
    source = Path(path) if path is not None else germline_file()
    tree = ast.parse(source.read_text())
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", None) == "all_germlines"):
            return ast.literal_eval(node.value)
    raise ValueError(f"{source} holds no all_germlines table")


def split_of(species: str, allele: str) -> str:
    """``"held_out"`` or ``"train"`` for the gene of ``allele`` (``IGHV1-2*02`` -> gene
    ``IGHV1-2``; a duplicated gene's ``D`` suffix is dropped so ``IGHV1-69D`` goes with
    ``IGHV1-69``)."""
    gene = allele.split("*")[0]
    gene = gene[:-1] if gene.endswith("D") else gene
    first = hashlib.sha256(f"{species}/{gene}".encode()).digest()[0]
    return "held_out" if first < 256 * HELD_OUT_FRACTION else "train"


def chain_from_gapped(name: str, species: str, gapped: str) -> HeavyChain:
    """A :class:`HeavyChain` from a 128-character IMGT-gapped string (``-`` for a gap)."""
    require(len(gapped) == _IMGT_LENGTH, f"{name}: {len(gapped)} IMGT positions, not 128")
    imgt = tuple(i + 1 for i, c in enumerate(gapped) if c != "-")
    return HeavyChain(name, species, gapped.replace("-", ""), imgt)


def load_heavy_chains(split: str = "train", species: tuple[str, ...] | None = None,
                      path: str | None = None) -> list[HeavyChain]:
    """The germline heavy-chain V genes of ``split`` (``train``, ``held_out`` or ``all``),
    of ``species`` (default all eight), sorted by name; each residue string once."""
    require(split in SPLITS, f"split: {split!r} is not one of {', '.join(SPLITS)}")
    table = germline_table(path)["V"]["H"]
    wanted = SPECIES if species is None else tuple(species)
    for s in wanted:
        require(s in table, f"species: {s!r} is not one of {', '.join(sorted(table))}")
    seen: set[str] = set()
    chains = []
    for s in wanted:
        for allele in sorted(table[s]):
            chain = chain_from_gapped(f"{s} {allele}", s, table[s][allele])
            if chain.sequence in seen:
                continue
            seen.add(chain.sequence)
            if split == "all" or split_of(s, allele) == split:
                chains.append(chain)
    return chains


def heavy_chains(chains, name: str = "chains") -> list[HeavyChain]:
    """``chains`` as a list of :class:`HeavyChain` records, or one line saying that is what
    is expected (:func:`load_heavy_chains` gives them)."""
    chains = list(chains) if isinstance(chains, (list, tuple)) else chains
    require(isinstance(chains, list) and all(isinstance(c, HeavyChain) for c in chains),
            f"{name}: expected a list of HeavyChain records (unmask.antibody."
            f"load_heavy_chains(...)), got {type(chains).__name__}")
    return chains


def training_corpus(chains: list[HeavyChain]) -> str:
    """The residue strings of ``chains`` joined as ``[SEP][CLS]`` (text for ``unmask mi fit
    --corpus`` with AntiBERTy: a window that spans two chains sees their boundary as the
    model's own special tokens)."""
    chains = heavy_chains(chains)
    return "[SEP][CLS]".join(c.sequence for c in chains) + "\n"
