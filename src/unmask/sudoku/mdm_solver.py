"""Solving Sudoku puzzles with a masked diffusion model: puzzles decoded batch by batch and the
grids checked (:mod:`unmask.sudoku.solver` is the exact, search-based solver)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from unmask.decode import DecodeConfig, decode
from unmask.hooks import corrector_hooks
from unmask.progress import progress_bar
from unmask.samplers.verified import Verified
from unmask.sudoku.solver import is_valid_solution
from unmask.sudoku.tokens import grid_to_tokens, tokens_to_grid


def solve_batches(model, puzzles, sampler, config: DecodeConfig, *, seed: int = 0,
                  batch_size: int = 500, hooks=()
                  ) -> Iterator[tuple[int, object, object, object]]:
    """Decode puzzles (P, 81) int8 batch by batch with decode ``hooks`` (e.g.
    :func:`unmask.hooks.corrector_hooks`); yields (first index, grids (b, 81) int8, solved (b,)
    bool, nfe (b,)) as each batch finishes."""

    for i in range(0, len(puzzles), batch_size):
        chunk = puzzles[i:i + batch_size]
        res = decode(model, grid_to_tokens(chunk), sampler, config, seed=seed + i,
                     hooks=hooks)
        grids = tokens_to_grid(res.tokens)
        yield i, grids, is_valid_solution(grids, chunk), res.nfe.numpy()


def solve_puzzles(model, puzzles, sampler, *, temperature=0.0, seed=0, batch_size=500,
                  show_progress=False, corrector=None, remask_threshold=None, verify=False,
                  verify_tolerance=1.0):
    """Decode puzzles (P, 81) int8 -> (grids (P, 81) int8, solved (P,), nfe (P,)), with an
    optional corrector (:func:`unmask.hooks.corrector_hooks`; ``remask_threshold`` None: its
    default) or verification (:class:`unmask.samplers.verified.Verified`)."""
    cfg = DecodeConfig(temperature=temperature)
    if verify:
        sampler = Verified(sampler, tolerance=verify_tolerance)
    threshold = {} if remask_threshold is None else {"threshold": remask_threshold}
    hooks = () if corrector is None else corrector_hooks(corrector, **threshold)
    grids, solved, nfe = [], [], []
    with progress_bar(len(puzzles), "solving", enabled=show_progress) as update:
        for i, g, s, n in solve_batches(model, puzzles, sampler, cfg, seed=seed,
                                        batch_size=batch_size, hooks=hooks):
            grids.append(g)
            solved.append(s)
            nfe.append(n)
            update(i + len(g))
    if not grids:
        return np.zeros((0, 81), np.int8), np.zeros(0, bool), np.zeros(0, np.int64)
    return np.concatenate(grids), np.concatenate(solved), np.concatenate(nfe)
