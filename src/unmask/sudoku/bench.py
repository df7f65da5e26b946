"""The Sudoku benchmark: every sampler on one puzzle set with one model, side by side."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from unmask.bench.contract import BenchContext, BenchResult, BenchRow
from unmask.bench.plot import pareto_plot
from unmask.bench.recipe import ModelRecipe
from unmask.bench.rows import add_nfe_vs_sequential, add_paired_vs, add_rate_metrics, aup
from unmask.bench.sweep import Run, Warmup, sweep
from unmask.bench.table import render_table
from unmask.corrector import Corrector
from unmask.decode import DecodeConfig
from unmask.errors import UnmaskError
from unmask.mi.estimator import MIEstimator, load_estimator
from unmask.models.auto import load_model
from unmask.parallel.workers import Engine
from unmask.pretrained import describe_source, shipped_head
from unmask.samplers.base import sampler_class
from unmask.samplers.spec import SamplerSpec
from unmask.sudoku.bench_task import SEED_REFERENCE, SudokuBench, SudokuBenchTask
from unmask.sudoku.datasets import set_puzzles
from unmask.sudoku.maps import peer_mask
from unmask.sudoku.rules import RulesExtras
from unmask.sudoku.solver import is_valid_solution, rounds_of_singles
from unmask.sudoku.tokens import grid_to_tokens, tokens_to_grid


def run_bench(model, puzzles: np.ndarray, entries: list[SamplerSpec], *, seed: int = 0,
                 batch_size: int = 1000, config: DecodeConfig | None = None,
                 corrector_hooks=(), progress=None, engine: Engine | None = None,
                 recipe: ModelRecipe | None = None, cache=None, rules: bool = False
                 ) -> list[BenchRow]:
    """Solve ``puzzles`` (P, 81) with each entry (decode settings ``config``, default argmax;
    entries marked ``corrected`` with ``corrector_hooks``: :func:`unmask.hooks.corrector_hooks`);
    one :class:`unmask.bench.contract.BenchRow` per entry, its accuracy the share solved.

    The sweep is cut into shards of ``batch_size`` puzzles per entry, decoded on ``engine``
    (default: this process; puzzle p decodes with seed ``seed + p`` whatever the shard): see
    :func:`unmask.bench.sweep.sweep`, whose ``recipe`` tells a Ray engine's workers how to load
    ``model`` and the corrector, and whose ``cache`` folder keeps finished shards.
    ``rules``: decode under the Sudoku rules constraint (:mod:`unmask.sudoku.rules`).

    Shared fields: label, name, accuracy (share solved), nfe (mean model calls), sequences
    (mean sequences evaluated), wall_s (decode seconds, summed over shards), n_items, and
    :func:`unmask.bench.rows.add_rate_metrics`'s tokens_per_pass, sequences_per_token and
    wall_per_solved. Columns: corrected (decoded with the corrector), verified (every pass's
    set verified), verify_tolerance, params, solved (the accuracy, under its older name),
    solved_each ('0'/'1' per puzzle, in order), steps (mean decoding passes: equal to nfe
    except for samplers that call the model beyond the loop's pass, such as lookahead and the
    probing oracle), cumulative_entropy (mean nats), remasked (mean tokens the corrector sent
    back), rejected (mean positions verification held back), same_pass_clash (share of boards
    with a :func:`same_pass_clashes` pair), puzzles_per_s, revealed (mean tokens decoded per
    puzzle), dead_end (share of boards that reached a blank the rules leave no digit for),
    cut_passes (mean passes whose commit the rules cut).
    """

    x = grid_to_tokens(puzzles)
    extras = RulesExtras() if rules else None
    runs = [Run(entry, x, config or DecodeConfig(), seed, extras) for entry in entries]
    # one untimed decode first, so one-off set-up costs are not charged to the first sampler
    results = sweep(runs, model, batch_size=batch_size, hooks=corrector_hooks, engine=engine,
                    recipe=recipe, warmup=Warmup(x[:2]), progress=progress,
                    cache=cache)
    revealed = float((x == model.mask_id).sum(1).double().mean())
    rows = [_row(entry, res, wall, puzzles, revealed) for entry, (res, wall)
            in zip(entries, results, strict=True)]
    add_rate_metrics(rows)
    return rows


def _row(entry: SamplerSpec, res, wall: float, puzzles: np.ndarray, revealed: float
         ) -> BenchRow:
    """One entry's row from its decode of ``puzzles`` (:func:`run_bench`)."""
    solved = is_valid_solution(tokens_to_grid(res.tokens), puzzles)
    share = float(solved.mean())
    return BenchRow(
        entry.label, entry.name, share, nfe=float(res.nfe.double().mean()),
        sequences=float(res.sequences.double().mean()), wall_s=wall, n_items=len(puzzles),
        columns={"corrected": entry.corrected, "verified": entry.verified,
                 "verify_tolerance": 1.0 if entry.verify is None else entry.verify,
                 "params": {k: v for k, v in entry.params.items()
                            if isinstance(v, (int, float, str, bool))},
                 "solved": share, "solved_each": "".join("1" if v else "0" for v in solved),
                 "steps": float(res.steps.double().mean()),
                 "cumulative_entropy": float(res.cumulative_entropy.mean()),
                 **{k: float(res.stats[k].double().mean()) if k in res.stats else 0.0
                    for k in ("remasked", "rejected", "dead_end", "cut_passes")},
                 "same_pass_clash": float(same_pass_clashes(res.tokens, res.reveal_step)
                                          .gt(0).double().mean()),
                 "puzzles_per_s": len(puzzles) / wall, "revealed": revealed})


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


def estimator_records(entries: list[SamplerSpec], model) -> list[dict]:
    """The estimators the entries read (those of samplers with an ``estimator`` field), one
    record (source, fingerprint) per distinct source: each entry's own (``--estimator`` or a
    spec's ``estimator=FOLDER``; None: the shipped one)."""
    records = {}
    for e in entries:
        fields = {f.name for f in dataclasses.fields(sampler_class(e.name))}
        if "estimator" not in fields or e.params.get("estimator") in records:
            continue
        source = e.params.get("estimator")
        records[source] = {"source": source or
                           f"shipped '{shipped_head(MIEstimator.KIND, model)}'",
                           "fingerprint": load_estimator(source, model=model).fingerprint()}
    return list(records.values())


class SudokuBenchRunner(SudokuBenchTask):
    """Every sampler on one puzzle set: solved share against forward passes."""

    def load_model(self, options: SudokuBench, device):
        return load_model(options.model, task="sudoku").to(device)

    def recipe(self, options: SudokuBench, model, device):
        return ModelRecipe(options.model, task="sudoku", device=device.type)

    def run(self, ctx: BenchContext) -> BenchResult:
        opts, model = ctx.options, ctx.model
        if opts.no_self_condition and not model.self_conditioning:
            raise UnmaskError("--no-self-condition: the model does not self-condition")
        puzzles = set_puzzles(opts.set)[: ctx.limit]
        [temperature] = ctx.temperatures
        config = DecodeConfig(temperature=temperature,
                              self_condition=not opts.no_self_condition)
        rows = run_bench(model, puzzles, ctx.entries, seed=ctx.seed,
                            batch_size=opts.batch_size, config=config,
                            corrector_hooks=ctx.hooks, rules=opts.rules, **ctx.sweep)
        add_paired_vs(rows, add_nfe_vs_sequential(rows))
        for r in rows:
            c = r.columns
            c["solved_pct"] = 100 * c["solved"]
            c["same_pass_clash_pct"] = 100 * c["same_pass_clash"]
            c["dead_end_pct"] = 100 * c["dead_end"]
            c["vs_sequential"] = (None if c["gained_vs_ref"] is None
                                  else f"+{c['gained_vs_ref']}/-{c['lost_vs_ref']}")
        ref = singles_reference(puzzles)
        estimators = estimator_records(ctx.entries, model)
        corrector = ctx.sweep["recipe"].corrector
        header = {
            "set": opts.set, "puzzles": len(puzzles), "model": describe_source(model.source),
            # a shipped name outlives its weights: the fingerprint says which model ran
            "model_fingerprint": model.fingerprint(),
            "self_condition": model.self_conditioning and not opts.no_self_condition,
            # which MI estimator the estimator-reading rows read (None: no such row; a list
            # when specs name different ones)
            "estimator": (None if not estimators else estimators[0] if len(estimators) == 1
                          else estimators),
            "corrector": None if corrector is None else {
                "source": opts.corrector or f"shipped '{shipped_head(Corrector.KIND, model)}'",
                "remask_threshold": opts.remask_threshold, "max_remasks": opts.max_remasks,
                "ban_remasked": opts.ban_remasked},
            "singles_reference": ref, "rules": opts.rules}
        return BenchResult(rows, header,
                           _reference_notes(rows, ref, estimators))

    def title(self, ctx: BenchContext, result: BenchResult) -> str:
        head = result.header
        return (f"Sudoku '{head['set']}', {head['puzzles']} puzzles, model {head['model']} "
                + ("without its previous-pass input " if ctx.options.no_self_condition else "")
                + f"(mean {head['singles_reference']['mean_blanks']:.1f} blanks)")

    def report(self, ctx: BenchContext, result: BenchResult) -> None:
        corrected = result.header["corrector"] is not None
        verified = any(e.verified for e in ctx.entries)
        render_table(result.dicts(), [
            ("sampler", "label", ""), ("solved %", "solved_pct", ".1f"),
            ("vs seq. +/-", "vs_sequential", ""),
            ("mean NFE", "nfe", ".1f"), ("NFE / seq.", "nfe_vs_sequential", ".2f"),
            ("passes", "steps", ".1f"), ("seqs", "sequences", ".1f"),
            ("cum. H", "cumulative_entropy", ".2f"),
            *([("remasked", "remasked", ".2f")] if corrected else []),
            *([("held back", "rejected", ".2f")] if verified else []),
            *([("dead end %", "dead_end_pct", ".1f"), ("cut", "cut_passes", ".2f")]
              if ctx.options.rules else []),
            ("clash %", "same_pass_clash_pct", ".1f"),
            ("tok/pass", "tokens_per_pass", ".2f"),
            ("wall s", "wall_s", ".1f"), ("s/solved", "wall_per_solved", ".3f")],
            self.title(ctx, result))
        for line in result.notes:
            print(line)

    def plot(self, ctx: BenchContext, result: BenchResult, path) -> None:
        pareto_plot(result.dicts(), path, title=self.title(ctx, result),
                    # the published points were measured on the hard set
                    references=SEED_REFERENCE if ctx.options.set == "hard" else ())


def _reference_notes(rows: list[BenchRow], ref: dict, estimators: list[dict]) -> list[str]:
    """The lines under the table: AUP, the singles reference, the estimators, the paper."""
    notes = []
    score = aup(rows)
    if score is not None:
        notes.append(f"AUP (accuracy-weighted area under solved vs tokens per pass, d3LLM): "
                     f"{score:.1f}")
    rounds = (f"{ref['mean_rounds']:.1f} rounds" if ref["mean_rounds"] is not None else "n/a")
    notes.append(f"physical reference: parallel naked/hidden singles finish "
                 f"{100 * ref['singles_share']:.0f}% of these puzzles ({rounds} where they "
                 f"do); a perfect MDM needs 1 pass.")
    notes += [f"MI estimator: {est['source']} (weights {est['fingerprint']})"
              for est in estimators]
    notes.append("published reference (1,000 hard): " + "; ".join(
        f"{label[4:]} {nfe} passes / {acc}%" for label, nfe, acc in SEED_REFERENCE))
    return notes


BENCH_TASK = SudokuBenchRunner()
