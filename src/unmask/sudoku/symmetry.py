"""The Sudoku symmetry group acting on batches of grids.

An element is a cell permutation built from a band permutation, row permutations within each
band, a stack permutation, column permutations within each stack and an optional transpose,
together with a relabelling of the digits 1..9. Every element maps valid grids to valid grids
and a puzzle's unique solution to the unique solution of the transformed puzzle; blanks (0)
stay blank. Batched: row b of a (B, 81) array gets its own independently drawn element.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from unmask.sudoku.tokens import MASK_ID
from unmask.validation import is_int


def as_numpy_rng(rng) -> np.random.Generator:
    """A numpy Generator from a numpy Generator, an int seed or a torch.Generator (which then
    advances by one draw)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, torch.Generator):
        seed = int(torch.randint(0, 2**62, (1,), generator=rng).item())
        return np.random.default_rng(seed)
    if is_int(rng):
        return np.random.default_rng(int(rng))
    raise TypeError(f"rng must be a numpy Generator, torch.Generator or int, got {type(rng)}")


def _random_perms(rng: np.random.Generator, shape: tuple[int, ...], k: int) -> np.ndarray:
    """Independent uniform permutations of range(k), shape (*shape, k) int64."""
    return np.argsort(rng.random((*shape, k)), axis=-1)


def _line_order(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, 9) new-to-old line index: a permutation of the 3 bands (or stacks) and of the 3 lines
    within each."""
    blocks = _random_perms(rng, (n,), 3)  # (n, 3)
    within = _random_perms(rng, (n, 3), 3)  # (n, 3, 3)
    return (3 * blocks[:, :, None] + within).reshape(n, 9)


@dataclass(frozen=True)
class Symmetry:
    """B group elements. Applying row b to a grid x (81,) gives
    ``y[i] = digit_map[b, x[cell_perm[b, i]]]``.

    cell_perm: (B, 81) int64, new cell -> old cell.
    digit_map: (B, 10) int64, old digit -> new digit, with digit_map[:, 0] = 0 (blank).
    """

    cell_perm: np.ndarray
    digit_map: np.ndarray

    def __len__(self) -> int:
        return self.cell_perm.shape[0]

    @staticmethod
    def identity(n: int) -> Symmetry:
        return Symmetry(
            np.tile(np.arange(81, dtype=np.int64), (n, 1)),
            np.tile(np.arange(10, dtype=np.int64), (n, 1)),
        )

    def compose(self, then: Symmetry) -> Symmetry:
        """The element "apply self, then ``then``" (row by row)."""
        return Symmetry(
            np.take_along_axis(self.cell_perm, then.cell_perm, axis=1),
            np.take_along_axis(then.digit_map, self.digit_map, axis=1),
        )

    def inverse(self) -> Symmetry:
        return Symmetry(np.argsort(self.cell_perm, axis=1), np.argsort(self.digit_map, axis=1))

    def value_map(self, tokens: bool) -> np.ndarray:
        """(B, 10) map of stored values: digits 0..9 for grids; tokens (digit - 1, MASK_ID)."""
        if not tokens:
            return self.digit_map
        token_map = np.empty_like(self.digit_map)
        token_map[:, :9] = self.digit_map[:, 1:] - 1
        token_map[:, MASK_ID] = MASK_ID
        return token_map

    def apply(self, x, tokens: bool = False):
        """Transform x (B, 81) or (81,) (with B = 1), numpy or torch; returns the same type,
        dtype, shape and device. ``tokens=True`` reads x as model tokens (digit - 1, MASK_ID
        for blanks) instead of grids (0 for blanks)."""
        value_map = self.value_map(tokens)
        if isinstance(x, torch.Tensor):
            single = x.dim() == 1
            xt = x[None] if single else x
            self._check(tuple(xt.shape))
            perm = torch.from_numpy(self.cell_perm).to(xt.device)
            vmap = torch.from_numpy(value_map).to(xt.device)
            out = torch.gather(vmap, 1, torch.gather(xt, 1, perm).long()).to(x.dtype)
            return out[0] if single else out
        arr = np.asarray(x)
        single = arr.ndim == 1
        xa = arr[None] if single else arr
        self._check(xa.shape)
        moved = np.take_along_axis(xa, self.cell_perm, axis=1).astype(np.int64)
        out = np.take_along_axis(value_map, moved, axis=1).astype(arr.dtype)
        return out[0] if single else out

    def _check(self, shape: tuple[int, ...]) -> None:
        if len(shape) != 2 or shape[1] != 81 or shape[0] != len(self):
            raise ValueError(f"expected an array of shape ({len(self)}, 81), got {shape}")


def sample_symmetry(n: int, rng) -> Symmetry:
    """n independent uniformly random group elements (transpose with probability 1/2)."""
    rng = as_numpy_rng(rng)
    rows = _line_order(rng, n)
    cols = _line_order(rng, n)
    src = rows[:, :, None] * 9 + cols[:, None, :]  # (n, 9, 9): new (r, c) <- old cell
    transpose = rng.random(n) < 0.5
    src[transpose] = src[transpose].transpose(0, 2, 1)
    digit_map = np.zeros((n, 10), dtype=np.int64)
    digit_map[:, 1:] = _random_perms(rng, (n,), 9) + 1
    return Symmetry(src.reshape(n, 81), digit_map)


def random_symmetry(grids, rng, tokens: bool = False):
    """Apply an independent random group element to each row of grids (B, 81)."""
    n = 1 if np.ndim(grids) == 1 else len(grids)
    return sample_symmetry(n, rng).apply(grids, tokens=tokens)


def augment(rng, *arrays, tokens: bool = False):
    """Apply the same random element per row to every array (each (B, 81), e.g. puzzles and
    solutions), so clues stay consistent with solutions. Returns the transformed array if one
    was given, else a tuple in the same order."""
    if not arrays:
        raise ValueError("augment needs at least one array")
    n = 1 if np.ndim(arrays[0]) == 1 else len(arrays[0])
    sym = sample_symmetry(n, rng)
    out = tuple(sym.apply(a, tokens=tokens) for a in arrays)
    return out[0] if len(out) == 1 else out
