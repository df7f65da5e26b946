"""Protein tokens: the 20 standard amino acids, MASK, and PAD.

Length is given, not generated: a protein of length L lives in a fixed-width row of
``max_length`` tokens whose first L positions are the residues (MASK where still hidden) and
whose remaining positions are PAD. PAD is an *input-only* token: it is part of the context
from the start (never masked, never predicted, never emitted by a sampler), so a decoder fills
exactly the first L positions and proteins of different lengths share one batch.
"""

from __future__ import annotations

import numpy as np
import torch

from unmask.errors import UnmaskError, require
from unmask.models.base import ResidueAlphabet
from unmask.models.base import check_padded_tokens as padded_check

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
MASK_ID = 20
PAD_ID = 21
#: what a protein model reads residue templates with (:func:`unmask.infill.infill`)
PROTEIN_RESIDUES = ResidueAlphabet(AMINO_ACIDS, MASK_ID, PAD_ID,
                                  "standard amino acids (upper case)")
VOCAB_SIZE = 22
MAX_LENGTH = 100


def check_padded_tokens(tokens: torch.Tensor, check_rest) -> None:
    """Validate (B, N) protein tokens: PAD only as a suffix, everything else checked by
    ``check_rest`` (the model's own check) with PAD read as MASK
    (:func:`unmask.models.base.check_padded_tokens` over :data:`PROTEIN_RESIDUES`)."""
    padded_check(tokens, check_rest, PROTEIN_RESIDUES)


#: generated lengths (inclusive) of the benchmark
MIN_GEN_LENGTH, MAX_GEN_LENGTH = 50, 100

_LOOKUP = np.full(256, -1, dtype=np.int64)
for _i, _a in enumerate(AMINO_ACIDS):
    _LOOKUP[ord(_a)] = _i


def encode(sequence: str) -> np.ndarray:
    """(L,) int64 tokens of an amino-acid string (upper case, the 20 standard letters)."""
    require(isinstance(sequence, str), "sequence: expected a string of the 20 standard amino "
                                       f"acids ({AMINO_ACIDS}), got {type(sequence).__name__}")
    codes = _LOOKUP[np.frombuffer(sequence.encode("ascii", "replace"), dtype=np.uint8)]
    if (codes < 0).any():
        bad = sequence[int(np.argmax(codes < 0))]
        raise UnmaskError(f"sequence: {bad!r} is not one of the 20 standard amino acids")
    return codes


def decode_tokens(tokens: torch.Tensor) -> list[str]:
    """Strings of (B, N) tokens (torch or numpy): residues as letters, MASK as '?', PAD
    dropped."""
    rows = tokens.detach().cpu().numpy() if isinstance(tokens, torch.Tensor) else np.asarray(
        tokens if isinstance(tokens, (list, tuple, np.ndarray)) else None)
    require(rows.dtype.kind in "iu" and rows.ndim == 2,
            f"tokens: expected protein token ids (B, N), got {type(tokens).__name__}")
    chars = np.array(list(AMINO_ACIDS + "?"), dtype="<U1")
    out = []
    for row in rows:
        row = row[row != PAD_ID]
        out.append("".join(chars[np.minimum(row, MASK_ID)]))
    return out


def padded_rows(sequences: list[np.ndarray], max_length: int = MAX_LENGTH) -> torch.Tensor:
    """(B, max_length) long: each token array left-aligned, PAD after it."""
    out = torch.full((len(sequences), max_length), PAD_ID, dtype=torch.long)
    for i, s in enumerate(sequences):
        require(len(s) <= max_length,
                f"sequence: length {len(s)} exceeds max_length {max_length}")
        out[i, :len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out


def generation_inputs(lengths: torch.Tensor | np.ndarray, max_length: int = MAX_LENGTH
                      ) -> torch.Tensor:
    """(B, max_length) long: MASK on the first ``lengths[b]`` positions, PAD after."""
    arr = np.asarray(lengths.cpu() if isinstance(lengths, torch.Tensor) else lengths)
    require(arr.dtype.kind in "iu" and arr.ndim == 1,
            f"lengths: expected a 1-D array of integers, got {type(lengths).__name__}"
            + (f" of {arr.dtype}" if arr.dtype != object else ""))
    lengths = torch.as_tensor(arr, dtype=torch.long)
    if lengths.numel():
        lo, hi = int(lengths.min()), int(lengths.max())
        require(lo >= 1 and hi <= max_length,
                f"lengths: must lie in [1, {max_length}], got [{lo}, {hi}]")
    pos = torch.arange(max_length)
    return torch.where(pos[None, :] < lengths[:, None], MASK_ID, PAD_ID)


def random_lengths(n: int, seed: int, low: int = MIN_GEN_LENGTH, high: int = MAX_GEN_LENGTH
                   ) -> np.ndarray:
    """(n,) lengths uniform in [low, high], a pure function of ``seed``."""
    require(n >= 1, f"n: must be >= 1, got {n}")
    require(1 <= low <= high, f"lengths: need 1 <= min {low} <= max {high}")
    return np.random.default_rng([seed, 4099]).integers(low, high + 1, n)


def sequence_lengths(tokens: torch.Tensor) -> torch.Tensor:
    """(B,) number of non-PAD positions per row."""
    return (tokens != PAD_ID).sum(1)


__all__ = ["AMINO_ACIDS", "MASK_ID", "MAX_LENGTH", "MAX_GEN_LENGTH", "MIN_GEN_LENGTH", "PAD_ID",
           "VOCAB_SIZE", "check_padded_tokens", "decode_tokens", "encode", "generation_inputs",
           "padded_rows", "random_lengths", "sequence_lengths"]
