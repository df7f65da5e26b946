"""The protein data: pyhmmer's bundled proteome, a near-duplicate-aware train/held-out split,
training crops, and HMMER's background composition.

Split: proteins that share many 5-mers are near-duplicates (paralogs, repeated genes); they
are linked, and whole connected groups go to one side, so the held-out set holds no close
copy of a training protein. Two proteins are linked when the 5-mers they share are at least
``link_threshold`` (default 0.1) of the distinct 5-mers of the shorter one: unrelated proteins
share almost none (20^5 = 3.2M possible 5-mers), while a 5-mer survives a point mutation rate
m with probability (1 - m)^5, so 0.1 links pairs above roughly 60% identity.

Training examples are crops: length L uniform in [50, 100] (``min(L, protein length)``), a
protein drawn with probability proportional to its length and a uniform start, so every
training residue is about equally likely. The rest of the row is PAD.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from unmask.errors import UnmaskError, require
from unmask.io import parse_json
from unmask.protein.fasta import FastaRecord, read_fasta
from unmask.protein.tokens import (
    AMINO_ACIDS,
    MASK_ID,
    MAX_GEN_LENGTH,
    MAX_LENGTH,
    MIN_GEN_LENGTH,
    PAD_ID,
    encode,
)
from unmask.training.mdm import mask_batch

PROTEOME_FILE = "938293.PRJEB85.HG003687.faa"
KMER = 5


def default_proteome_path() -> Path:
    """The bacterial proteome shipped in pyhmmer's test data (2,100 proteins)."""
    try:
        import pyhmmer
    except ImportError:
        raise UnmaskError("fasta: the default proteome comes with pyhmmer; "
                          "pip install pyhmmer (the 'protein' extra) or pass a FASTA file"
                          ) from None
    path = Path(pyhmmer.__file__).parent / "tests" / "data" / "seqs" / PROTEOME_FILE
    if not path.is_file():
        raise UnmaskError(f"fasta: this pyhmmer build does not ship {PROTEOME_FILE}; "
                          "pass a FASTA file")
    return path


def background_composition() -> np.ndarray:
    """(20,) HMMER's background amino-acid frequencies (pyhmmer.plan7.Background), in the
    order of :data:`AMINO_ACIDS`, summing to 1."""
    from pyhmmer.easel import Alphabet
    from pyhmmer.plan7 import Background

    alphabet = Alphabet.amino()
    freqs = list(Background(alphabet).residue_frequencies)
    symbols = alphabet.symbols[:len(freqs)]
    out = np.array([freqs[symbols.index(a)] for a in AMINO_ACIDS], dtype=np.float64)
    return out / out.sum()


@dataclass
class CleanedProteins:
    """Records that passed :func:`clean_records` and how many were skipped, by reason."""

    names: list[str]
    sequences: list[np.ndarray]
    skipped: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        skips = ", ".join(f"{v} {k}" for k, v in self.skipped.items() if v) or "none"
        return f"{len(self.sequences)} proteins kept; skipped: {skips}"


def clean_records(records: list[FastaRecord], min_length: int = 20,
                  max_length: int | None = None) -> CleanedProteins:
    """Keep records that are proteins over the 20 standard amino acids.

    Letters are upper-cased and one trailing '*' (a stop codon, as written by gene callers) is
    dropped. Skipped, with a count per reason: 'empty' (no residues), 'nonstandard' (any other
    letter: X, B, Z, U, O, gaps, an internal '*'), 'short' (< min_length) and 'long'
    (> max_length, when given).
    """
    require(min_length >= 1, f"min_length: must be >= 1, got {min_length}")
    skipped = {"empty": 0, "nonstandard": 0, "short": 0, "long": 0}
    names, seqs = [], []
    for r in records:
        s = r.sequence.upper()
        if s.endswith("*"):
            s = s[:-1]
        if not s:
            skipped["empty"] += 1
            continue
        try:
            tokens = encode(s)
        except UnmaskError:
            skipped["nonstandard"] += 1
            continue
        if len(tokens) < min_length:
            skipped["short"] += 1
        elif max_length is not None and len(tokens) > max_length:
            skipped["long"] += 1
        else:
            names.append(r.name)
            seqs.append(tokens)
    return CleanedProteins(names, seqs, skipped)


def kmer_codes(tokens: np.ndarray, k: int = KMER) -> np.ndarray:
    """(distinct,) int64 codes of the k-mers of one token array (base-20 numbers)."""
    if len(tokens) < k:
        return np.zeros(0, dtype=np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(tokens.astype(np.int64), k)
    return np.unique(windows @ (20 ** np.arange(k - 1, -1, -1, dtype=np.int64)))


def near_duplicate_groups(sequences: list[np.ndarray], link_threshold: float = 0.1,
                          k: int = KMER) -> np.ndarray:
    """(P,) group id per protein: connected components of the shared-k-mer links."""
    p = len(sequences)
    codes = [kmer_codes(s, k) for s in sequences]
    counts = np.array([len(c) for c in codes], dtype=np.float64)
    shared = np.zeros((p, p), dtype=np.int64)  # distinct k-mers shared by each pair
    if p:
        code = np.concatenate(codes)
        owner = np.repeat(np.arange(p), counts.astype(np.int64))
        order = np.argsort(code, kind="stable")
        code, owner = code[order], owner[order]
        starts = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
        sizes = np.diff(np.r_[starts, len(code)])
        # k-mers held by g proteins, g at a time: a (groups, g) table of owners gives all pairs
        for g in np.unique(sizes[sizes >= 2]):
            members = owner[starts[sizes == g][:, None] + np.arange(g)]
            i, j = np.triu_indices(g, 1)
            np.add.at(shared, (members[:, i].ravel(), members[:, j].ravel()), 1)
        shared = shared + shared.T
    shorter = np.maximum(np.minimum(counts[:, None], counts[None, :]), 1.0)
    linked = shared / shorter >= link_threshold
    np.fill_diagonal(linked, True)
    labels = np.arange(p)
    while True:  # connected components: every protein takes its smallest linked label
        new = np.where(linked, labels[None, :], p).min(1)
        if np.array_equal(new, labels):
            return labels
        labels = new


@dataclass
class ProteinSplit:
    """Train and held-out proteins (token arrays), never sharing a near-duplicate group."""

    train: list[np.ndarray]
    heldout: list[np.ndarray]
    train_names: list[str]
    heldout_names: list[str]
    source: str = ""
    skipped: dict[str, int] = field(default_factory=dict)

    def train_sampler(self) -> CropSampler:
        return CropSampler(self.train)

    def heldout_sampler(self) -> CropSampler:
        return CropSampler(self.heldout)


def split_proteins(cleaned: CleanedProteins, heldout_fraction: float = 0.1, seed: int = 0,
                   link_threshold: float = 0.1, source: str = "") -> ProteinSplit:
    """Whole near-duplicate groups, in a seeded random order, go to the held-out side until it
    holds ``heldout_fraction`` of the proteins; the rest is training data."""
    require(0.0 < heldout_fraction < 1.0,
            f"heldout_fraction: must be in (0, 1), got {heldout_fraction}")
    n = len(cleaned.sequences)
    require(n >= 2, f"fasta: need at least 2 usable proteins to split, got {n}")
    groups = near_duplicate_groups(cleaned.sequences, link_threshold)
    order = np.random.default_rng([seed, 2100]).permutation(np.unique(groups))
    size = np.bincount(groups, minlength=n)
    heldout_groups, total = set(), 0
    for g in order:
        if total >= heldout_fraction * n:
            break
        heldout_groups.add(int(g))
        total += int(size[g])
    held = np.isin(groups, list(heldout_groups))
    require(bool((~held).any()), "fasta: every protein fell into one near-duplicate group")
    pick = lambda mask, xs: [x for x, m in zip(xs, mask, strict=True) if m]  # noqa: E731
    return ProteinSplit(pick(~held, cleaned.sequences), pick(held, cleaned.sequences),
                        pick(~held, cleaned.names), pick(held, cleaned.names), source,
                        dict(cleaned.skipped))


@functools.lru_cache(maxsize=4)
def load_split(path: str | None = None, heldout_fraction: float = 0.1, seed: int = 0
               ) -> ProteinSplit:
    """Read, clean and split a FASTA file (default: pyhmmer's proteome)."""
    path = Path(path) if path else default_proteome_path()
    cleaned = clean_records(read_fasta(path))
    return split_proteins(cleaned, heldout_fraction, seed, source=str(path))


class CropSampler:
    """Random crops of a set of proteins, as padded rows of tokens."""

    def __init__(self, sequences: list[np.ndarray]):
        require(len(sequences) >= 1, "proteins: the set is empty")
        self.lengths = np.array([len(s) for s in sequences], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)[:-1]])
        self.flat = np.concatenate(sequences).astype(np.int64)
        self.weights = self.lengths / self.lengths.sum()

    def crops(self, lengths: np.ndarray, rng: np.random.Generator,
              max_length: int = MAX_LENGTH) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens (B, max_length) with PAD after each crop, crop lengths (B,)): crop b has
        length min(lengths[b], its protein's length)."""
        b = len(lengths)
        prot = rng.choice(len(self.lengths), size=b, p=self.weights)
        crop = np.minimum(lengths, self.lengths[prot])
        start = np.floor(rng.uniform(size=b) * (self.lengths[prot] - crop + 1)).astype(np.int64)
        pos = np.arange(max_length)
        inside = pos[None, :] < crop[:, None]
        idx = np.where(inside, self.offsets[prot, None] + start[:, None] + pos[None, :], 0)
        tokens = np.where(inside, self.flat[idx], PAD_ID)
        return torch.from_numpy(tokens), torch.from_numpy(crop)

    def random_crops(self, n: int, seed: int, low: int = MIN_GEN_LENGTH,
                     high: int = MAX_GEN_LENGTH) -> torch.Tensor:
        """(n, MAX_LENGTH) crops with lengths uniform in [low, high]; pure function of seed."""
        rng = np.random.default_rng([seed, 17])
        return self.crops(rng.integers(low, high + 1, n), rng)[0]


def model_split(fasta: str | None, heldout_fraction: float | None, split_seed: int | None,
                model_dir: str | Path | None = None):
    """The train/held-out split of ``fasta`` a model was trained on: the fraction and seed
    given, else those of the model folder's ``split.json``, else 0.1 and 0."""
    import json

    recorded = {}
    if model_dir is not None and (Path(model_dir) / "split.json").is_file():
        path = Path(model_dir) / "split.json"
        try:
            recorded = parse_json(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise UnmaskError(f"{path}: not a JSON file ({e})") from None
        if not isinstance(recorded, dict):
            raise UnmaskError(f"{path}: expected a JSON object")
    fraction = (heldout_fraction if heldout_fraction is not None
                else recorded.get("heldout_fraction", 0.1))
    seed = split_seed if split_seed is not None else recorded.get("split_seed", 0)
    return load_split(fasta, float(fraction), int(seed))


def training_batch(sampler: CropSampler, step: int, batch_size: int, seed: int = 0
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(inputs, targets, loss_mask), each (B, MAX_LENGTH), a pure function of (seed, step).

    Each crop's residues are masked with one ratio drawn uniformly in (0, 1] (at least one
    masked); PAD is never masked, so the model learns every conditional it is later asked for
    with the length given.
    """
    rng = np.random.default_rng([seed, step])
    targets, crop = sampler.crops(rng.integers(MIN_GEN_LENGTH, MAX_GEN_LENGTH + 1, batch_size),
                                  rng)
    ratio = 1.0 - rng.uniform(0.0, 1.0, (batch_size, 1))
    draw = rng.uniform(0.0, 1.0, (batch_size, MAX_LENGTH))
    inside = np.arange(MAX_LENGTH)[None, :] < crop.numpy()[:, None]
    inputs, loss_mask = mask_batch(targets, ratio, draw, MASK_ID, inside)
    return inputs, targets, loss_mask


#: keeps label contexts apart from every other random draw of this module
_LABEL_SALT = 0x9E0_7E1


def label_contexts(seed: int, start: int, count: int, mask_ratio: tuple[float, float],
                   split: ProteinSplit | None = None) -> torch.Tensor:
    """(count, MAX_LENGTH) contexts for MI labels: crops of *held-out* proteins (the MDM never
    trained on them), lengths uniform in [50, 100], round(r * L) residues masked (at least 1)
    with r uniform in ``mask_ratio``, PAD after the crop. Context c depends only on
    (seed, c, mask_ratio), so label shards can be computed in any order."""
    lo, hi = mask_ratio
    require(0.0 <= lo < hi <= 1.0, f"mask_ratio: expected 0 <= lo < hi <= 1, got {mask_ratio}")
    crops = (split or load_split()).heldout_sampler()
    out = torch.empty(count, MAX_LENGTH, dtype=torch.long)
    for k in range(count):  # one small generator per context: contexts independent of shards
        rng = np.random.default_rng([_LABEL_SALT, seed, start + k])
        tokens, crop = crops.crops(rng.integers(MIN_GEN_LENGTH, MAX_GEN_LENGTH + 1, 1), rng)
        n = int(crop[0])
        n_masked = min(n, max(1, round((lo + (hi - lo) * rng.random()) * n)))
        hidden = np.argsort(rng.random(n), kind="stable")[:n_masked]
        tokens[0, torch.from_numpy(hidden)] = MASK_ID
        out[k] = tokens[0]
    return out


def split_record(split: ProteinSplit, fraction: float, seed: int) -> dict:
    """What a trained model's ``split.json`` records of its train/held-out ``split`` (made with
    held-out ``fraction`` and ``seed``), which :func:`model_split` reads back."""
    return {"source": Path(split.source).name, "heldout_fraction": fraction, "split_seed": seed,
            "train_proteins": len(split.train), "heldout_proteins": len(split.heldout),
            "skipped": split.skipped, "heldout_names": split.heldout_names}
