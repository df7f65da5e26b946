"""``unmask mi ...``: pairwise mutual information from the command line.

- ``mi label``: ground-truth MI labels by perturbation probing, in resumable shards
  (:func:`unmask.mi.labels.write_labels`).
- ``mi train``, ``mi eval``: the neural MI estimator's training and its evaluation against
  labels; ``mi map``: the MI maps of Sudoku puzzles.
- ``mi fit``: an MI estimator for any model in one command, within a CPU budget
  (:func:`unmask.mi.fitting.fit`, its flags the budget).
"""

from __future__ import annotations

import argparse
import time

from unmask.bench.recipe import model_recipe
from unmask.commands.flags.engine import engine_from_args
from unmask.commands.flags.paths import (
    TRAINING_RUN_FILES,
    claim_folder,
    command_name,
    existing_dir,
)
from unmask.commands.flags.training import check_resume_args
from unmask.commands.registry import command
from unmask.errors import UnmaskError, require
from unmask.io import (
    IMAGE_SUFFIXES,
    json_text,
    output_path,
)
from unmask.metrics import held_out_mask
from unmask.mi.estimator import EstimatorConfig, MIEstimator, estimate_mi, load_estimator
from unmask.mi.estimator_eval import (
    compute_features,
    cost_fraction,
    evaluate_predictions,
    predict,
)
from unmask.mi.estimator_train import (
    EstimatorTrainConfig,
    augmented_training_set,
    planned_steps,
    train_estimator,
)
from unmask.mi.fitting import FitBudget, fit
from unmask.mi.label_files import MANIFEST
from unmask.mi.label_set import LabelSet
from unmask.mi.labels import get_task, write_labels
from unmask.mi.probe import perturbation_mi
from unmask.models.auto import check_task, load_model
from unmask.models.base import MaskedModel
from unmask.parallel.workers import worker_path
from unmask.progress import progress_bar
from unmask.sudoku.maps import cell_name, parse_cell, plot_mi_maps
from unmask.sudoku.parse import parse_puzzle
from unmask.sudoku.tokens import grid_to_tokens
from unmask.tasks import task_family
from unmask.text.labels import text_options


def parse_ratio_range(text: str) -> tuple[float, float]:
    """'LO:HI' -> (LO, HI) with 0 <= LO < HI <= 1."""
    try:
        lo, hi = (float(part) for part in text.split(":"))
    except ValueError:
        raise UnmaskError(f"--mask-ratio: expected LO:HI, got {text!r}") from None
    if not 0.0 <= lo < hi <= 1.0:
        raise UnmaskError(f"--mask-ratio: expected 0 <= LO < HI <= 1, got {text!r}")
    return lo, hi


@command("mi", "label")
def mi_label(args: argparse.Namespace) -> int:
    import math


    mask_ratio = parse_ratio_range(args.mask_ratio)
    if args.contexts < 1:
        raise UnmaskError(f"--contexts: must be >= 1, got {args.contexts}")
    if args.shard_size < 1:
        raise UnmaskError(f"--shard-size: must be >= 1, got {args.shard_size}")
    if not (math.isfinite(args.eps) and 0.0 <= args.eps < 1.0):
        raise UnmaskError(f"--eps: must be in [0, 1), got {args.eps}")
    if args.batch_size < 1:
        raise UnmaskError(f"--batch-size: must be >= 1, got {args.batch_size}")
    if args.task == "text":
        if args.text is None:
            raise UnmaskError("--text: the text task needs a corpus file (--text FILE)")
        options = text_options(args.text, 64 if args.length is None else args.length)
    else:
        for flag, value in (("--text", args.text), ("--length", args.length)):
            if value is not None:
                raise UnmaskError(f"{flag}: applies only to --task text")
        options = {}
    # a label folder is known by its manifest.json (no marker: the folder format is fixed)
    claim_folder(args.out, "--out", "mi label", own_files=(MANIFEST,))
    engine, device = engine_from_args(args)
    # a Ray worker may run in another folder: it reads the model at its absolute path
    model_arg = args.model if args.engine == "local" else worker_path(args.model)
    model = model_recipe(args.task, model_arg, str(device), bool(args.bf16),
                         trust_remote_code=args.trust_remote_code)
    t0 = time.perf_counter()
    manifest = write_labels(model, args.out, contexts=args.contexts, task=args.task,
                            seed=args.seed, eps=args.eps, mask_ratio=mask_ratio,
                            shard_size=args.shard_size, batch_size=args.batch_size,
                            top_k=args.top_k, options=options, engine=engine,
                            log=lambda line: print(line, flush=True))
    print(f"{manifest['contexts']} contexts in {len(manifest['shards'])} shards at {args.out} "
          f"({time.perf_counter() - t0:.1f} s)")
    return 0


def _load_labels(path: str, model_arg: str | None):
    """(labels, model, task): the label set at ``path``, its :class:`ContextTask`, and the
    model it was probed on: ``model_arg``, or by default the shipped model of the labels'
    task; an error unless the labels and the model belong together."""

    labels = LabelSet.from_dir(existing_dir(path, "--labels"))
    task = get_task(labels.identity.get("task", "sudoku"))
    model = task.load_model(model_arg)
    labels.check_model(model)
    return labels, model, task



@command("mi", "train")
def train_mi_estimator(args: argparse.Namespace) -> int:

    import torch

    claim_folder(args.out, "--out", command_name(args), overwrite=args.overwrite,
                 own_files=TRAINING_RUN_FILES)
    check_resume_args(args)
    labels, model, task = _load_labels(args.labels, args.model)
    est_cfg = EstimatorConfig(hidden_size=model.hidden_size, layer=args.layer,
                              extra_layers=args.extra_layers, d=args.d,
                              mixer_layers=args.mixer_layers, pair_hidden=args.pair_hidden,
                              pair_rank=args.pair_rank,
                              pair_prior_length=model.max_length if args.pair_prior else 0,
                              marginal_size=(len(model.real_token_ids)
                                             if args.marginals or args.entropy_gate else 0),
                              two_hop=args.two_hop, entropy_gate=args.entropy_gate,
                              model_fingerprint=model.fingerprint())
    cfg = EstimatorTrainConfig(batch_size=args.batch_size, lr=args.lr, max_epochs=args.epochs,
                               eval_every=args.eval_every, patience=args.patience,
                               held_out=args.held_out, split_seed=args.split_seed,
                               seed=args.seed, max_time_s=args.max_time, augment=args.augment,
                               loss_scale=args.loss_scale, rank_weight=args.rank_weight)
    probed = len(labels)
    labels = augmented_training_set(labels, cfg, task.symmetries)
    torch.manual_seed(args.seed)
    estimator = MIEstimator(est_cfg)
    t0 = time.perf_counter()
    with progress_bar(len(labels), "hidden states") as update:
        hidden = compute_features(model, labels.tokens, est_cfg, progress=update)
    print(f"{probed:,} labelled contexts ({len(labels) - probed:,} symmetry copies), hidden "
          f"states in {time.perf_counter() - t0:.1f} s;"
          f" estimator {sum(p.numel() for p in estimator.parameters()):,} parameters",
          flush=True)
    extra = {"labels": {"path": str(args.labels), "identity": labels.identity,
                        "contexts": probed, "symmetry_copies": len(labels) - probed},
             # the name or folder given, not this machine's path of a shipped model
             "model": args.model or task.name}
    with progress_bar(planned_steps(labels, cfg), "training") as update:
        res = train_estimator(estimator, hidden, labels, model.mask_id, cfg, args.out,
                              resume=args.resume, overwrite=args.overwrite,
                                  override=args.override_config,
                              log=lambda s: print(s, flush=True),
                              progress=lambda step, total: update(step), extra=extra,
                              data={"labels": labels.identity, "contexts": probed})
    print(f"stopped ({res['stopped']}) after {res['steps']} steps; best held-out loss "
          f"{res['best_loss']:.5g} at step {res['best_step']}; estimator: {args.out}/best "
          f"({time.perf_counter() - t0:.1f} s)")
    return 0


def select_contexts(labels, estimator, split: str):
    """(M,) bool contexts to evaluate, and the split used ('held-out' or 'all')."""
    import torch

    meta = getattr(estimator, "metadata", {})
    trained_on = meta.get("labels", {}).get("identity")
    if split == "auto":
        split = "held-out" if trained_on is not None and trained_on == labels.identity else "all"
    if split == "all":
        return torch.ones(len(labels), dtype=torch.bool), split
    if "split" not in meta:
        raise UnmaskError("--split: the estimator records no held-out split; use --split all")
    held = held_out_mask(labels.groups, meta["split"]["held_out"], meta["split"]["split_seed"])
    if not held.any():
        raise UnmaskError(f"--labels: none of the {len(labels)} contexts is held out")
    return held, split


def format_metrics(result: dict) -> str:
    rows = [("all", result)] + [(f"{b['mask_ratio'][0]:.2f}-{b['mask_ratio'][1]:.2f}", b)
                                for b in result["buckets"]]
    lines = [f"{'mask ratio':<11}{'contexts':>9}{'pairs':>10}{'MSE':>10}{'Pearson':>9}"
             f"{'Spearman':>9}{'top10%':>8}"]
    for name, m in rows:
        if not m.get("pairs"):
            lines.append(f"{name:<11}{m.get('contexts', 0):>9}{0:>10}")
            continue
        lines.append(f"{name:<11}{m['contexts']:>9}{m['pairs']:>10}{m['mse']:>10.2e}"
                     f"{m['pearson']:>9.3f}{m['spearman']:>9.3f}{m['top_decile_recall']:>8.3f}")
    lines.append(f"within one context (mean over contexts): Spearman "
                 f"{result['spearman_within']:.3f}, top-decile recall "
                 f"{result['recall_within']:.3f}")
    res = result.get("resolved")
    if res and res.get("pairs"):
        lines.append(f"pairs the labels resolve (value above |MI_ij - MI_ji| / 2): "
                     f"{res['pairs']:,} ({100 * res['share']:.1f}%): Spearman "
                     f"{res['spearman']:.3f}, top-decile recall {res['top_decile_recall']:.3f}")
    probe = result.get("probe")
    if probe and probe["one_direction"].get("pairs"):
        one, both = probe["one_direction"], probe["between_directions"]
        lines.append(f"the probe against itself: one direction MI_ij against the labels "
                     f"Spearman {one['spearman']:.3f}, top-decile recall "
                     f"{one['top_decile_recall']:.3f}; MI_ij against MI_ji Spearman "
                     f"{both['spearman']:.3f}, top-decile recall "
                     f"{both['top_decile_recall']:.3f}")
        ceil = probe.get("ceiling")
        if ceil:
            lines.append(f"a perfect symmetric predictor, if the two directions are the truth "
                         f"plus independent noise: MSE {ceil['mse']:.2e}, Pearson "
                         f"{ceil['pearson']:.3f}, Spearman about {ceil['spearman']:.3f}")
        per = [(f"{b['mask_ratio'][0]:.2f}-{b['mask_ratio'][1]:.2f}", b["probe"])
               for b in result["buckets"] if "probe" in b]
        if per:
            lines.append("  per mask ratio (directions against each other Spearman / recall; "
                         "ceiling MSE, Spearman): " + "; ".join(
                             f"{name} {p['between_directions']['spearman']:.3f} / "
                             f"{p['between_directions']['top_decile_recall']:.3f}; "
                             f"{p['ceiling']['mse']:.1e}, {p['ceiling']['spearman']:.3f}"
                             for name, p in per))
    c = result["cost"]
    lines.append(f"cost: estimator {1e3 * c['estimator_s']:.1f} ms vs MDM forward "
                 f"{1e3 * c['model_forward_s']:.1f} ms at batch {c['batch']} = "
                 f"{100 * c['fraction']:.1f}% of a forward ({c['estimator_parameters']:,} vs "
                 f"{c['model_parameters']:,} parameters)")
    return "\n".join(lines)


@command("mi", "eval")
def mi_eval(args: argparse.Namespace) -> int:

    labels, model, _ = _load_labels(args.labels, args.model)
    model.autocast_bf16 = False
    estimator = load_estimator(args.estimator, model)
    sel, split = select_contexts(labels, estimator, args.split)
    tokens, mi = labels.tokens[sel], labels.mi[sel]
    masked = tokens == model.mask_id
    with progress_bar(len(tokens), "hidden states", enabled=not args.json) as update:
        hidden = compute_features(model, tokens, estimator.config, progress=update)
    directed = labels.directed[sel] if labels.directed is not None else None
    result = evaluate_predictions(predict(estimator, hidden, masked), mi, masked,
                                  directed=directed)
    result["split"] = split
    # a fixed batch (contexts repeated as needed), so the cost does not depend on the split
    reps = -(-args.cost_batch // len(tokens))
    result["cost"] = cost_fraction(model, estimator, tokens.repeat(reps, 1)[:args.cost_batch])
    if args.json:
        print(json_text(result))
    else:
        print(f"{split} contexts of {args.labels}: {int(sel.sum())} of {len(labels)}")
        print(format_metrics(result))
    return 0


SOURCES = ("gt", "estimator")


@command("mi", "map")
def mi_map(args: argparse.Namespace) -> int:

    sources = [s.strip() for s in args.source.split(",") if s.strip()]
    bad = [s for s in sources if s not in SOURCES]
    if not sources or bad or len(set(sources)) != len(sources):
        raise UnmaskError(f"--source: expected gt, estimator or gt,estimator, got "
                          f"{args.source!r}")
    grid = parse_puzzle(args.puzzle)
    cell = parse_cell(args.cell) if args.cell is not None else None
    if cell is not None and grid[cell] != 0:
        raise UnmaskError(f"--cell: {args.cell} holds the clue {int(grid[cell])}; pick a blank "
                          "cell")
    if not (grid == 0).sum() >= 2:
        raise UnmaskError("PUZZLE: needs at least two blank cells to have pairs")
    out = output_path(args.out, "--out", IMAGE_SUFFIXES)
    model = load_model(args.model, task="sudoku")
    check_task(model, "sudoku", args.model or "sudoku", required=True)
    model.autocast_bf16 = False
    tokens = grid_to_tokens(grid)[None]
    maps = {}
    for source in sources:
        if source == "gt":
            maps["ground truth"] = perturbation_mi(model, tokens, eps=args.eps).mi[0]
        else:
            est = load_estimator(args.estimator, model)
            maps["estimator"] = estimate_mi(model, est, tokens)[0]
    if cell is None:
        first = next(iter(maps.values()))
        cell = int(first.sum(1).argmax())
    scores = plot_mi_maps(grid, maps, cell, out, title=f"{int((grid > 0).sum())} clues, "
                          f"{int((grid == 0).sum())} blanks; model {model.fingerprint()}")
    if args.json:
        print(json_text({"cell": cell_name(cell), "out": str(out), "scores": scores}))
        return 0
    for name, s in scores.items():
        print(f"{name}: {100 * s['mass_share']:.1f}% of MI mass and {100 * s['top_share']:.1f}% "
              f"of the top-10% pairs on row/column/box peers (chance "
              f"{100 * s['chance_share']:.1f}%, {s['pairs']} pairs)")
    print(f"map of {cell_name(cell)}: {out}")
    return 0


def model_task(model: MaskedModel, corpus: str | None) -> str:
    """The label task of ``model``: 'text' for a model with a tokenizer (needs a corpus),
    else the task it records ('protein', 'sudoku')."""
    if getattr(model, "tokenizer", None) is not None and model.task == "text":
        require(corpus is not None, "--corpus: a text model needs a corpus file to cut "
                                    "contexts from")
        return "text"
    require(corpus is None, "--corpus: only text models read a corpus; this model labels "
                            "its task's own contexts")
    task = task_family(getattr(model, "task", ""))
    get_task(task)  # one line when there is no such task
    return task


@command("mi", "fit")
def mi_fit(args: argparse.Namespace) -> int:
    out = claim_folder(args.out, "--out", "mi fit", overwrite=args.overwrite,
                       own_files=(f"labels/{MANIFEST}",))
    budget = FitBudget(contexts=args.contexts, label_s=args.label_s, train_s=args.train_s,
                       mask_ratio=parse_ratio_range(args.mask_ratio), top_k=args.top_k,
                       eps=args.eps, shard_size=args.shard_size, held_out=args.held_out,
                       seed=args.seed)
    model = load_model(args.model, trust_remote_code=args.trust_remote_code)
    task = model_task(model, args.corpus)
    options = text_options(args.corpus, args.length) if task == "text" else {}
    engine, device = engine_from_args(args)
    source = (None if args.engine == "local" else
              model_recipe(task, worker_path(args.model), str(device),
                           trust_remote_code=args.trust_remote_code))
    result = fit(model, out, task, budget=budget, options=options, source=source,
                 engine=engine, model_name=args.model, overwrite=args.overwrite,
                 log=lambda line: print(line, flush=True))
    spent = result["budget"]
    print(format_metrics(result))
    print(f"estimator: {out} (mi-guided:estimator={out}); labels {spent['label_s']:.0f} s, "
          f"training {spent['train_s']:.0f} s ({spent['steps']} steps, {spent['stopped']})")
    return 0
