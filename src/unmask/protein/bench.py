"""The protein benchmark: proteins of given lengths generated from all-masked rows by every
sampler with one model, scored by composition divergences against held-out proteins."""

from __future__ import annotations

import numpy as np
import torch

from unmask.bench import add_rate_metrics
from unmask.decode import DecodeConfig
from unmask.engine import Engine
from unmask.errors import require
from unmask.protein.data import ProteinSplit, background_composition
from unmask.protein.metrics import generation_metrics
from unmask.protein.tokens import (
    MAX_GEN_LENGTH,
    MIN_GEN_LENGTH,
    generation_inputs,
    random_lengths,
)
from unmask.samplers.spec import SamplerSpec
from unmask.sweep import ModelRecipe, Run, Warmup, sweep

#: the published reference (ESM-C, 500 proteins of length 50-100 against 500 UniRef50
#: references): (label, mean NFE, JSD)
SEED_REFERENCE = [("ref sequential", 74.8, 0.093), ("ref top-12", 6.2, 0.218),
                  ("ref MI-guided γ=4", 10.0, 0.174)]

#: protein positions carry 2-3 nats each, so entropy budgets are in units of ~2.8 nats per
#: extra position and confidence thresholds sit far below Sudoku's; 'uniform' (random order)
#: is plain ancestral sampling, free of any ordering bias
DEFAULT_SPECS = [
    "confidence", "entropy", "uniform",
    "topk:k=4", "topk:k=12",
    "eb:gamma=3", "eb:gamma=10", "eb:gamma=30", "eb:gamma=10,order=confidence",
    "threshold:tau=0.12", "threshold:tau=0.1",
]


def bench_protein(model, split: ProteinSplit, entries: list[SamplerSpec], *, n: int = 500,
                  seed: int = 0, temperature: float = 1.0, min_length: int = MIN_GEN_LENGTH,
                  max_length: int = MAX_GEN_LENGTH, batch_size: int = 500,
                  natural: bool = True, progress=None, engine: Engine | None = None,
                  recipe: ModelRecipe | None = None, cache=None
                  ) -> tuple[list[dict], torch.Tensor]:
    """Generate ``n`` proteins with each entry; (one result dict per entry, lengths (n,)).

    The sweep is cut into shards of ``batch_size`` proteins per entry, decoded on ``engine``
    (default: this process; protein r decodes with seed ``seed * n + r`` whatever the shard):
    see :func:`unmask.sweep.sweep`, whose ``recipe`` tells a Ray engine's workers how to load
    ``model``, and whose ``cache`` folder keeps finished shards. ``wall_s`` sums the shards'
    decode seconds.

    Every entry decodes the same lengths (uniform in [min_length, max_length], from ``seed``)
    at ``temperature`` (0 would give one protein per length). Keys: label, name, params,
    nfe, sequences (mean sequences evaluated per protein), cumulative_entropy, wall_s,
    proteins_per_s, n_items (``n``), revealed (mean residues decoded per protein), the metrics
    of :func:`unmask.protein.metrics.generation_metrics`, closeness (1 - jsd_heldout: the
    accuracy the Pareto plot and :func:`unmask.bench.aup` read, ``y="closeness"``), and
    :func:`unmask.bench.add_rate_metrics`'s tokens_per_pass, sequences_per_token and
    wall_per_solved (None: generation solves no item). With ``natural``, two reference rows
    with NFE None come first: crops of training and of held-out proteins at the same lengths
    (the composition floor a perfect model of the training data would reach with n proteins).
    """
    require(n >= 1, f"n: must be >= 1, got {n}")
    require(1 <= min_length <= max_length <= model.max_length,
            f"lengths: need 1 <= min {min_length} <= max {max_length} <= the model's "
            f"max_length {model.max_length}")
    require(temperature >= 0, f"temperature: must be >= 0, got {temperature}")
    lengths = random_lengths(n, seed, min_length, max_length)
    x = generation_inputs(lengths, model.max_length)
    background = background_composition()
    rows = []
    if natural:
        rng = np.random.default_rng([seed, 5])
        for label, crops in (("natural: training crops", split.train_sampler()),
                             ("natural: held-out crops", split.heldout_sampler())):
            tokens, _ = crops.crops(lengths, rng, model.max_length)
            rows.append({"label": label, "name": "natural", "params": {}, "nfe": None,
                         "sequences": None, "cumulative_entropy": None, "wall_s": None,
                         "proteins_per_s": None, "n_items": n, "revealed": None,
                         **generation_metrics(tokens, split.heldout, background)})
    cfg = DecodeConfig(temperature=temperature)
    # one untimed decode first, so one-off set-up costs are not charged to the first sampler
    results = sweep([Run(entry, x, cfg, seed * n) for entry in entries], model,
                    batch_size=batch_size, engine=engine, recipe=recipe,
                    warmup=Warmup(x[:2], "topk", cfg), progress=progress, cache=cache)
    for entry, (res, wall) in zip(entries, results, strict=True):
        rows.append({"label": entry.label, "name": entry.name,
                     "params": {k: v for k, v in entry.params.items()
                                if isinstance(v, (int, float, str, bool))},
                     "nfe": float(res.nfe.double().mean()),
                     "sequences": float(res.sequences.double().mean()),
                     "cumulative_entropy": float(res.cumulative_entropy.mean()),
                     "wall_s": wall, "proteins_per_s": n / wall, "n_items": n,
                     "revealed": float(lengths.mean()),
                     **generation_metrics(res.tokens, split.heldout, background)})
    for r in rows:
        r["closeness"] = 1.0 - r["jsd_heldout"]
    add_rate_metrics(rows)
    return rows, torch.as_tensor(lengths)
