"""Bench sweeps on an engine: every sampler over every item, split into shards.

A sweep is a list of :class:`Run` s (one sampler entry over items (P, N) with decode settings
and a seed). Each run is cut into shards of ``batch_size`` consecutive items, the same shards
whatever the engine; a shard is one :func:`~unmask.decode.decode` call on the worker that holds
the model (:mod:`unmask.parallel.workers`: this process, or Ray actors that each load the
model once by
name or path). Item r of a run always decodes with seed ``run.seed + r``, whichever shard holds
it, and the shards' results come back merged per run, in item order.

With the local engine a sweep performs, call for call, the decodes of one loop over runs and
chunks; on Ray each worker computes the same shards with the same batches, so the results are
the same except for wall-clock times (given the same library versions and device type, as for
``unmask mi label``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from unmask.bench.cache import RESULT_FIELDS, ShardCache
from unmask.bench.recipe import ModelRecipe
from unmask.decode import DecodeConfig, DecodeResult, decode
from unmask.errors import UnmaskError, require
from unmask.hooks import Hook
from unmask.models.base import MaskedModel
from unmask.parallel.workers import Engine, LocalEngine, worker_path
from unmask.samplers.spec import SamplerSpec
from unmask.validation import is_int

#: sampler parameters naming a folder the sampler reads (made absolute for the workers)
PATH_PARAMS = ("estimator",)


@dataclass
class Run:
    """One sampler entry over items: ``tokens`` (P, N) long, MASK where to decode; item r
    decodes with seed ``seed + r``."""

    entry: SamplerSpec
    tokens: torch.Tensor
    config: DecodeConfig = dataclasses.field(default_factory=DecodeConfig)
    seed: int = 0
    #: plain data applied to every shard of the run: ``extras.sampler(sampler)`` wraps the
    #: entry's sampler and ``extras.hooks()`` adds decode hooks (text batches:
    #: :class:`unmask.generate.TextEnds`); None: the entry's sampler alone
    extras: object = None


@dataclass(frozen=True)
class Shard:
    """A sweep's unit of work: items ``start`` to ``start + len(tokens)`` of run ``run``."""

    run: int
    start: int
    entry: SamplerSpec
    tokens: torch.Tensor
    config: DecodeConfig
    seed: int
    extras: object = None


@dataclass
class Worker:
    """A worker's state: the model, the corrector's hooks, and the model's fingerprint
    (None for the driver's own model, which needs no check)."""

    model: MaskedModel
    hooks: tuple[Hook, ...] = ()
    fingerprint: str | None = None


@dataclass(frozen=True)
class Warmup:
    """One untimed decode each worker runs after loading, so that one-off set-up costs are
    not charged to the first shard it times: ``tokens`` (B, N) with ``sampler``."""

    tokens: torch.Tensor
    sampler: str = "topk"
    config: DecodeConfig = dataclasses.field(default_factory=DecodeConfig)

    def run(self, model: MaskedModel) -> None:
        decode(model, self.tokens, self.sampler, self.config)


@dataclass(frozen=True)
class _Load:
    """An engine ``setup``: load the model from ``recipe``, warm it up, fingerprint it."""

    recipe: ModelRecipe
    warmup: Warmup | None = None

    def __call__(self) -> Worker:
        model, hooks = self.recipe.load()
        if self.warmup is not None:
            self.warmup.run(model)
        return Worker(model, hooks, model.fingerprint())


def decode_shard(worker: Worker, shard: Shard) -> dict:
    """Decode one shard on ``worker``: {"result": DecodeResult, "seconds": decode time,
    "fingerprint": the worker model's}."""
    if shard.entry.corrected and not worker.hooks:
        raise UnmaskError(f"{shard.entry.label}: no corrector to decode with")
    hooks = worker.hooks if shard.entry.corrected else ()
    sampler = shard.entry.build()
    if shard.extras is not None:
        sampler, hooks = shard.extras.sampler(sampler), (*hooks, *shard.extras.hooks())
    start = time.perf_counter()
    result = decode(worker.model, shard.tokens, sampler, shard.config,
                    seed=shard.seed + shard.start, hooks=hooks)
    return {"result": result, "seconds": time.perf_counter() - start,
            "fingerprint": worker.fingerprint}


def merge_results(parts: Sequence[DecodeResult]) -> DecodeResult:
    """The results of consecutive item chunks as one (rows in order); a statistic some
    chunks lack counts 0 there."""
    cat = {k: torch.cat([getattr(p, k) for p in parts]) for k in RESULT_FIELDS}
    keys = dict.fromkeys(k for p in parts for k in p.stats)
    stats = {k: torch.cat([p.stats[k] if k in p.stats else torch.zeros(len(p.tokens),
                                                                        dtype=torch.long)
                           for p in parts]) for k in keys}
    return DecodeResult(**cat, stats=stats)


def shards_of(runs: Sequence[Run], batch_size: int) -> list[Shard]:
    """The shards of ``runs``: run by run, chunks of ``batch_size`` items in order."""
    require(is_int(batch_size) and batch_size >= 1,
            f"batch_size: must be an integer >= 1, got {batch_size!r}")
    shards = []
    for k, run in enumerate(runs):
        require(isinstance(run.tokens, torch.Tensor) and run.tokens.dim() == 2,
                f"runs[{k}].tokens: expected a (P, N) tensor")
        entry = _for_workers(run.entry)
        for start in range(0, run.tokens.shape[0], batch_size):
            # a copy: a pickled view would carry the whole run's storage to the worker
            shards.append(Shard(k, start, entry, run.tokens[start:start + batch_size].clone(),
                                run.config, run.seed, run.extras))
    return shards


def _for_workers(entry: SamplerSpec) -> SamplerSpec:
    """``entry`` with the folders its parameters name made absolute (label unchanged)."""
    params = {k: worker_path(v) if k in PATH_PARAMS else v for k, v in entry.params.items()}
    return entry if params == entry.params else dataclasses.replace(entry, params=params)


def sweep(runs: Sequence[Run], model: MaskedModel, *, batch_size: int = 1000,
          hooks: Sequence[Hook] = (), engine: Engine | None = None,
          recipe: ModelRecipe | None = None, warmup: Warmup | None = None,
          progress: Callable[[int], None] | None = None,
          cache: str | Path | None = None) -> list[tuple[DecodeResult, float]]:
    """Decode every run in shards of ``batch_size`` items on ``engine``.

    Args:
        runs: the :class:`Run` s.
        model: the model (the driver's copy: the local engine decodes with it; other engines'
            workers must load the same weights, checked by fingerprint).
        hooks: the corrector's hooks for entries marked ``corrected`` (local engine).
        engine: where shards are decoded (default: a :class:`~unmask.parallel.workers.LocalEngine`);
            opened here and closed before returning.
        recipe: how a worker of a non-local engine loads the model and corrector (required
            there; the model is never pickled).
        warmup: an untimed decode each worker runs once before its first shard.
        progress: called with the number of runs finished, as each finishes.
        cache: a folder of finished shards (:mod:`unmask.bench.cache`): shards found there
            are not decoded again, and each shard decoded is written there as it arrives, so
            a killed sweep resumes where it stopped.

    Returns:
        per run, in order: (its shards' results merged, the sum of its shards' decode seconds).
    """
    engine = engine if engine is not None else LocalEngine()
    local = isinstance(engine, LocalEngine)
    shards = shards_of(runs, batch_size)
    setup = _setup(runs, model, hooks, engine, recipe, warmup)
    fingerprint = model.fingerprint() if cache is not None or not local else None
    expected = None if local else fingerprint
    kept = None if cache is None else ShardCache(
        cache, fingerprint, model.device.type if local else recipe.device,
        recipe.corrector if recipe is not None else None, PATH_PARAMS)
    gather = _Gather(runs, shards, progress)
    todo, keys = [], []
    for shard in shards:
        key = kept.key(shard) if kept is not None else None
        out = kept.load(key, tuple(shard.tokens.shape)) if kept is not None else None
        if out is None:
            todo.append(shard)
            keys.append(key)
        else:
            gather.add(shard, out)
    if not todo:
        return gather.merged()
    try:
        engine.open(setup)
        for k, out in engine.map_unordered(decode_shard, todo):
            if expected is not None and out["fingerprint"] != expected:
                raise UnmaskError(f"model: a worker loaded weights {out['fingerprint']}, not "
                                  f"the driver's {expected}; every worker must read the same "
                                  f"model")
            if kept is not None:
                kept.save(keys[k], out)
            gather.add(todo[k], out)
    finally:
        engine.close()
    return gather.merged()


def _setup(runs, model, hooks, engine: Engine, recipe, warmup) -> Callable[[], Worker]:
    """The engine ``setup`` of a sweep: the driver's model on the local engine, a
    :class:`_Load` of ``recipe`` elsewhere; one line when a corrected entry has no corrector
    or a non-local engine no recipe."""
    local = isinstance(engine, LocalEngine)
    for run in runs:
        if run.entry.corrected and not (hooks if local else recipe and recipe.corrector):
            raise UnmaskError(f"{run.entry.label}: no corrector to decode with")
    if not local:
        require(recipe is not None, f"recipe: the {engine.name} engine's workers load the "
                                    "model themselves; give a ModelRecipe")
        return _Load(recipe, warmup)

    def setup() -> Worker:  # the driver's model, not a copy
        if warmup is not None:
            warmup.run(model)
        return Worker(model, tuple(hooks))

    return setup


class _Gather:
    """The shards' outputs by run, reporting each run as its last shard arrives."""

    def __init__(self, runs: Sequence[Run], shards: list[Shard], progress):
        self.parts: list[dict] = [{} for _ in runs]
        self.left = [0] * len(runs)
        for shard in shards:
            self.left[shard.run] += 1
        self.finished, self.progress = 0, progress

    def add(self, shard: Shard, out: dict) -> None:
        self.parts[shard.run][shard.start] = out
        self.left[shard.run] -= 1
        if self.left[shard.run] == 0:
            self.finished += 1
            if self.progress is not None:
                self.progress(self.finished)

    def merged(self) -> list[tuple[DecodeResult, float]]:
        """Per run: its shards' results merged in item order, their decode seconds summed."""
        return [(merge_results([p[s]["result"] for s in sorted(p)]),
                 sum(p[s]["seconds"] for s in p)) for p in self.parts]


def timed_decode(model, tokens: torch.Tensor, entry: SamplerSpec, config: DecodeConfig,
                 *, seed: int = 0, batch_size: int = 1000,
                 corrector_hooks: tuple[Hook, ...] = ()) -> tuple[DecodeResult, float]:
    """Decode ``tokens`` (B, N) with ``entry`` in chunks of ``batch_size`` rows.

    Args:
        corrector_hooks: the hooks an entry marked ``corrected`` decodes with
            (:func:`unmask.hooks.corrector_hooks`); required for such entries.

    Returns:
        (the chunks' results merged, seconds).
    """
    [(result, wall)] = sweep([Run(entry, tokens, config, seed)], model, batch_size=batch_size,
                             hooks=corrector_hooks)
    return result, wall
