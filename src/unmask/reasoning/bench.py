"""Decoding the reasoning tasks with any sampler and scoring each answer by its task's
verifier."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from unmask.bench.contract import BenchContext, BenchResult, BenchRow
from unmask.bench.plot import pareto_plot
from unmask.bench.recipe import ModelRecipe
from unmask.bench.rows import add_paired_vs, add_rate_metrics, aup
from unmask.bench.sweep import Run, Warmup, sweep
from unmask.bench.table import render_table
from unmask.decode import DecodeConfig
from unmask.errors import require
from unmask.generate import Generation, TextEnds, encode_prompt, generate, generations, prompt_batch
from unmask.models.auto import load_model
from unmask.parallel.workers import Engine
from unmask.pretrained import describe_source
from unmask.reasoning.bench_task import ReasoningBench, ReasoningBenchTask
from unmask.reasoning.tasks import Item, ReasoningTask, get_tasks
from unmask.samplers.spec import SamplerSpec
from unmask.validation import is_int

#: bench problems lie below this generator seed (training and weight selection start there)
SELECT_SEED = 900_000
#: problems decoded together
BATCH_SIZE = 32


def n_batches(n_tasks: int, limit: int, n_entries: int, n_temperatures: int) -> int:
    """How many batches (sweep runs) :func:`run_bench` decodes."""
    return n_tasks * -(-limit // BATCH_SIZE) * n_entries * n_temperatures


@dataclass(frozen=True)
class Solved:
    """One decoded problem: the answer text, whether the verifier accepts it, and the cost."""

    item: Item
    answer: str
    correct: bool
    nfe: int
    sequences: int
    cumulative_entropy: float
    wall_s: float


def solve(model, task: ReasoningTask, items: list[Item], sampler="confidence", *,
          temperature: float = 0.0, seed: int = 0, batch_size: int = BATCH_SIZE,
          confidence: str = "draw") -> list[Solved]:
    """Decode ``items`` (problems of ``task``) with ``sampler``, ``batch_size`` prompts at a
    time in order of prompt length (less padding); the batch of the k-th shortest prompts
    decodes with seed ``seed + k // batch_size * batch_size``. wall_s is each item's share of
    its batch's wall time. Results are in the order of ``items``."""
    order = _by_length(items)
    gens = generate(model, prompts=[items[i].prompt for i in order], sampler=sampler,
                    gen_length=task.gen_length, temperature=temperature, seed=seed,
                    batch_size=batch_size, confidence=confidence)
    out: list[Solved | None] = [None] * len(items)
    for k, (i, g) in enumerate(zip(order, gens, strict=True)):
        rows = min(batch_size, len(items) - k // batch_size * batch_size)
        out[i] = _solved(task, items[i], g, rows)
    return out


def _by_length(items: list[Item]) -> list[int]:
    """Item indices in order of prompt length (then index): batches with less padding."""
    return sorted(range(len(items)), key=lambda i: (len(items[i].prompt), i))


def _solved(task: ReasoningTask, item: Item, g: Generation, rows: int) -> Solved:
    """One problem's :class:`Solved` from its generation (a batch of ``rows`` prompts: each is
    charged its share of the batch's wall time)."""
    text = g.text.strip()
    return Solved(item, text, task.correct(text, item), g.nfe, g.sequences,
                  g.cumulative_entropy, g.wall_s / rows)


@dataclass
class _Batches:
    """One task's problems batched as :func:`solve` batches them (by prompt length, the batch
    of the k-th shortest prompts with seed ``seed + k // batch_size * batch_size``): each
    batch's item indices, decode input (B, L) and how its rows end."""

    task: ReasoningTask
    items: list[Item]
    index: list[list[int]]
    tokens: list[torch.Tensor]
    ends: list[TextEnds]

    @classmethod
    def of(cls, model, task: ReasoningTask, items: list[Item], batch_size: int) -> _Batches:
        order = _by_length(items)
        out = cls(task, items, [], [], [])
        for lo in range(0, len(items), batch_size):
            idx = order[lo:lo + batch_size]
            encoded = [encode_prompt(model.tokenizer, items[i].prompt) for i in idx]
            x, ends = prompt_batch(model, encoded, task.gen_length, task.gen_length)
            out.index.append(idx)
            out.tokens.append(x)
            out.ends.append(ends)
        return out

    def runs(self, entry: SamplerSpec, config: DecodeConfig, seed: int) -> list[Run]:
        """The batches as sweep runs of ``entry`` (batch k starts at item k * batch size)."""
        starts = [sum(map(len, self.index[:k])) for k in range(len(self.index))]
        return [Run(entry, x, config, seed + lo, extras=ends)
                for x, ends, lo in zip(self.tokens, self.ends, starts, strict=True)]

    def solved(self, model, results) -> list[Solved]:
        """The problems' :class:`Solved`, in item order, from the runs' sweep results."""
        out: list[Solved | None] = [None] * len(self.items)
        for idx, ends, (res, wall) in zip(self.index, self.ends, results, strict=True):
            prompts = [self.items[i].prompt for i in idx]
            for i, g in zip(idx, generations(res, model.tokenizer, prompts, ends, wall),
                            strict=True):
                out[i] = _solved(self.task, self.items[i], g, len(idx))
        return out


#: the pooled rows' task name
POOLED = "pooled"


def _row(entry, task: str, temperature: float, gen_length: float, solved: list[Solved],
         confidence: str = "draw") -> BenchRow:
    n = len(solved)
    nfe = float(np.mean([s.nfe for s in solved]))
    return BenchRow(
        entry.label + (" conf=max" if confidence == "max" else ""), entry.name,
        float(np.mean([s.correct for s in solved])), nfe=nfe,
        sequences=float(np.mean([s.sequences for s in solved])),
        wall_s=float(sum(s.wall_s for s in solved)), n_items=n,
        columns={"verified": entry.verified, "confidence": confidence, "task": task,
                 "temperature": temperature,
                 "solved_each": "".join("1" if s.correct else "0" for s in solved),
                 "gen_length": gen_length, "tokens_per_forward": gen_length / nfe,
                 "cumulative_entropy": float(np.mean([s.cumulative_entropy for s in solved]))})


def run_bench(model, tasks: list[ReasoningTask], entries: list[SamplerSpec],
                        limit: int, temperatures: tuple[float, ...] = (0.0,), seed: int = 0,
                        progress=None, confidence: str = "draw", engine: Engine | None = None,
                        recipe: ModelRecipe | None = None, cache=None) -> list[BenchRow]:
    """Decode ``limit`` problems of every task (generator seed ``seed``) with every entry at
    every temperature (``confidence``: :class:`~unmask.decode.DecodeConfig`; rows decoded
    with ``"max"`` say so in their label and ``confidence``).

    Every batch of :data:`BATCH_SIZE` problems (batched as :func:`solve` does) is one run of a
    sweep on ``engine`` (:func:`unmask.bench.sweep.sweep`: ``recipe`` tells a Ray engine's workers
    how to load the model, ``cache`` keeps finished batches); ``progress`` is called with the
    number of batches finished (:func:`n_batches` in all).

    Returns one :class:`unmask.bench.contract.BenchRow` per (entry, temperature, task), then per
    (entry, temperature) the ``pooled`` row over the tasks: accuracy (the verifier's full
    credit), nfe and sequences (means per problem), wall_s (total), n_items,
    :func:`unmask.bench.rows.add_rate_metrics`' rates, and the columns verified, confidence,
    task, temperature, solved_each (a '0'/'1' per problem), gen_length, tokens_per_forward
    (gen_length / nfe; the gen_length positions count, trailing EOS included),
    cumulative_entropy (mean nats), gained_vs_ref / lost_vs_ref against sequential
    ``confidence`` at the same temperature when it is among the entries, and revealed
    (gen_length).
    """
    require(is_int(limit) and limit >= 1, f"limit: must be an integer >= 1, got "
                                                   f"{limit!r}")
    require(0 <= seed and seed + limit <= SELECT_SEED,
            f"seed: problems {seed}..{seed + limit - 1} must lie in [0, {SELECT_SEED}) "
            "(the training and selection problems start there)")
    require(len(temperatures) >= 1, "temperatures: need at least one")
    require(len(entries) >= 1 and len(tasks) >= 1, "entries, tasks: need at least one of each")
    for t in temperatures:
        require(t >= 0, f"temperatures: must be >= 0, got {t}")
    batches = [_Batches.of(model, t, t.items(limit, seed), BATCH_SIZE) for t in tasks]
    configs = [DecodeConfig(temperature=t, confidence=confidence) for t in temperatures]
    runs = [run for cfg in configs for entry in entries for b in batches
            for run in b.runs(entry, cfg, seed)]
    # one untimed decode first on each worker: the first model call pays one-off set-up costs
    results = iter(sweep(runs, model, batch_size=BATCH_SIZE, engine=engine, recipe=recipe,
                         warmup=Warmup(runs[0].tokens[:2], "confidence"), progress=progress,
                         cache=cache))
    rows = []
    for temperature in temperatures:
        group = []
        for entry in entries:
            parts = [_row(entry, b.task.name, temperature, b.task.gen_length,
                          b.solved(model, [next(results) for _ in b.index]), confidence)
                     for b in batches]
            group += parts + [pool_rows(parts)]
        ref = {r.columns["task"]: r for r in group
               if r.label.removesuffix(" conf=max") == "confidence"}
        for task in [t.name for t in tasks] + [POOLED]:
            add_paired_vs([r for r in group if r.columns["task"] == task], ref.get(task))
        rows += group
    for r in rows:
        r.columns["revealed"] = r.columns["gen_length"]
    add_rate_metrics(rows)
    return rows


def pool_rows(parts: list[BenchRow]) -> BenchRow:
    """One entry's rows over several tasks as one: solved_each concatenated, nfe, sequences
    and cumulative entropy weighted by problem count, gen_length likewise (so
    tokens_per_forward is total positions over total passes), wall_s summed."""
    n = sum(p.n_items for p in parts)
    each = "".join(p.columns["solved_each"] for p in parts)

    def mean(values: list[float]) -> float:
        return sum(v * p.n_items for v, p in zip(values, parts, strict=True)) / n

    nfe, gen = mean([p.nfe for p in parts]), mean([p.columns["gen_length"] for p in parts])
    first = parts[0].columns
    return BenchRow(
        parts[0].label, parts[0].name, each.count("1") / n, nfe=nfe,
        sequences=mean([p.sequences for p in parts]), wall_s=sum(p.wall_s for p in parts),
        n_items=n,
        columns={**{k: first[k] for k in ("verified", "confidence", "temperature")},
                 "task": POOLED, "solved_each": each, "gen_length": gen,
                 "tokens_per_forward": gen / nfe,
                 "cumulative_entropy": mean([p.columns["cumulative_entropy"] for p in parts])})


def aup_by_temperature(rows: list[BenchRow]) -> dict[float, float | None]:
    """The AUP (:func:`unmask.bench.rows.aup`) of the pooled rows at each temperature."""
    temps = dict.fromkeys(r.columns["temperature"] for r in rows)
    return {t: aup([r for r in rows if r.columns["task"] == POOLED
                    and r.columns["temperature"] == t]) for t in temps}


def print_tables(rows: list[dict], aups: dict, title: str) -> None:
    """One table per temperature and task (the pooled one last, with its AUP)."""
    shown = [dict(r, accuracy_pct=100 * r["accuracy"],
                  vs_seq=None if r.get("gained_vs_ref") is None
                  else f"+{r['gained_vs_ref']}/-{r['lost_vs_ref']}") for r in rows]
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    columns = [("sampler", "label", ""), ("acc %", "accuracy_pct", ".1f"),
               ("NFE", "nfe", ".1f"), ("tok/pass", "tokens_per_pass", ".2f"),
               ("seqs", "sequences", ".1f"), ("cum. H", "cumulative_entropy", ".2f"),
               ("wall s", "wall_s", ".1f"), ("vs conf.", "vs_seq", "")]
    for t, a in aups.items():
        for task in tasks:
            part = [r for r in shown if r["task"] == task and r["temperature"] == t]
            extra = f"; AUP {a:.1f}" if task == POOLED and a is not None else ""
            render_table(part, columns, f"{task}, T={t:g} — {title}{extra}")


class ReasoningBenchRunner(ReasoningBenchTask):
    """Samplers on the reasoning tasks, each answer scored by its task's verifier; a
    pooled row per sampler and temperature."""

    def check(self, options: ReasoningBench) -> ReasoningBench:
        """The options with ``tasks`` the names of known tasks (None: all of them)."""
        tasks = get_tasks(None if options.tasks is None else list(options.tasks), "--tasks")
        return dataclasses.replace(options, tasks=tuple(t.name for t in tasks))

    def load_model(self, options: ReasoningBench, device):
        return load_model(options.model, task="text").to(device)

    def recipe(self, options: ReasoningBench, model, device):
        return ModelRecipe(options.model, task="text", device=device.type)

    def n_runs(self, ctx: BenchContext) -> int:
        return n_batches(len(ctx.options.tasks), ctx.limit, len(ctx.entries),
                         len(ctx.temperatures))

    def run(self, ctx: BenchContext) -> BenchResult:
        opts = ctx.options
        tasks = get_tasks(list(opts.tasks), "--tasks")
        rows = run_bench(ctx.model, tasks, ctx.entries, ctx.limit, ctx.temperatures, ctx.seed,
                         confidence=opts.confidence, **ctx.sweep)
        aups = aup_by_temperature(rows)
        header = {"model": describe_source(ctx.model.source), "tasks": list(opts.tasks),
                  "limit": ctx.limit, "confidence": opts.confidence,
                  "aup": {str(t): a for t, a in aups.items()}}
        return BenchResult(rows, header,
                           extras={"aups": aups})

    def report(self, ctx: BenchContext, result: BenchResult) -> None:
        print_tables(result.dicts(), result.extras["aups"],
                     f"{ctx.model.source}, {ctx.limit} problems per task, seed {ctx.seed}")

    def plot(self, ctx: BenchContext, result: BenchResult, path) -> None:
        pooled = [r for r in result.dicts() if r["task"] == POOLED]
        if len({r["temperature"] for r in pooled}) > 1:
            pooled = [dict(r, label=f"{r['label']} T={r['temperature']:g}") for r in pooled]
        pareto_plot(pooled, path, x="tokens_per_pass", y="accuracy",
                    xlabel="tokens per forward pass", ylabel="accuracy %",
                    title="pooled reasoning tasks")


BENCH_TASK = ReasoningBenchRunner()
