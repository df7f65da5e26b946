"""The antibody benchmark: every sampler on held-out germline heavy chains in the settings of
:mod:`unmask.antibody.settings` (CDR infilling, high-ratio random masking, unconditional
generation at V-gene length and at full heavy-chain length), scored by residue recovery,
pseudo-perplexity, diversity and amino-acid composition, and, for generation, the chain type
of each sequence (:mod:`unmask.antibody.typing`: the share typed as heavy chain), beside what
decoding cost."""

from __future__ import annotations

import numpy as np

from unmask.antibody.bench_task import GENERATION, SETTINGS, AntibodyBench, AntibodyBenchTask
from unmask.antibody.data import load_heavy_chains
from unmask.antibody.metrics import (
    composition_jsd,
    mean_pairwise_identity,
    pseudo_perplexity,
    residue_recovery,
)
from unmask.antibody.settings import (
    HEAVY_LENGTHS,
    InfillCase,
    cdr_infilling,
    length_distribution,
    random_masking,
    unconditional,
)
from unmask.antibody.typing import chain_types
from unmask.bench.contract import BenchContext, BenchResult, BenchRow
from unmask.bench.recipe import ModelRecipe
from unmask.bench.rows import SEQUENTIAL_LABELS
from unmask.bench.sweep import Run, Warmup, sweep
from unmask.bench.table import render_table
from unmask.decode import DecodeConfig
from unmask.infill import plan_infill
from unmask.models.auto import CONVERTED, load_model
from unmask.pretrained import describe_source
from unmask.samplers.spec import SamplerSpec

#: samplers that probe ground-truth MI every pass: they decode the first --oracle-limit cases
ORACLES = ("mi-oracle",)


def _n_cases(setting: str, limit: int) -> int:
    """How many cases :func:`setting_cases` gives for ``limit``."""
    return limit if setting in GENERATION else min(limit, len(load_heavy_chains("held_out")))


def setting_cases(setting: str, limit: int, seed: int) -> tuple[list[InfillCase], list[str]]:
    """(the cases of ``setting`` over the first ``limit`` held-out chains, or ``limit``
    unconditional ones; the held-out residue strings, the composition reference)."""
    held_out = load_heavy_chains("held_out")
    chains = held_out[:limit]
    cases = (cdr_infilling(chains) if setting == "cdr"
             else random_masking(chains, seed=seed) if setting == "random"
             else unconditional(limit, HEAVY_LENGTHS, seed=seed) if setting == "heavy"
             else unconditional(limit, length_distribution(held_out), seed=seed))
    return cases, [c.sequence for c in held_out]


def score_fills(model, entry: SamplerSpec, setting: str, cases: list[InfillCase],
                reference: list[str], gens, wall: float, *, perplexity: bool) -> BenchRow:
    """One row from the :func:`unmask.infill` generations of ``setting``'s ``cases``: its
    accuracy the residue recovery (generation, which has no truth: closeness to the natural
    composition, 1 - JSD, and the chain type of each sequence)."""
    texts = [g.text for g in gens]
    masked = np.array([c.masked.sum() for c in cases], dtype=float)
    each = (None if cases[0].truth is None else
            np.rint(residue_recovery(texts, cases) * masked).astype(int))
    recovery = None if each is None else float(each.sum() / masked.sum())
    jsd = composition_jsd(texts, reference)
    score = recovery if recovery is not None else 1.0 - jsd
    nfe = float(np.mean([g.nfe for g in gens]))
    pll_each = (None if not perplexity else
                (-np.log(pseudo_perplexity(model, texts))).tolist())
    heavy_each = (None if setting not in GENERATION else
                  [int(t.heavy) for t in chain_types(texts)])
    return BenchRow(
        entry.label, entry.name, score, nfe=nfe,
        sequences=float(np.mean([g.sequences for g in gens])),
        tokens_per_pass=float(masked.mean()) / nfe, wall_s=wall, n_items=len(cases),
        columns={"task": setting, "verified": entry.verified, "recovery": recovery,
                 "pseudo_perplexity": (None if pll_each is None
                                       else float(np.exp(-np.asarray(pll_each)).mean())),
                 # mean per chain of its mean log p(x_i | the rest), nats per residue
                 "pll": None if pll_each is None else float(np.mean(pll_each)),
                 "heavy_share": None if heavy_each is None else float(np.mean(heavy_each)),
                 "identity": mean_pairwise_identity(texts) if len(texts) > 1 else None,
                 "jsd_heldout": jsd, "score": score, "revealed": float(masked.mean()),
                 # per chain, for paired comparisons (:func:`paired_recovery`)
                 "recovered_each": None if each is None else each.tolist(),
                 "masked_each": masked.astype(int).tolist(),
                 "nfe_each": [g.nfe for g in gens],
                 "pll_each": pll_each, "heavy_each": heavy_each})


def paired_recovery(row: BenchRow, ref: BenchRow) -> tuple[float, float] | None:
    """(difference, standard error) of ``row``'s pooled recovery minus ``ref``'s, in points,
    paired by chain: d_c = residues right in chain c by ``row`` minus by ``ref``, difference
    = sum d / sum n, standard error = sqrt(C) sd(d) / sum n over the C chains (the chains are
    the independent units, not the residues), over the chains both rows decoded (a row of an
    oracle decodes the first few: the comparison is on those). None when either row has no
    truth to recover or their chains differ."""
    a, b = row.columns.get("recovered_each"), ref.columns.get("recovered_each")
    if a is None or b is None:
        return None
    c = min(len(a), len(b))
    masked = row.columns["masked_each"][:c]
    if masked != ref.columns["masked_each"][:c]:
        return None
    d = np.asarray(a[:c], dtype=float) - np.asarray(b[:c], dtype=float)
    n = float(np.sum(masked))
    se = float(np.sqrt(len(d)) * d.std(ddof=1) / n) if len(d) > 1 else float("nan")
    return 100.0 * float(d.sum()) / n, 100.0 * se


def paired_mean(row: BenchRow, ref: BenchRow, key: str, scale: float = 1.0
                ) -> tuple[float, float] | None:
    """(mean, standard error) over the chains both rows decoded of ``row``'s per-chain
    ``key`` (a list column: ``pll_each``, ``heavy_each``) minus ``ref``'s, times ``scale``;
    chain c of both rows decoded with the same seed. None when either lacks the column."""
    a, b = row.columns.get(key), ref.columns.get(key)
    if a is None or b is None:
        return None
    c = min(len(a), len(b))
    d = scale * (np.asarray(a[:c], dtype=float) - np.asarray(b[:c], dtype=float))
    se = float(d.std(ddof=1) / np.sqrt(c)) if c > 1 else float("nan")
    return float(d.mean()), se


def generation_vs_sequential(rows: list[BenchRow]) -> list[tuple[str | None, str | None]]:
    """Per row of a generation setting: (heavy share minus the first sequential row's, in
    points, and PLL per residue minus its, in nats), each ``+d ± se`` paired by chain
    (:func:`paired_mean`); None without such a row or column."""
    seq = next((r for label in SEQUENTIAL_LABELS for r in rows if r.label == label), None)
    out = []
    for r in rows:
        pair = [None if seq is None or r is seq else paired_mean(r, seq, key, scale)
                for key, scale in (("heavy_each", 100.0), ("pll_each", 1.0))]
        out.append(tuple(None if d is None else f"{d[0]:+.{p}f} ± {d[1]:.{p}f}"
                         for d, p in zip(pair, (0, 3), strict=True)))
    return out


def vs_sequential(rows: list[BenchRow]) -> list[str | None]:
    """Per row of one setting: its recovery minus that of the first sequential row
    (confidence, else entropy, margin, uniform) as ``+d ± se`` points, paired by chain
    (:func:`paired_recovery`); None without such a row or a truth."""
    seq = next((r for label in SEQUENTIAL_LABELS for r in rows if r.label == label), None)
    diffs = [None if seq is None or r is seq else paired_recovery(r, seq) for r in rows]
    return [None if d is None else f"{d[0]:+.1f} ± {d[1]:.1f}" for d in diffs]


class AntibodyBenchRunner(AntibodyBenchTask):
    """Every sampler on antibody heavy chains in three settings: recovery (generation:
    1 - composition JSD) against forward passes."""

    def load_model(self, options: AntibodyBench, device):
        return load_model(options.model or "antiberty").to(device)

    def recipe(self, options: AntibodyBench, model, device):
        return ModelRecipe(options.model or "antiberty", device=device.type)

    def n_runs(self, ctx: BenchContext) -> int:
        size = ctx.options.batch_size
        return sum(-(-n // (size or n)) for e in ctx.entries for n in (
            _n_cases(s, ctx.limit if e.name not in ORACLES else min(ctx.limit,
                                                                    ctx.options.oracle_limit))
            for s in ctx.options.settings))

    def run(self, ctx: BenchContext) -> BenchResult:
        opts, [temperature] = ctx.options, ctx.temperatures
        config = DecodeConfig(temperature=temperature)
        parts, runs = [], []
        for setting in opts.settings:
            every, reference = setting_cases(setting, ctx.limit, ctx.seed)
            plans = {}  # cases decoded -> (cases, plan, chunks): all, and the oracles' first
            for entry in ctx.entries:
                n = min(len(every), opts.oracle_limit) if entry.name in ORACLES else len(every)
                if n not in plans:
                    plan = plan_infill(ctx.model, [c.template for c in every[:n]],
                                       batch_size=opts.batch_size)
                    plans[n] = (every[:n], plan, plan.chunks())
                cases, plan, chunks = plans[n]
                parts.append((setting, entry, cases, reference, plan, chunks))
                # template lo + r decodes with seed + lo + r, as in unmask.infill
                runs += [Run(entry, x, config, ctx.seed + lo, extras=ends)
                         for lo, x, ends in chunks]
        results = iter(sweep(runs, ctx.model, batch_size=max(len(r.tokens) for r in runs),
                             warmup=Warmup(runs[0].tokens[:2], "topk", config), **ctx.sweep))
        rows = []
        for setting, entry, cases, reference, plan, chunks in parts:
            gens, wall = [], 0.0
            for lo, _, ends in chunks:
                res, seconds = next(results)
                gens += plan.read(res, lo, ends, seconds)
                wall += seconds
            rows.append(score_fills(ctx.model, entry, setting, cases, reference, gens, wall,
                                    perplexity=not opts.no_perplexity))
        name = opts.model or "antiberty"  # a converted model by its name, not the cache path
        header = {"model": name if name in CONVERTED else describe_source(ctx.model.source),
                  "settings": list(opts.settings),
                  "limit": ctx.limit}
        return BenchResult(rows, header)

    def report(self, ctx: BenchContext, result: BenchResult) -> None:
        for setting in dict.fromkeys(r.columns["task"] for r in result.rows):
            part = [r for r in result.rows if r.columns["task"] == setting]
            shown = []
            for r, vs, (heavy_vs, pll_vs) in zip(part, vs_sequential(part),
                                                 generation_vs_sequential(part), strict=True):
                recovery, heavy = r.columns["recovery"], r.columns.get("heavy_share")
                shown.append(dict(r.to_dict(), vs_sequential=vs,
                                  recovery_pct=None if recovery is None else 100 * recovery,
                                  heavy_pct=None if heavy is None else 100 * heavy,
                                  heavy_vs_sequential=heavy_vs, pll_vs_sequential=pll_vs))
            columns = self.generation_columns if setting in GENERATION else self.columns
            render_table(shown, columns,
                         f"{setting}: {SETTINGS[setting]} — {result.header['model']}, "
                         f"{ctx.limit} chains (mi-oracle: the first {ctx.options.oracle_limit})")


BENCH_TASK = AntibodyBenchRunner()
