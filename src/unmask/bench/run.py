"""Running a bench from its options: :func:`run_bench` is the one way, from Python
(``run_bench(SudokuBench(set="hard", limit=100))``) and from ``unmask <task> bench``
(:mod:`unmask.commands.flags.bench`, which builds the options from its flags and prints and
writes what this returns)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from unmask.bench.contract import (
    DTYPES,
    BenchContext,
    BenchOptions,
    BenchResult,
    BenchTask,
    CorrectedBenchOptions,
    load_bench_task,
    with_temperature,
)
from unmask.bench.recipe import CorrectorRecipe
from unmask.errors import UnmaskError
from unmask.models.auto import check_task
from unmask.parallel.workers import LocalEngine
from unmask.progress import progress_bar
from unmask.request import DecodeRequest
from unmask.samplers.spec import preset_entry, spec_entry, with_estimator


def bench_context(task: BenchTask, options: BenchOptions, *, device, engine=None,
                  cache=None) -> BenchContext:
    """What ``task`` decodes with for ``options`` (checked by the task first): the model, its
    entries, the corrector's hooks and how ``engine``'s workers (default: this process)
    rebuild both, their model on ``device``; ``cache``: a folder of finished shards
    (:func:`unmask.bench.sweep.sweep`). This process holds the model on ``device`` too, or on
    the CPU beside remote workers (it reads the model's metadata, the workers decode)."""
    if options.samplers is not None and not options.samplers:
        raise UnmaskError("--samplers: no sampler spec given")
    options = task.check(options)
    presets = [preset_entry(name) for name in options.preset]
    engine = LocalEngine() if engine is None else engine
    local = isinstance(engine, LocalEngine)
    model = task.load_model(options, device if local else torch.device("cpu"))
    if task.model_task is not None:
        check_task(model, task.model_task, options.model or task.model_task, required=True)
    if options.dtype is not None:
        model.autocast_bf16 = DTYPES[options.dtype]
    entries = [] if options.samplers is None and presets else task.entries(
        model, options.samplers, lambda spec: spec_entry(spec, "--samplers"))
    entries = with_estimator(entries + presets, options.estimator)
    corrector = _corrector(task, options, any(e.corrected for e in entries))
    hooks = () if corrector is None else corrector.hooks(model)
    recipe = dataclasses.replace(task.recipe(options, model, device), bf16=model.autocast_bf16,
                                 corrector=corrector)
    sweep = {"engine": engine, "recipe": recipe, "cache": cache}
    return BenchContext(options, model, entries, options.limit, options.temperatures,
                        options.seed, sweep, hooks)


def _corrector(task: BenchTask, options: BenchOptions, corrected: bool):
    """The :class:`~unmask.bench.recipe.CorrectorRecipe` of the entries marked ``corrected``
    (None: no such entry); a corrector named without one, or asked of a task without one,
    is refused in one line."""
    if not isinstance(options, CorrectedBenchOptions):
        if corrected:
            raise UnmaskError(f"--samplers: the {task.name} bench has no corrector; drop "
                              "'+corrector'")
        return None
    if not corrected:
        if options.corrector:
            raise UnmaskError("--corrector: no sampler spec ends in '+corrector'")
        return None
    return CorrectorRecipe(options.corrector, threshold=options.remask_threshold,
                           max_remasks=options.max_remasks, ban_remasked=options.ban_remasked)


def decode_bench(task: BenchTask, ctx: BenchContext, progress: bool = False) -> BenchResult:
    """``task.run`` over the context (with a progress bar when ``progress``); once per
    temperature when the task decodes one at a time (rows labelled with their temperature
    when there are several)."""
    per = [ctx.temperatures] if task.all_temperatures else [(t,) for t in ctx.temperatures]
    total = task.n_runs(ctx) * len(per)
    results = []
    with progress_bar(total, "decoding", enabled=progress) as update:
        for k, temps in enumerate(per):
            done = k * total // len(per)
            sub = dataclasses.replace(ctx, temperatures=temps, sweep={
                **ctx.sweep, "progress": lambda n, done=done: update(done + n)})
            results.append(task.run(sub))
    if len(results) == 1:
        return results[0]
    rows = [with_temperature(r, t[0]) for t, res in zip(per, results, strict=True)
            for r in res.rows]
    return BenchResult(rows, results[0].header, [n for r in results for n in r.notes],
                       results[0].extras)


def entry_requests(ctx: BenchContext) -> list[dict[str, Any]]:
    """Per entry and temperature, its label and the :class:`~unmask.request.DecodeRequest` it
    decodes as (:meth:`~unmask.request.DecodeRequest.to_json`: its spec, temperature,
    confidence, the run's seed; item r of a shard decodes with a seed from it as the task
    says); the request is None for an entry whose parameters have no spec text (a frequency
    table)."""
    confidence = getattr(ctx.options, "confidence", "draw")
    out = []
    for entry in ctx.entries:
        for t in ctx.temperatures:
            try:
                request = DecodeRequest(sampler=entry.text, temperature=t, seed=ctx.seed,
                                        confidence=confidence).to_json()
            except (UnmaskError, TypeError, ValueError):
                request = None
            out.append({"label": entry.label, "request": request})
    return out


def bench_record(task: BenchTask, ctx: BenchContext, result: BenchResult) -> dict[str, Any]:
    """What a bench file holds: the bench, the task's header, the temperatures, the seed, the
    rows, the options the run was asked for and each entry's decoding request
    (:func:`entry_requests`)."""
    return {"bench": task.name, **result.header, "temperatures": list(ctx.temperatures),
            "seed": ctx.seed, "rows": result.dicts(), "options": ctx.options.to_json(),
            "requests": entry_requests(ctx)}


def run_bench(options: BenchOptions, *, device="cpu", engine=None, cache=None,
              progress: bool = False, task: BenchTask | None = None
              ) -> tuple[BenchContext, BenchResult]:
    """Run the bench ``options`` ask for (``options.task``'s, or ``task``), its model on
    ``device``, decoded on ``engine`` (default: this process); (the context it decoded with,
    its rows). :meth:`~unmask.bench.contract.BenchTask.report` prints them and
    :func:`bench_record` is what its file holds::

        from unmask.bench.run import run_bench
        from unmask.sudoku.bench_task import SudokuBench

        ctx, result = run_bench(SudokuBench(set="hard", limit=100, samplers=("topk:k=5",)))
    """
    task = load_bench_task(options.task) if task is None else task
    device = torch.device(device)
    ctx = bench_context(task, options, device=device, engine=engine, cache=cache)
    return ctx, decode_bench(task, ctx, progress)

