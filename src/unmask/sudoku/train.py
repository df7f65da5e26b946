"""Training data and evaluation for the Sudoku MDM.

Each training sample is a solution grid with some cells masked, in one of two ways:
- puzzle-shaped (``puzzle_fraction`` of the batch): a minimal unique-solution puzzle's blanks,
  of which a random share (uniform in (0, 1]) stays masked. These are exactly the states a
  decoder visits between a puzzle and its solution.
- random: every cell masked with a probability drawn uniformly in (0, 1].
Grids come from a pool of generated puzzles under a fresh random symmetry per sample, so the
model never sees the same grid twice in practice; the pool's grids come from
:func:`~unmask.sudoku.datasets.training_grids`, which never returns a test-set solution.

A third kind, for fine-tuning (:class:`DecoderStatePool`): the states a decoder actually
visited (the cells still masked are the ones it found hardest, not a random share), with the
tokens it got wrong taken back to MASK.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from unmask.corrector import load_decoded_states
from unmask.decode import decode
from unmask.errors import UnmaskError
from unmask.io import atomic_path
from unmask.models.transformer import MDMTransformer, TransformerConfig
from unmask.samplers import make_sampler
from unmask.sudoku.datasets import training_grids
from unmask.sudoku.solver import is_valid_solution, make_puzzles
from unmask.sudoku.symmetry import augment
from unmask.sudoku.tokens import MASK_ID, VOCAB_SIZE, grid_to_tokens, tokens_to_grid
from unmask.training.mdm import BatchFn, mask_batch


def sudoku_model_config(**overrides) -> TransformerConfig:
    """The shipped Sudoku architecture: 8 layers, d=128, grid embeddings, relation bias."""
    base = dict(vocab_size=VOCAB_SIZE, mask_id=MASK_ID, max_length=81, d_model=128,
                n_layers=8, n_heads=4, d_ff=512, position="grid", grid_side=9, grid_box=3,
                relation_bias=True, task="sudoku")
    base.update(overrides)
    return TransformerConfig(**base)


def _pool_digest(puzzles: np.ndarray, solutions: np.ndarray) -> bytes:
    h = hashlib.sha256()
    for a in (puzzles, solutions):
        h.update(f"{a.dtype}{a.shape}".encode() + np.ascontiguousarray(a).tobytes())
    return h.digest()


def _read_pool(path: Path, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(puzzles, solutions) of a kept pool file, or None (generated again) unless it loads
    without pickles, holds (n, 81) grids of its own sha256, valid solutions and puzzles that
    keep their clues."""
    try:
        with np.load(path, allow_pickle=False) as data:
            puzzles, solutions, digest = data["puzzles"], data["solutions"], data["sha256"]
    except Exception:  # noqa: BLE001 - any unreadable cache file is generated again
        return None
    if (puzzles.shape != (n, 81) or solutions.shape != (n, 81)
            or digest.tobytes() != _pool_digest(puzzles, solutions)
            or not is_valid_solution(solutions, puzzles).all()):
        return None
    return puzzles, solutions


@dataclass
class SudokuPool:
    """Puzzles (P, 81) and their solutions (P, 81), int8, 0 = blank."""

    puzzles: np.ndarray
    solutions: np.ndarray

    @classmethod
    def generate(cls, n: int, seed: int, cache_dir: str | Path | None = None) -> SudokuPool:
        """Generate ``n`` minimal puzzles on grids that are no test-set solution (cached by
        (n, seed) in ``cache_dir``)."""
        path = Path(cache_dir) / f"sudoku-pool-{n}-{seed}.npz" if cache_dir else None
        kept = _read_pool(path, n) if path is not None and path.is_file() else None
        if kept is not None:
            return cls(*kept)
        solutions = training_grids(n, seed=seed)
        puzzles = make_puzzles(solutions, seed=seed + 1)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as tmp, open(tmp, "wb") as f:
                np.savez_compressed(f, puzzles=puzzles, solutions=solutions,
                                    sha256=np.frombuffer(_pool_digest(puzzles, solutions),
                                                         np.uint8))
        return cls(puzzles, solutions)

    def batch(self, step: int, batch_size: int, seed: int = 0, puzzle_fraction: float = 0.5
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(inputs, targets, loss_mask), each (B, 81), a pure function of (seed, step)."""
        rng = np.random.default_rng([seed, step])
        idx = rng.integers(0, len(self.solutions), batch_size)
        puzzles, solutions = augment(rng, self.puzzles[idx], self.solutions[idx])
        ratio = 1.0 - rng.uniform(0.0, 1.0, (batch_size, 1))  # in (0, 1]
        draw = rng.uniform(0.0, 1.0, (batch_size, 81))
        from_puzzle = rng.uniform(0.0, 1.0, (batch_size, 1)) < puzzle_fraction
        # a row drawn from its puzzle masks only the puzzle's blanks
        eligible = np.where(from_puzzle, puzzles == 0, True)
        targets = grid_to_tokens(solutions)
        inputs, loss_mask = mask_batch(targets, ratio, draw, MASK_ID, eligible)
        return inputs, targets, loss_mask


@dataclass
class DecoderStatePool:
    """States a decoder visited (M, 81) in model tokens, with wrong tokens back at MASK, and
    their solutions (M, 81) in tokens: the training data of a fine-tune on the decoder's own
    state distribution."""

    states: np.ndarray
    solutions: np.ndarray

    @classmethod
    def from_decoded(cls, tokens: torch.Tensor, wrong: torch.Tensor, groups: torch.Tensor,
                     solutions: torch.Tensor) -> DecoderStatePool:
        """From :class:`~unmask.corrector.DecodedStates` fields (tokens, wrong, groups: each
        state's puzzle) and the puzzles' solutions (P, 81) in tokens. States with nothing
        left to learn (no MASK once the wrong tokens are back) are dropped."""
        clean = tokens.masked_fill(wrong, MASK_ID)
        keep = (clean == MASK_ID).any(1)
        return cls(clean[keep].numpy().astype(np.int8),
                   solutions[groups[keep]].numpy().astype(np.int8))

    @classmethod
    def load(cls, path: str | Path) -> DecoderStatePool:
        """From the states file ``unmask corrector train`` keeps (OUT/states.pt); the
        solutions are regenerated from the puzzle pool it records."""
        key, st = load_decoded_states(path, "--decoder-states", digest_required=False)
        try:
            n, seed = int(key["puzzles"]), int(key["pool_seed"])
        except (KeyError, TypeError, ValueError) as e:
            raise UnmaskError(f"--decoder-states: {path} is not a states file of `unmask "
                              f"corrector train` ({type(e).__name__})") from None
        sols = grid_to_tokens(SudokuPool.generate(n, seed=seed).solutions)
        return cls.from_decoded(st.tokens, st.wrong, st.groups, sols)

    def batch(self, step: int, batch_size: int, seed: int = 0
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(inputs, targets, loss_mask), each (B, 81), a pure function of (seed, step): a
        state under a fresh random symmetry; the loss is on its masked cells."""
        rng = np.random.default_rng([seed, step, 1])
        idx = rng.integers(0, len(self.states), batch_size)
        x, y = augment(rng, self.states[idx], self.solutions[idx], tokens=True)
        inputs, targets = torch.from_numpy(x).long(), torch.from_numpy(y).long()
        return inputs, targets, inputs == MASK_ID


def mixed_batch(first, second, fraction: float) -> BatchFn:
    """A batch function drawing ``round(fraction * B)`` samples of each batch from
    ``second`` and the rest from ``first`` (both batch functions)."""

    def batch(step: int, batch_size: int):
        n = int(round(batch_size * fraction))
        parts = [f(step, b) for f, b in ((first, batch_size - n), (second, n)) if b]
        return tuple(torch.cat(ts) for ts in zip(*parts, strict=True))

    return batch


def solve_rate(model: MDMTransformer, puzzles: np.ndarray, sampler="confidence",
               batch_size: int = 500, **sampler_params) -> dict:
    """Decode ``puzzles`` (P, 81) and return solved share and mean NFE."""
    solved, nfe = [], []
    s = make_sampler(sampler, **sampler_params) if isinstance(sampler, str) else sampler
    for i in range(0, len(puzzles), batch_size):
        chunk = puzzles[i:i + batch_size]
        res = decode(model, grid_to_tokens(chunk), s)
        solved.append(is_valid_solution(tokens_to_grid(res.tokens), chunk))
        nfe.append(res.nfe.numpy())
    solved_all, nfe_all = np.concatenate(solved), np.concatenate(nfe)
    return {"accuracy": float(solved_all.mean()), "nfe": float(nfe_all.mean())}
