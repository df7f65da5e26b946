"""The protein benchmark: proteins of given lengths generated from all-masked rows by every
sampler with one model, scored by composition divergences against held-out proteins."""

from __future__ import annotations

import numpy as np
import torch

from unmask.bench.contract import BenchContext, BenchResult, BenchRow
from unmask.bench.plot import pareto_plot
from unmask.bench.recipe import ModelRecipe
from unmask.bench.rows import add_nfe_vs_sequential, add_rate_metrics, aup
from unmask.bench.sweep import Run, Warmup, sweep
from unmask.decode import DecodeConfig
from unmask.errors import UnmaskError, require
from unmask.parallel.workers import Engine
from unmask.pretrained import describe_source
from unmask.protein.bench_task import ProteinBench, ProteinBenchTask
from unmask.protein.data import ProteinSplit, background_composition, model_split
from unmask.protein.metrics import generation_metrics
from unmask.protein.model import load_protein_model
from unmask.protein.tokens import (
    MAX_GEN_LENGTH,
    MIN_GEN_LENGTH,
    generation_inputs,
    random_lengths,
)
from unmask.samplers.spec import SamplerSpec

#: the published reference (ESM-C, 500 proteins of length 50-100 against 500 UniRef50
#: references): (label, mean NFE, JSD)
SEED_REFERENCE = [("ref sequential", 74.8, 0.093), ("ref top-12", 6.2, 0.218),
                  ("ref MI-guided γ=4", 10.0, 0.174)]


def run_bench(model, split: ProteinSplit, entries: list[SamplerSpec], *, n: int = 500,
                  seed: int = 0, temperature: float = 1.0, min_length: int = MIN_GEN_LENGTH,
                  max_length: int = MAX_GEN_LENGTH, batch_size: int = 500,
                  natural: bool = True, progress=None, engine: Engine | None = None,
                  recipe: ModelRecipe | None = None, cache=None
                  ) -> tuple[list[BenchRow], torch.Tensor]:
    """Generate ``n`` proteins with each entry; (one :class:`unmask.bench.contract.BenchRow` per
    entry, lengths (n,)).

    The sweep is cut into shards of ``batch_size`` proteins per entry, decoded on ``engine``
    (default: this process; protein r decodes with seed ``seed * n + r`` whatever the shard):
    see :func:`unmask.bench.sweep.sweep`, whose ``recipe`` tells a Ray engine's workers how to load
    ``model``, and whose ``cache`` folder keeps finished shards. ``wall_s`` sums the shards'
    decode seconds.

    Every entry decodes the same lengths (uniform in [min_length, max_length], from ``seed``)
    at ``temperature`` (0 would give one protein per length). Shared fields: label, name,
    accuracy (1 - jsd_heldout, the closeness the Pareto plot and :func:`unmask.bench.rows.aup`
    read), nfe, sequences (mean sequences evaluated per protein), wall_s, n_items (``n``),
    and :func:`unmask.bench.rows.add_rate_metrics`'s tokens_per_pass and sequences_per_token
    (wall_per_solved None: generation solves no item). Columns: params, cumulative_entropy,
    proteins_per_s, revealed (mean residues decoded per protein), the metrics of
    :func:`unmask.protein.metrics.generation_metrics`, closeness (the accuracy, under its
    older name). With ``natural``, two reference rows
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
            rows.append(_row(label, "natural", {}, n,
                             generation_metrics(tokens, split.heldout, background)))
    cfg = DecodeConfig(temperature=temperature)
    # one untimed decode first, so one-off set-up costs are not charged to the first sampler
    results = sweep([Run(entry, x, cfg, seed * n) for entry in entries], model,
                    batch_size=batch_size, engine=engine, recipe=recipe,
                    warmup=Warmup(x[:2], "topk", cfg), progress=progress, cache=cache)
    for entry, (res, wall) in zip(entries, results, strict=True):
        params = {k: v for k, v in entry.params.items()
                  if isinstance(v, (int, float, str, bool))}
        rows.append(_row(entry.label, entry.name, params, n,
                         generation_metrics(res.tokens, split.heldout, background),
                         res, wall, float(lengths.mean())))
    add_rate_metrics(rows, per_solved=False)
    return rows, torch.as_tensor(lengths)


def _row(label: str, name: str, params: dict, n: int, metrics: dict, res=None,
         wall: float | None = None, revealed: float | None = None) -> BenchRow:
    """One row: ``metrics`` of ``n`` proteins, decoded (``res``, ``wall`` seconds,
    ``revealed`` residues per protein) or natural (None: no decoding, no cost)."""
    nfe = sequences = entropy = None
    if res is not None:
        nfe, sequences = float(res.nfe.double().mean()), float(res.sequences.double().mean())
        entropy = float(res.cumulative_entropy.mean())
    return BenchRow(
        label, name, 1.0 - metrics["jsd_heldout"], nfe=nfe, sequences=sequences, wall_s=wall,
        n_items=n,
        columns={"params": params, "cumulative_entropy": entropy,
                 "proteins_per_s": None if wall is None else n / wall, "revealed": revealed,
                 **metrics, "closeness": 1.0 - metrics["jsd_heldout"]})


class ProteinBenchRunner(ProteinBenchTask):
    """Proteins generated by every sampler: composition closeness to held-out proteins
    against forward passes."""

    def check(self, options: ProteinBench) -> ProteinBench:
        if options.min_length > options.max_length:
            raise UnmaskError(f"--min-length, --max-length: lengths from {options.min_length} "
                              f"to {options.max_length} is an empty range")
        return options

    def load_model(self, options: ProteinBench, device):
        return load_protein_model(options.model).to(device)

    def recipe(self, options: ProteinBench, model, device):
        return ModelRecipe(options.model, task="protein", device=device.type)

    def run(self, ctx: BenchContext) -> BenchResult:
        opts, model = ctx.options, ctx.model
        split = model_split(opts.fasta, opts.heldout_fraction, opts.split_seed, model.source)
        [temperature] = ctx.temperatures
        rows, lengths = run_bench(
            model, split, ctx.entries, n=ctx.limit, seed=ctx.seed, temperature=temperature,
            min_length=opts.min_length, max_length=opts.max_length,
            batch_size=opts.batch_size, natural=not opts.no_natural, **ctx.sweep)
        add_nfe_vs_sequential(rows)
        for r in rows:
            r.columns["low_complexity_pct"] = 100 * r.columns["low_complexity"]
            r.columns["distinct_pct"] = 100 * r.columns["distinct"]
        score = aup(rows)
        notes = [] if score is None else [
            f"AUP over these rows: {score:.1f} (accuracy-weighted area under "
            f"100 × (1 − JSD aa) vs tokens per pass, d3LLM)"]
        notes.append("published reference (ESM-C, 500 proteins vs 500 UniRef50): " + "; ".join(
            f"{label[4:]} {nfe} passes / JSD {j}" for label, nfe, j in SEED_REFERENCE))
        header = {"model": describe_source(model.source), "n": ctx.limit,
                  "temperature": temperature, "lengths": [opts.min_length, opts.max_length],
                  "mean_length": float(lengths.double().mean()),
                  "data": split.source, "heldout_proteins": len(split.heldout), "aup": score}
        return BenchResult(rows, header, notes)

    def title(self, ctx: BenchContext, result: BenchResult) -> str:
        h = result.header
        bf16 = " (bf16)" if ctx.model.autocast_bf16 else ""
        return (f"Proteins: {h['n']} of length {h['lengths'][0]}-{h['lengths'][1]} "
                f"(mean {h['mean_length']:.1f}) at temperature {h['temperature']:g}, "
                f"model {h['model']}{bf16}; JSD in nats vs {h['heldout_proteins']} held-out "
                "proteins")

    def plot(self, ctx: BenchContext, result: BenchResult, path) -> None:
        h = result.header
        pareto_plot([r for r in result.dicts() if r["nfe"] is not None], path,
                    ylabel=self.accuracy_label,
                    title=f"{h['n']} proteins of length {h['lengths'][0]}-{h['lengths'][1]}, "
                          f"temperature {h['temperature']:g}, {h['model']}",
                    references=[(label, nfe, 100 * (1 - j))
                                for label, nfe, j in SEED_REFERENCE])


BENCH_TASK = ProteinBenchRunner()
