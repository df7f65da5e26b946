"""Benchmark decoding orders on the multiplication task: accuracy and what it cost."""

from __future__ import annotations

import torch

from unmask.arithmetic.bench_task import ArithmeticBench, ArithmeticBenchTask
from unmask.arithmetic.format import MASK_ID, VOCAB_SIZE, EquationFormat
from unmask.arithmetic.train import TASKS, format_of, task_inputs, training_batch
from unmask.bench.contract import BenchContext, BenchResult, BenchRow
from unmask.bench.plot import pareto_plot
from unmask.bench.recipe import ModelRecipe
from unmask.bench.rows import add_rate_metrics, aup
from unmask.bench.sweep import Run, Warmup, sweep
from unmask.bench.table import wide_console
from unmask.decode import DecodeConfig
from unmask.errors import UnmaskError, require
from unmask.models.auto import load_model
from unmask.models.base import MaskedModel
from unmask.parallel.workers import Engine
from unmask.pretrained import describe_source
from unmask.samplers.pc import frequency_table
from unmask.samplers.spec import SamplerSpec


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
              cache=None) -> list[BenchRow]:
    """Decode ``prompts`` inputs of every task with every entry; one
    :class:`unmask.bench.contract.BenchRow` per pair.

    Each (task, entry) pair is one shard, decoded on ``engine`` (default: this process): see
    :func:`unmask.bench.sweep.sweep`, whose ``recipe`` tells a Ray engine's workers how to load
    ``model``, and whose ``cache`` folder keeps finished shards.

    'generate' samples at ``generate_temperature`` (at 0 every row would be the same);
    the conditional tasks decode at temperature 0. Per pair, the shared fields: label,
    name, accuracy (well formed and the equation holds), mean nfe (model calls), mean
    sequences evaluated per row, wall seconds, n_items (``prompts``) and
    :func:`unmask.bench.rows.add_rate_metrics`'s tokens_per_pass, sequences_per_token and
    wall_per_solved (per correct equation); the columns: task, sampler (the label), params,
    verified, verify_tolerance, temperature, prompts, solved_each, well_formed, mean
    cumulative entropy (nats), mean steps, ms per batched step (wall time over the loop's
    iterations, i.e. the longest row's steps), revealed (mean tokens decoded per row).
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
    rows = [_row(tasks[i // len(entries)], run, res, wall, fmt, prompts)
            for i, (run, (res, wall)) in enumerate(zip(runs, results, strict=True))]
    add_rate_metrics(rows)
    return rows


def _row(task: str, run: Run, res, wall: float, fmt: EquationFormat, prompts: int
         ) -> BenchRow:
    """One (task, entry) pair's row from its decode (:func:`run_bench`)."""
    entry, correct = run.entry, fmt.correct(res.tokens)
    return BenchRow(
        entry.label, entry.name, float(correct.float().mean()),
        nfe=float(res.nfe.double().mean()), sequences=float(res.sequences.double().mean()),
        wall_s=wall, n_items=prompts,
        columns={"task": task, "sampler": entry.label,
                 "params": {k: v for k, v in entry.params.items() if k != "frequencies"},
                 "verified": entry.verified,
                 "verify_tolerance": 1.0 if entry.verify is None else entry.verify,
                 "temperature": run.config.temperature, "prompts": prompts,
                 "solved_each": "".join("1" if v else "0" for v in correct.tolist()),
                 "well_formed": float(fmt.well_formed(res.tokens).float().mean()),
                 "cumulative_entropy": float(res.cumulative_entropy.mean()),
                 "steps": float(res.steps.double().mean()),
                 "ms_per_step": 1000 * wall / max(1, int(res.steps.max())),
                 "revealed": float((run.tokens == MASK_ID).sum(1).double().mean())})


TASK_TITLES = {"generate": "unconditional generation", "product": "factors given -> product",
               "factors": "product given -> factors"}


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def aup_by_task(rows: list[BenchRow]) -> dict[str, float | None]:
    """The AUP (:func:`unmask.bench.rows.aup`) of each task's rows."""
    tasks = dict.fromkeys(r.columns["task"] for r in rows)
    return {task: aup([r for r in rows if r.columns["task"] == task]) for task in tasks}


def print_tables(rows: list[dict], scores: dict[str, float | None], source: str) -> None:
    """One table per task, each followed by its AUP line (``scores``: task -> AUP)."""
    from rich.table import Table

    for task in dict.fromkeys(r["task"] for r in rows):
        part = [r for r in rows if r["task"] == task]
        base = next((r["ms_per_step"] for r in part if r["sampler"] == "confidence"), None)
        t = part[0]["temperature"]
        table = Table(title=f"{TASK_TITLES.get(task, task)} ({part[0]['prompts']} prompts, "
                            f"temperature {t:g}) — {source}")
        table.add_column("sampler", no_wrap=True)
        for col in ("acc %", "format %", "NFE", "tok/pass", "seq/row", "cum H", "ms/step",
                    "vs conf", "s/solved"):
            table.add_column(col, justify="right")
        for r in part:
            ratio = f"{r['ms_per_step'] / base:.2f}x" if base else "-"
            table.add_row(r["label"], f"{100 * r['accuracy']:.1f}",
                          f"{100 * r['well_formed']:.1f}", f"{r['nfe']:.2f}",
                          _number(r["tokens_per_pass"], ".2f"), f"{r['sequences']:.1f}",
                          f"{r['cumulative_entropy']:.3f}", f"{r['ms_per_step']:.2f}", ratio,
                          _number(r["wall_per_solved"], ".2g"))
        wide_console(table).print(table)
        if scores[task] is not None:
            print(f"AUP over these rows: {scores[task]:.1f} (accuracy-weighted area under "
                  f"acc % vs tokens per pass, d3LLM)")


class ArithmeticBenchRunner(ArithmeticBenchTask):
    """Every sampler on the multiplication model's tasks: accuracy against forward passes;
    the temperature is that of unconditional generation (the conditional tasks decode at
    0)."""

    def check(self, options: ArithmeticBench) -> ArithmeticBench:
        """The options, their tasks known."""
        tasks = options.tasks
        if not tasks:
            raise UnmaskError(f"--tasks: no task given; choose from {', '.join(TASKS)}")
        unknown = [t for t in tasks if t not in TASKS]
        if unknown:
            raise UnmaskError(f"--tasks: unknown {unknown[0]!r}; choose from "
                              f"{', '.join(TASKS)}")
        return options

    def load_model(self, options: ArithmeticBench, device):
        model = load_model(options.model or "arithmetic", task="arithmetic").to(device)
        task = getattr(getattr(model, "config", None), "task", None)
        if not (isinstance(task, str) and task.startswith("multiplication-")):
            raise UnmaskError(f"--model: a {task or 'task-less'} model, this command needs a "
                              "multiplication model")
        return model

    def recipe(self, options: ArithmeticBench, model, device):
        return ModelRecipe(options.model or "arithmetic", task="arithmetic", device=device.type)

    def entries(self, model, specs, parse) -> list[SamplerSpec]:
        """The default comparison; ``--samplers`` may name its rows by sampler name or
        label (e.g. ``pc``, whose frequency table only the defaults carry) beside specs."""
        entries = default_entries(format_of(model))
        if specs is None:
            return entries
        chosen = []
        for spec in specs:
            named = [e for e in entries if spec in (e.name, e.label)]
            chosen.extend(named or [parse(spec)])
        return [e for k, e in enumerate(chosen) if all(e is not c for c in chosen[:k])]

    def n_runs(self, ctx: BenchContext) -> int:
        return len(ctx.options.tasks) * len(ctx.entries)

    def run(self, ctx: BenchContext) -> BenchResult:
        fmt = format_of(ctx.model)
        [temperature] = ctx.temperatures
        rows = run_bench(ctx.model, fmt, ctx.entries, ctx.options.tasks, ctx.limit, temperature,
                         ctx.seed, **ctx.sweep)
        header = {"model": describe_source(ctx.model.source),
                  "factors": [fmt.a_digits, fmt.b_digits], "tasks": list(ctx.options.tasks),
                  "aup": aup_by_task(rows)}
        return BenchResult(rows, header)

    def report(self, ctx: BenchContext, result: BenchResult) -> None:
        h = result.header
        print_tables(result.dicts(), h["aup"],
                     f"{h['model']}, {h['factors'][0]}x{h['factors'][1]}-digit factors")

    def plot(self, ctx: BenchContext, result: BenchResult, path) -> None:
        rows = [{**r, "label": f"{r['task']} {r['label']}", "name": f"{r['task']} {r['name']}"}
                for r in result.dicts()]
        h = result.header
        pareto_plot(rows, path, ylabel=self.accuracy_label,
                    title=f"multiplication, {h['factors'][0]}x{h['factors'][1]}-digit "
                          f"factors, {h['model']}")


BENCH_TASK = ArithmeticBenchRunner()
