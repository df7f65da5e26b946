"""``unmask protein train`` and ``unmask protein bench``: protein generation at a given length."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from unmask.bench import add_nfe_vs_sequential, aup, pareto_plot, render_table
from unmask.commands.common import (
    IMAGE_SUFFIXES,
    JSON_SUFFIXES,
    add_cache_arg,
    add_engine_args,
    add_presets_arg,
    add_seed_arg,
    add_threads_arg,
    add_training_args,
    bench_entries,
    distinct_outputs,
    engine_from_args,
    finite_float,
    output_path,
    positive_int,
    progress_bar,
    seed_int,
    training_setup,
)
from unmask.commands.registry import arguments, command
from unmask.errors import UnmaskError
from unmask.io import atomic_write_text
from unmask.models.auto import load_protein_model
from unmask.pretrained import describe_source
from unmask.protein.bench import DEFAULT_SPECS, SEED_REFERENCE, bench_protein
from unmask.protein.data import load_split, training_batch
from unmask.protein.model import ProteinMDM, heldout_eval_set, masked_loss, protein_model_config
from unmask.sweep import ModelRecipe
from unmask.training import train


def _data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fasta", default=None,
                   help="protein FASTA file (default: the proteome shipped with pyhmmer)")
    p.add_argument("--heldout-fraction", type=finite_float(0.0, 1.0, open_low=True),
                   default=None,
                   help="share of proteins held out (default 0.1, or the model's split.json)")
    p.add_argument("--split-seed", type=seed_int, default=None,
                   help="seed of the train/held-out split (default 0, or the model's split.json)")


def _train_args(p: argparse.ArgumentParser) -> None:
    add_training_args(p, out="runs/protein", steps=2400, batch_size=64, lr=1.5e-3, warmup=200,
                      eval_every=200)
    _data_args(p)
    p.add_argument("--eval-size", type=positive_int, default=512,
                   help="held-out crops per evaluation")


def split_from_args(args: argparse.Namespace, model_dir: str | Path | None = None):
    """The train/held-out split the flags (or the model's split.json) name."""

    recorded = {}
    if model_dir is not None and (Path(model_dir) / "split.json").is_file():
        path = Path(model_dir) / "split.json"
        try:
            recorded = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise UnmaskError(f"{path}: not a JSON file ({e})") from None
        if not isinstance(recorded, dict):
            raise UnmaskError(f"{path}: expected a JSON object")
    fraction = args.heldout_fraction
    fraction = fraction if fraction is not None else recorded.get("heldout_fraction", 0.1)
    seed = args.split_seed if args.split_seed is not None else recorded.get("split_seed", 0)
    return load_split(args.fasta, float(fraction), int(seed))


def split_record(split, fraction: float, seed: int) -> dict:
    return {"source": Path(split.source).name, "heldout_fraction": fraction, "split_seed": seed,
            "train_proteins": len(split.train), "heldout_proteins": len(split.heldout),
            "skipped": split.skipped, "heldout_names": split.heldout_names}


@command("protein", "train", help="train the protein MDM (checkpoints, --resume)")
@arguments(_train_args)
def train_protein(args: argparse.Namespace) -> int:


    overrides, cfg = training_setup(args, select_metric="score")
    if args.eval_size < 1:
        raise UnmaskError(f"--eval-size: must be >= 1, got {args.eval_size}")
    split = split_from_args(args)
    fraction = 0.1 if args.heldout_fraction is None else args.heldout_fraction
    seed = 0 if args.split_seed is None else args.split_seed
    out = Path(args.out)
    record = split_record(split, fraction, seed)
    skips = ", ".join(f"{v} {k}" for k, v in split.skipped.items() if v) or "none"
    print(f"data: {split.source}: {len(split.train)} training and {len(split.heldout)} held-out "
          f"proteins; skipped: {skips}", flush=True)
    model = ProteinMDM(protein_model_config(**overrides))
    print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters", flush=True)
    train_crops = split.train_sampler()
    eval_set = heldout_eval_set(split.heldout_sampler(), args.eval_size)

    def write_split(best: Path) -> None:  # the split goes with the weights it trained
        for folder in (out, best):
            atomic_write_text(folder / "split.json", json.dumps(record, indent=2) + "\n")

    def evaluate(m):
        metrics = masked_loss(m, *(t.to(args.device) for t in eval_set))
        # the selection metric is "higher is better": the negated held-out loss
        return {**metrics, "score": -metrics["heldout_loss"]}

    data = {"fasta": str(args.fasta) if args.fasta else None, "heldout_fraction": fraction,
            "split_seed": seed, "eval_size": args.eval_size}
    train(model, lambda step, bs: training_batch(train_crops, step, bs, seed=args.seed), cfg,
          out, evaluate, resume=args.resume, overwrite=args.overwrite,
              override=args.override_config,
          log=lambda s: print(s, flush=True), data=data, on_best=write_split)
    print(f"best weights: {out / 'best'}")
    return 0


def _bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n", type=positive_int, default=500, help="proteins generated per sampler")
    add_presets_arg(p)
    p.add_argument("--samplers", nargs="+", default=None, metavar="SPEC",
                   help="sampler specs NAME[:K=V,K=V][+verify[=T]] (default: the full "
                        "comparison)")
    p.add_argument("--model", default=None,
                   help="model folder (ours or an EsmForMaskedLM checkpoint; default: the "
                        "shipped protein MDM)")
    p.add_argument("--estimator", default=None, help="MI estimator folder for mi-guided")
    _data_args(p)
    p.add_argument("--temperature", type=finite_float(0.0), default=1.0,
                   help="token temperature")
    p.add_argument("--min-length", type=positive_int, default=50,
                   help="shortest generated protein")
    p.add_argument("--max-length", type=positive_int, default=100,
                   help="longest generated protein")
    p.add_argument("--batch-size", type=positive_int, default=500)
    add_seed_arg(p)
    add_threads_arg(p)
    p.add_argument("--bf16", action="store_true", help="bf16 autocast inference (CPU)")
    add_engine_args(p, gpus=False)
    add_cache_arg(p)
    p.add_argument("--no-natural", action="store_true",
                   help="leave out the natural-crop reference rows")
    p.add_argument("--json", default=None, metavar="OUT.json", help="write results as JSON")
    p.add_argument("--plot", default=None, metavar="OUT.png",
                   help="Pareto plot (.png, .pdf or .svg)")
    p.add_argument("--quiet", action="store_true")


@command("protein", "bench",
         help="composition JSD vs forward passes for every sampler on protein generation")
@arguments(_bench_args)
def bench_protein_cmd(args: argparse.Namespace) -> int:
    engine, _ = engine_from_args(args)
    if args.min_length > args.max_length:
        raise UnmaskError(f"--min-length, --max-length: lengths from {args.min_length} to "
                          f"{args.max_length} is an empty range")
    json_path = output_path(args.json, "--json", JSON_SUFFIXES)
    plot_path = output_path(args.plot, "--plot", IMAGE_SUFFIXES)
    distinct_outputs(json=json_path, plot=plot_path)
    entries = bench_entries(args.samplers, DEFAULT_SPECS, args.estimator, presets=args.preset)
    model = load_protein_model(args.model)
    model.autocast_bf16 = bool(args.bf16)
    split = split_from_args(args, model.source)
    with progress_bar(len(entries), "samplers", enabled=not args.quiet) as update:
        rows, lengths = bench_protein(
            model, split, entries, n=args.n, seed=args.seed, temperature=args.temperature,
            min_length=args.min_length, max_length=args.max_length,
            batch_size=args.batch_size, natural=not args.no_natural, progress=update,
            engine=engine, recipe=ModelRecipe(args.model, task="protein", bf16=args.bf16),
            cache=args.cache)
    add_nfe_vs_sequential(rows)
    for r in rows:
        r["low_complexity_pct"] = 100 * r["low_complexity"]
        r["distinct_pct"] = 100 * r["distinct"]
    title = (f"Proteins: {args.n} of length {args.min_length}-{args.max_length} "
             f"(mean {lengths.double().mean():.1f}) at temperature {args.temperature:g}, "
             f"model {describe_source(model.source)}{' (bf16)' if args.bf16 else ''}; "
             f"JSD in nats vs {len(split.heldout)} held-out proteins")
    render_table(rows, [("sampler", "label", ""), ("mean NFE", "nfe", ".1f"),
                        ("NFE / seq.", "nfe_vs_sequential", ".2f"),
                        ("JSD aa", "jsd_heldout", ".4f"), ("± se", "jsd_heldout_se", ".4f"),
                        ("JSD aa bg", "jsd_background", ".4f"),
                        ("JSD 2-mer", "jsd_2mer", ".4f"), ("JSD per seq", "jsd_per_seq", ".3f"),
                        ("low-cplx %", "low_complexity_pct", ".1f"),
                        ("distinct %", "distinct_pct", ".1f"),
                        ("tok/pass", "tokens_per_pass", ".2f"), ("seq/row", "sequences", ".1f"),
                        ("wall s", "wall_s", ".1f"), ("proteins/s", "proteins_per_s", ".1f")],
                 title)
    score = aup(rows, y="closeness")
    if score is not None:
        print(f"AUP over these rows: {score:.1f} (accuracy-weighted area under "
              f"100 × (1 − JSD aa) vs tokens per pass, d3LLM)")
    print("published reference (ESM-C, 500 proteins vs 500 UniRef50): " + "; ".join(
        f"{label[4:]} {nfe} passes / JSD {j}" for label, nfe, j in SEED_REFERENCE))
    if json_path is not None:
        atomic_write_text(json_path, json.dumps(
            {"model": describe_source(model.source), "n": args.n,
             "temperature": args.temperature, "lengths": [args.min_length, args.max_length],
             "data": split.source, "heldout_proteins": len(split.heldout),
             "aup": score, "rows": rows}, indent=2) + "\n")
    if plot_path is not None:
        pareto_plot([r for r in rows if r["nfe"] is not None], plot_path, y="closeness",
                    ylabel="100 × (1 − JSD of amino-acid composition vs held-out, nats)",
                    title=f"{args.n} proteins of length {args.min_length}-{args.max_length}, "
                          f"temperature {args.temperature:g}, {describe_source(model.source)}",
                    references=[(label, nfe, 100 * (1 - j)) for label, nfe, j in SEED_REFERENCE])
        print(f"plot: {plot_path}")
    return 0
