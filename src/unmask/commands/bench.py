"""``unmask sudoku bench``: every sampler on one puzzle set, a table and a Pareto plot."""

from __future__ import annotations

import argparse
import dataclasses
import json

from unmask.bench import add_nfe_vs_sequential, add_paired_vs, aup, pareto_plot, render_table
from unmask.commands.common import (
    IMAGE_SUFFIXES,
    JSON_SUFFIXES,
    add_cache_arg,
    add_corrector_args,
    add_device_arg,
    add_engine_args,
    add_presets_arg,
    add_seed_arg,
    add_threads_arg,
    bench_entries,
    corrector_from_args,
    corrector_recipe,
    distinct_outputs,
    driver_device,
    engine_from_args,
    output_path,
    positive_int,
    progress_bar,
)
from unmask.commands.registry import arguments, command
from unmask.corrector import SHIPPED_CORRECTOR
from unmask.decode import DecodeConfig
from unmask.errors import UnmaskError
from unmask.io import atomic_write_text
from unmask.mi.estimator import SHIPPED_ESTIMATOR, load_estimator
from unmask.models.auto import check_task, load_model
from unmask.pretrained import describe_source
from unmask.samplers.base import sampler_class
from unmask.sudoku.bench import DEFAULT_SPECS, SEED_REFERENCE, bench_sudoku, singles_reference
from unmask.sudoku.datasets import set_puzzles
from unmask.sweep import ModelRecipe


def _bench_sudoku_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", default="hard",
                   help="hard | medium | a UTF-8 puzzle file (default hard)")
    add_presets_arg(p)
    p.add_argument("--samplers", nargs="+", default=None, metavar="SPEC",
                   help="sampler specs NAME[:K=V,K=V][+verify[=T]][+corrector] (default: the "
                        "full comparison)")
    p.add_argument("--limit", type=positive_int, default=None, help="first N puzzles only")
    p.add_argument("--model", default=None,
                   help="shipped model name or model folder (default: the shipped one)")
    p.add_argument("--estimator", default=None,
                   help="MI estimator folder for mi-guided (default: the shipped one)")
    add_corrector_args(p)
    p.add_argument("--batch-size", type=positive_int, default=1000)
    add_seed_arg(p)
    add_threads_arg(p)
    add_device_arg(p)
    add_engine_args(p)
    add_cache_arg(p)
    p.add_argument("--no-self-condition", action="store_true",
                   help="(self-conditioning models) give every pass zeros instead of the "
                        "previous pass's beliefs, to measure what they add")
    p.add_argument("--json", default=None, metavar="OUT.json", help="write results as JSON")
    p.add_argument("--plot", default=None, metavar="OUT.png",
                   help="Pareto plot (.png, .pdf or .svg)")
    p.add_argument("--quiet", action="store_true")


@command("sudoku", "bench", help="solved %% vs forward passes for every sampler on Sudoku")
@arguments(_bench_sudoku_args)
def bench_sudoku_cmd(args: argparse.Namespace) -> int:
    engine, device = engine_from_args(args)
    json_path = output_path(args.json, "--json", JSON_SUFFIXES)
    plot_path = output_path(args.plot, "--plot", IMAGE_SUFFIXES)
    distinct_outputs(json=json_path, plot=plot_path)
    entries = bench_entries(args.samplers, DEFAULT_SPECS, args.estimator, presets=args.preset)
    puzzles = set_puzzles(args.set)[: args.limit]
    model = load_model(args.model, task="sudoku").to(driver_device(engine, device))
    check_task(model, "sudoku", args.model or "sudoku", required=True)
    if args.no_self_condition and not model.self_conditioning:
        raise UnmaskError("--no-self-condition: the model does not self-condition")
    config = DecodeConfig(self_condition=not args.no_self_condition)
    corrector, hooks = corrector_from_args(args, model, any(e.corrected for e in entries))

    estimators = _estimator_records(entries, model)
    with progress_bar(len(entries), "samplers", enabled=not args.quiet) as update:
        rows = bench_sudoku(model, puzzles, entries, seed=args.seed,
                            batch_size=args.batch_size, config=config, corrector_hooks=hooks,
                            progress=update, engine=engine, cache=args.cache,
                            recipe=ModelRecipe(args.model, task="sudoku", device=device.type,
                                               bf16=model.autocast_bf16,
                                               corrector=corrector_recipe(args, corrector)))
    ref = singles_reference(puzzles)
    add_paired_vs(rows, add_nfe_vs_sequential(rows))
    for r in rows:
        r["solved_pct"] = 100 * r["solved"]
        r["same_pass_clash_pct"] = 100 * r["same_pass_clash"]
        r["vs_sequential"] = (None if r["gained_vs_ref"] is None
                              else f"+{r['gained_vs_ref']}/-{r['lost_vs_ref']}")
    source = describe_source(model.source)
    title = (f"Sudoku '{args.set}', {len(puzzles)} puzzles, model {source} "
             + ("without its previous-pass input " if args.no_self_condition else "")
             + f"(mean {ref['mean_blanks']:.1f} blanks)")
    _print_sudoku_table(rows, title, corrected=corrector is not None,
                        verified=any(e.verified for e in entries))
    _print_references(rows, ref, estimators)
    if json_path is not None:
        atomic_write_text(json_path, json.dumps(
            {"set": args.set, "puzzles": len(puzzles), "model": source,
             # a shipped name outlives its weights: the fingerprint says which model ran
             "model_fingerprint": model.fingerprint(),
             "self_condition": model.self_conditioning and not args.no_self_condition,
             # which MI estimator the estimator-reading rows read (None: no such row; a list
             # when specs name different ones)
             "estimator": (None if not estimators else estimators[0] if len(estimators) == 1
                           else estimators),
             "corrector": None if corrector is None else {
                 "source": args.corrector or f"shipped '{SHIPPED_CORRECTOR}'",
                 "remask_threshold": args.remask_threshold, "max_remasks": args.max_remasks,
                 "ban_remasked": args.ban_remasked},
             "singles_reference": ref, "rows": rows}, indent=2) + "\n")
    if plot_path is not None:
        pareto_plot([{**r, "accuracy": r["solved"]} for r in rows], plot_path,
                    title=title,  # the published points were measured on the hard set
                    references=SEED_REFERENCE if args.set == "hard" else ())
        print(f"plot: {plot_path}")
    return 0


def _estimator_records(entries, model) -> list[dict]:
    """The estimators the entries read (those of samplers with an ``estimator`` field), one
    record (source, fingerprint) per distinct source: each entry's own (``--estimator`` or a
    spec's ``estimator=FOLDER``; None: the shipped one)."""
    records = {}
    for e in entries:
        fields = {f.name for f in dataclasses.fields(sampler_class(e.name))}
        if "estimator" not in fields or e.params.get("estimator") in records:
            continue
        source = e.params.get("estimator")
        records[source] = {"source": source or f"shipped '{SHIPPED_ESTIMATOR}'",
                           "fingerprint": load_estimator(source, model=model).fingerprint()}
    return list(records.values())


def _print_sudoku_table(rows: list[dict], title: str, *, corrected: bool, verified: bool
                        ) -> None:
    render_table(rows, [("sampler", "label", ""), ("solved %", "solved_pct", ".1f"),
                        ("vs seq. +/-", "vs_sequential", ""),
                        ("mean NFE", "nfe", ".1f"), ("NFE / seq.", "nfe_vs_sequential", ".2f"),
                        ("passes", "steps", ".1f"), ("seqs", "sequences", ".1f"),
                        ("cum. H", "cumulative_entropy", ".2f"),
                        *([("remasked", "remasked", ".2f")] if corrected else []),
                        *([("held back", "rejected", ".2f")] if verified else []),
                        ("clash %", "same_pass_clash_pct", ".1f"),
                        ("tok/pass", "tokens_per_pass", ".2f"),
                        ("wall s", "wall_s", ".1f"), ("s/solved", "wall_per_solved", ".3f")],
                 title)


def _print_references(rows: list[dict], ref: dict, estimators: list[dict]) -> None:
    """The lines under the table: AUP, the singles reference, the estimators, the paper."""
    score = aup(rows)
    if score is not None:
        print(f"AUP (accuracy-weighted area under solved vs tokens per pass, d3LLM): "
              f"{score:.1f}")
    rounds = (f"{ref['mean_rounds']:.1f} rounds" if ref["mean_rounds"] is not None else "n/a")
    print(f"physical reference: parallel naked/hidden singles finish "
          f"{100 * ref['singles_share']:.0f}% of these puzzles ({rounds} where they do); "
          f"a perfect MDM needs 1 pass.")
    for est in estimators:
        print(f"MI estimator: {est['source']} (weights {est['fingerprint']})")
    print("published reference (1,000 hard): " + "; ".join(
        f"{label[4:]} {nfe} passes / {acc}%" for label, nfe, acc in SEED_REFERENCE))
