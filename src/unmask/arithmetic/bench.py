"""Benchmark decoding orders on the multiplication task: accuracy and what it cost."""

from __future__ import annotations

import torch

from unmask.arithmetic.format import MASK_ID, VOCAB_SIZE, EquationFormat
from unmask.arithmetic.train import TASKS, task_inputs, training_batch
from unmask.bench import BenchEntry, timed_decode, verify_suffix
from unmask.decode import DecodeConfig, decode
from unmask.errors import require
from unmask.models.base import MaskedModel
from unmask.samplers.pc import frequency_table


def default_entries(fmt: EquationFormat) -> list[BenchEntry]:
    """Every greedy baseline at one token per step, the parallel ones at their usual
    settings, every position drafted at once with its passes verified (tokens only, and with
    the order held to sequential decoding's within 0.03), and the lookahead samplers with and
    without the bypass."""
    every = {"k": fmt.length}
    return [
        BenchEntry("confidence", "confidence"),
        BenchEntry("entropy", "entropy"),
        BenchEntry("margin", "margin"),
        BenchEntry("uniform", "uniform"),
        BenchEntry("topk k=2", "topk", {"k": 2}),
        BenchEntry("eb γ=0.1", "eb", {"gamma": 0.1}),
        BenchEntry("threshold τ=0.9", "threshold", {"tau": 0.9}),
        *(BenchEntry(f"topk k={fmt.length} {verify_suffix(t)}", "topk", every, verified=True,
                     verify_tolerance=t) for t in (1.0, 0.03)),
        BenchEntry("klass", "klass"),
        BenchEntry("pc", "pc", {"frequencies": training_frequencies(fmt)}),
        BenchEntry("info-gain", "info-gain"),
        BenchEntry("info-gain bypass=0.9", "info-gain", {"bypass": 0.9}),
        BenchEntry("lookum", "lookum"),
    ]


def training_frequencies(fmt: EquationFormat, n: int = 20_000) -> torch.Tensor:
    """(V,) token frequencies of true equations (the PC-Sampler's reference corpus)."""
    _, targets, _ = training_batch(fmt, 0, n, seed=12345)
    return frequency_table(targets, VOCAB_SIZE, ignore=MASK_ID)


def run_bench(model: MaskedModel, fmt: EquationFormat, entries: list[BenchEntry],
              tasks: tuple[str, ...] = tuple(TASKS), prompts: int = 500,
              generate_temperature: float = 1.0, seed: int = 0, progress=None) -> list[dict]:
    """Decode ``prompts`` inputs of every task with every entry; one result dict per pair.

    'generate' samples at ``generate_temperature`` (at 0 every row would be the same);
    the conditional tasks decode at temperature 0. Per pair: accuracy (well formed and the
    equation holds), well_formed, mean nfe (model calls), mean sequences evaluated, mean
    cumulative entropy (nats), mean steps, wall seconds, and ms per batched step (wall time
    over the loop's iterations, i.e. the longest row's steps).
    """
    require(prompts >= 1, f"prompts: must be >= 1, got {prompts}")
    for task in tasks:
        require(task in TASKS, f"tasks: unknown task {task!r}; choose from {tuple(TASKS)}")
    # one untimed decode first: the first model call pays one-off set-up costs that would
    # otherwise be charged to whichever sampler runs first
    decode(model, task_inputs(fmt, tasks[0], 2, seed=seed), "confidence")
    rows = []
    for task in tasks:
        x = task_inputs(fmt, task, prompts, seed=seed)
        cfg = DecodeConfig(temperature=generate_temperature if task == "generate" else 0.0)
        for entry in entries:
            # rows draw seeds seed*prompts + r, so runs with different seeds share no row
            res, wall = timed_decode(model, x, entry, cfg, seed=seed * prompts,
                                     batch_size=len(x))
            rows.append({
                "task": task, "sampler": entry.label, "name": entry.name,
                "params": {k: v for k, v in entry.params.items() if k != "frequencies"},
                "verified": entry.verified, "verify_tolerance": entry.verify_tolerance,
                "temperature": cfg.temperature, "prompts": prompts,
                "accuracy": float(fmt.correct(res.tokens).float().mean()),
                "well_formed": float(fmt.well_formed(res.tokens).float().mean()),
                "nfe": float(res.nfe.double().mean()),
                "sequences": float(res.sequences.double().mean()),
                "cumulative_entropy": float(res.cumulative_entropy.mean()),
                "steps": float(res.steps.double().mean()),
                "wall_s": wall,
                "ms_per_step": 1000 * wall / max(1, int(res.steps.max())),
            })
            if progress is not None:
                progress(len(rows))
    return rows
