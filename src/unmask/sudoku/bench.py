"""The Sudoku benchmark: every sampler on one puzzle set with one model, side by side."""

from __future__ import annotations

import numpy as np
import torch

from unmask.bench import add_rate_metrics
from unmask.decode import DecodeConfig
from unmask.engine import Engine
from unmask.mi.maps import peer_mask
from unmask.samplers.spec import SamplerSpec
from unmask.sudoku.solver import is_valid_solution, rounds_of_singles
from unmask.sudoku.tokens import grid_to_tokens, tokens_to_grid
from unmask.sweep import ModelRecipe, Run, Warmup, sweep

#: the published reference of arXiv 2605.20187 (same protocol: 1,000 hard puzzles, one MDM):
#: (label, NFE, solved %)
SEED_REFERENCE = [("ref sequential", 53.9, 61.6), ("ref top-7", 9.0, 36.8),
                  ("ref MI-guided γ=0.3", 15.2, 63.6), ("ref MI-guided γ=0.6", 9.7, 56.2)]

DEFAULT_SPECS = [
    "confidence", "entropy", "margin",
    "topk:k=3", "topk:k=5", "topk:k=7",
    "eb:gamma=0.01,order=confidence", "eb:gamma=0.03,order=confidence",
    "eb:gamma=0.1,order=confidence",
    "eb:gamma=0.3,order=confidence", "eb:gamma=1.0,order=confidence",
    "eb:gamma=0.1", "eb:gamma=1.0",
    "threshold:tau=0.99", "threshold:tau=0.9", "threshold:tau=0.7",
    "mi-guided:gamma=0.1,order=confidence", "mi-guided:gamma=0.3,order=confidence",
    "mi-guided:gamma=0.6,order=confidence", "mi-guided:gamma=1.0,order=confidence",
    "mi-guided:gamma=0.3", "mi-guided:gamma=0.6",
    # verified passes (docs/verify.md)
    "mi-guided:gamma=1.0,order=confidence+verify=0.002",
    "eb:gamma=1.0,order=confidence+verify=0.002",
    "info-gain", "lookum",
]


def bench_sudoku(model, puzzles: np.ndarray, entries: list[SamplerSpec], *, seed: int = 0,
                 batch_size: int = 1000, config: DecodeConfig | None = None,
                 corrector_hooks=(), progress=None, engine: Engine | None = None,
                 recipe: ModelRecipe | None = None, cache=None) -> list[dict]:
    """Solve ``puzzles`` (P, 81) with each entry (decode settings ``config``, default argmax;
    entries marked ``corrected`` with ``corrector_hooks``: :func:`unmask.hooks.corrector_hooks`);
    one result dict per entry.

    The sweep is cut into shards of ``batch_size`` puzzles per entry, decoded on ``engine``
    (default: this process; puzzle p decodes with seed ``seed + p`` whatever the shard): see
    :func:`unmask.sweep.sweep`, whose ``recipe`` tells a Ray engine's workers how to load
    ``model`` and the corrector, and whose ``cache`` folder keeps finished shards.

    Keys: label, name, corrected (decoded with the corrector), verified (every pass's set
    verified), params, solved (share),
    solved_each ('0'/'1' per puzzle, in order), nfe (mean model calls), steps (mean decoding
    passes: equal to nfe except for samplers that call the model beyond the loop's pass, such
    as lookahead and the probing oracle), sequences (mean sequences evaluated),
    cumulative_entropy (mean nats), remasked (mean tokens the corrector sent back), rejected
    (mean positions verification held back), wall_s (decode seconds, summed over shards),
    puzzles_per_s, n_items, revealed (mean tokens decoded per puzzle), and
    :func:`unmask.bench.add_rate_metrics`'s tokens_per_pass, sequences_per_token,
    wall_per_solved.
    """

    x = grid_to_tokens(puzzles)
    runs = [Run(entry, x, config or DecodeConfig(), seed) for entry in entries]
    # one untimed decode first, so one-off set-up costs are not charged to the first sampler
    results = sweep(runs, model, batch_size=batch_size, hooks=corrector_hooks, engine=engine,
                    recipe=recipe, warmup=Warmup(x[:2]), progress=progress,
                    cache=cache)
    rows: list[dict] = []
    for entry, (res, wall) in zip(entries, results, strict=True):
        solved = is_valid_solution(tokens_to_grid(res.tokens), puzzles)
        rows.append({"label": entry.label, "name": entry.name, "corrected": entry.corrected,
                     "verified": entry.verified,
                     "verify_tolerance": 1.0 if entry.verify is None else entry.verify,
                     "params": {k: v for k, v in entry.params.items()
                                if isinstance(v, (int, float, str, bool))},
                     "solved": float(solved.mean()),
                     "solved_each": "".join("1" if v else "0" for v in solved),
                     "nfe": float(res.nfe.double().mean()),
                     "steps": float(res.steps.double().mean()),
                     "sequences": float(res.sequences.double().mean()),
                     "cumulative_entropy": float(res.cumulative_entropy.mean()),
                     **{k: float(res.stats[k].double().mean()) if k in res.stats else 0.0
                        for k in ("remasked", "rejected")},
                     "same_pass_clash": float(same_pass_clashes(res.tokens, res.reveal_step)
                                              .gt(0).double().mean()),
                     "wall_s": wall, "puzzles_per_s": len(puzzles) / wall,
                     "n_items": len(puzzles),
                     "revealed": float((x == model.mask_id).sum(1).double().mean())})
    add_rate_metrics(rows)
    return rows


def same_pass_clashes(tokens: torch.Tensor, reveal_step: torch.Tensor) -> torch.Tensor:
    """(P,) per decoded board (tokens (P, 81), reveal_step (P, 81), -1 for clues): the pairs
    of row/column/box peers revealed in the same pass with the same digit. Such a pair breaks
    the board whatever else happens; a sequential decoder never makes one (it could only
    repeat a digit across passes, seeing the first), so these count the errors that come
    from revealing dependent cells together, the failure MI guidance is meant to prevent."""

    peers = peer_mask().to(tokens.device).triu(1)
    same = (tokens[:, :, None] == tokens[:, None, :]) & \
        (reveal_step[:, :, None] == reveal_step[:, None, :]) & (reveal_step >= 0)[:, :, None]
    return (same & peers).sum((1, 2))


def singles_reference(puzzles: np.ndarray) -> dict:
    """Rounds of parallel naked/hidden singles a logic solver needs (the physical reference
    for parallel decoding): share of puzzles singles can finish and their mean rounds."""
    rounds = rounds_of_singles(puzzles)
    ok = rounds >= 0
    blanks = (puzzles == 0).sum(1)
    return {"singles_share": float(ok.mean()),
            "mean_rounds": float(rounds[ok].mean()) if ok.any() else None,
            "mean_blanks": float(blanks.mean())}
