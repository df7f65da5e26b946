"""Benchmark decoding orders on the multiplication task: accuracy and what it cost."""

from __future__ import annotations

import torch

from unmask.arithmetic.format import MASK_ID, VOCAB_SIZE, EquationFormat
from unmask.arithmetic.train import TASKS, task_inputs, training_batch
from unmask.bench import add_rate_metrics
from unmask.decode import DecodeConfig
from unmask.engine import Engine
from unmask.errors import require
from unmask.models.base import MaskedModel
from unmask.samplers.pc import frequency_table
from unmask.samplers.spec import SamplerSpec
from unmask.sweep import ModelRecipe, Run, Warmup, sweep


def default_entries(fmt: EquationFormat) -> list[SamplerSpec]:
    """Every greedy baseline at one token per step, the parallel ones at their usual
    settings, every position drafted at once with its passes verified (tokens only, and with
    the order held to sequential decoding's within 0.03), and the lookahead samplers with and
    without the bypass."""
    every = {"k": fmt.length}
    return [
        SamplerSpec("confidence"),
        SamplerSpec("entropy"),
        SamplerSpec("margin"),
        SamplerSpec("uniform"),
        SamplerSpec("topk", {"k": 2}),
        SamplerSpec("eb", {"gamma": 0.1}, label="eb γ=0.1"),
        SamplerSpec("threshold", {"tau": 0.9}, label="threshold τ=0.9"),
        *(SamplerSpec("topk", every, verify=t) for t in (1.0, 0.03)),
        SamplerSpec("klass"),
        SamplerSpec("pc", {"frequencies": training_frequencies(fmt)}, label="pc"),
        SamplerSpec("info-gain"),
        SamplerSpec("info-gain", {"bypass": 0.9}),
        SamplerSpec("lookum"),
    ]


def training_frequencies(fmt: EquationFormat, n: int = 20_000) -> torch.Tensor:
    """(V,) token frequencies of true equations (the PC-Sampler's reference corpus)."""
    _, targets, _ = training_batch(fmt, 0, n, seed=12345)
    return frequency_table(targets, VOCAB_SIZE, ignore=MASK_ID)


def run_bench(model: MaskedModel, fmt: EquationFormat, entries: list[SamplerSpec],
              tasks: tuple[str, ...] = tuple(TASKS), prompts: int = 500,
              generate_temperature: float = 1.0, seed: int = 0, progress=None,
              engine: Engine | None = None, recipe: ModelRecipe | None = None,
              cache=None) -> list[dict]:
    """Decode ``prompts`` inputs of every task with every entry; one result dict per pair.

    Each (task, entry) pair is one shard, decoded on ``engine`` (default: this process): see
    :func:`unmask.sweep.sweep`, whose ``recipe`` tells a Ray engine's workers how to load
    ``model``, and whose ``cache`` folder keeps finished shards.

    'generate' samples at ``generate_temperature`` (at 0 every row would be the same);
    the conditional tasks decode at temperature 0. Per pair: accuracy (well formed and the
    equation holds), well_formed, mean nfe (model calls), mean sequences evaluated per row,
    mean cumulative entropy (nats), mean steps, wall seconds, ms per batched step (wall time
    over the loop's iterations, i.e. the longest row's steps), n_items (``prompts``), revealed
    (mean tokens decoded per row), and :func:`unmask.bench.add_rate_metrics`'s
    tokens_per_pass, sequences_per_token and wall_per_solved (per correct equation).
    """
    require(prompts >= 1, f"prompts: must be >= 1, got {prompts}")
    for task in tasks:
        require(task in TASKS, f"tasks: unknown task {task!r}; choose from {tuple(TASKS)}")
    runs = []
    for task in tasks:
        x = task_inputs(fmt, task, prompts, seed=seed)
        cfg = DecodeConfig(temperature=generate_temperature if task == "generate" else 0.0)
        # rows draw seeds seed*prompts + r, so runs with different seeds share no row
        runs += [Run(entry, x, cfg, seed * prompts) for entry in entries]
    # one untimed decode first: the first model call pays one-off set-up costs that would
    # otherwise be charged to whichever sampler runs first
    warmup = Warmup(task_inputs(fmt, tasks[0], 2, seed=seed), "confidence")
    results = sweep(runs, model, batch_size=prompts, engine=engine, recipe=recipe,
                    warmup=warmup, progress=progress, cache=cache)
    rows = []
    for i, (run, (res, wall)) in enumerate(zip(runs, results, strict=True)):
        entry = run.entry
        rows.append({
            "task": tasks[i // len(entries)], "sampler": entry.label, "name": entry.name,
            "params": {k: v for k, v in entry.params.items() if k != "frequencies"},
            "verified": entry.verified,
            "verify_tolerance": 1.0 if entry.verify is None else entry.verify,
            "temperature": run.config.temperature, "prompts": prompts,
            "accuracy": float(fmt.correct(res.tokens).float().mean()),
            "well_formed": float(fmt.well_formed(res.tokens).float().mean()),
            "nfe": float(res.nfe.double().mean()),
            "sequences": float(res.sequences.double().mean()),
            "cumulative_entropy": float(res.cumulative_entropy.mean()),
            "steps": float(res.steps.double().mean()),
            "wall_s": wall,
            "ms_per_step": 1000 * wall / max(1, int(res.steps.max())),
            "n_items": prompts,
            "revealed": float((run.tokens == MASK_ID).sum(1).double().mean()),
        })
    add_rate_metrics(rows, solved="accuracy")
    return rows
