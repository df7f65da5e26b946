"""``unmask mi fit``: an MI estimator for any model in one command, within a CPU budget.

Labels ground-truth MI by probing (:func:`unmask.mi.labels.write_labels`: top-k capped,
resumable shards, any engine) until ``--label-s`` seconds or ``--contexts`` contexts, trains
the estimator on the model's hidden states for at most ``--train-s`` seconds
(:func:`unmask.mi.estimator_train.train_estimator`), scores it on the held-out contexts
(:func:`unmask.mi.estimator_eval.evaluate_predictions`, with the labels' own noise ceiling)
and writes the estimator into ``--out`` itself, so that ``mi-guided:estimator=OUT`` reads it.

OUT/
    config.json, estimator.safetensors    the estimator (best held-out loss)
    eval.json                             held-out metrics, cost, the budget spent
    labels/                               the label folder (``unmask mi label`` format)
    train/                                the training run (checkpoint, history)
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from unmask.commands.common import (
    add_device_arg,
    add_engine_args,
    add_seed_arg,
    engine_from_args,
    finite_float,
    output_folder,
    positive_int,
    threads_int,
)
from unmask.commands.mi import parse_ratio_range
from unmask.commands.mi_estimator import format_metrics
from unmask.commands.registry import arguments, command
from unmask.errors import require
from unmask.io import atomic_write_text, json_safe
from unmask.mi.estimator import EstimatorConfig, MIEstimator
from unmask.mi.estimator_eval import compute_features, cost_fraction, predict
from unmask.mi.estimator_train import (
    EstimatorTrainConfig,
    LabelSet,
    evaluate_predictions,
    held_out_mask,
    train_estimator,
)
from unmask.mi.labels import get_task, write_labels
from unmask.models.auto import load_model, task_family
from unmask.models.base import MaskedModel
from unmask.recipe import model_recipe
from unmask.text.labels import text_options
from unmask.workers import worker_path


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True,
                   help="model name or folder (antiberty, a transformers masked LM, protein, "
                        "an ESM folder, sudoku)")
    p.add_argument("--corpus", default=None, metavar="FILE",
                   help="text models: the UTF-8 corpus contexts are cut from (residue strings "
                        "for AntiBERTy); other models use their task's own contexts")
    p.add_argument("--out", required=True,
                   help="folder: the estimator (read by mi-guided:estimator=OUT), its labels "
                        "and training run; rerunning resumes the labels")
    p.add_argument("--length", type=positive_int, default=64,
                   help="text models: context length in tokens, special tokens included")
    p.add_argument("--contexts", type=positive_int, default=1024,
                   help="label at most this many contexts (default 1024)")
    p.add_argument("--label-s", type=finite_float(0.0, open_low=True), default=600.0,
                   help="stop labelling after the shard that passes this many seconds")
    p.add_argument("--train-s", type=finite_float(0.0, open_low=True), default=300.0,
                   help="stop training after this many seconds")
    p.add_argument("--mask-ratio", default="0.1:0.9", metavar="LO:HI")
    p.add_argument("--top-k", type=positive_int, default=8, metavar="K",
                   help="probe at most the K most likely tokens per masked position")
    p.add_argument("--eps", type=finite_float(0.0, 1.0), default=1e-3)
    p.add_argument("--shard-size", type=positive_int, default=32, help="contexts per shard")
    p.add_argument("--held-out", type=finite_float(0.0, 1.0, open_low=True), default=0.1)
    add_seed_arg(p)
    p.add_argument("--trust-remote-code", action="store_true",
                   help="run modelling code shipped inside the model folder (only from there)")
    p.add_argument("--threads", type=threads_int, default=None, metavar="N",
                   help="CPU threads of torch (per worker with --engine ray)")
    add_engine_args(p)
    add_device_arg(p)


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


def _label(args, model: MaskedModel, task: str, options: dict, out: Path) -> tuple[int, float]:
    """Label shard after shard until ``--contexts`` or ``--label-s``; (contexts, seconds)."""
    engine, device = engine_from_args(args)
    source = (model if args.engine == "local" else
              model_recipe(task, worker_path(args.model), str(device),
                           trust_remote_code=args.trust_remote_code))
    t0, done = time.perf_counter(), 0
    while done < args.contexts and (done == 0 or time.perf_counter() - t0 < args.label_s):
        goal = min(args.contexts, done + args.shard_size)
        manifest = write_labels(source, out, contexts=goal, task=task, seed=args.seed,
                                eps=args.eps, mask_ratio=parse_ratio_range(args.mask_ratio),
                                shard_size=args.shard_size, top_k=args.top_k,
                                options=options, engine=engine)
        done = manifest["contexts"]
        print(f"labels: {done} contexts ({time.perf_counter() - t0:.0f} s)", flush=True)
    return done, time.perf_counter() - t0


def _train(args, model: MaskedModel, labels: LabelSet, out: Path) -> tuple[MIEstimator, dict]:
    """Train the estimator on the labels within ``--train-s``; (the best one, summary)."""
    import torch

    est_cfg = EstimatorConfig(hidden_size=model.hidden_size,
                              model_fingerprint=model.fingerprint())
    cfg = EstimatorTrainConfig(held_out=args.held_out, seed=args.seed,
                               max_time_s=args.train_s)
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    hidden = compute_features(model, labels.tokens, est_cfg)
    res = train_estimator(MIEstimator(est_cfg), hidden, labels, model.mask_id, cfg, out,
                          log=lambda line: None,  # the history is in OUT/train
                          extra={"labels": {"identity": labels.identity,
                                            "contexts": len(labels)}, "model": args.model},
                          data={"labels": labels.identity, "contexts": len(labels)})
    best = MIEstimator.load(out / "best", model)
    return best, {"seconds": time.perf_counter() - t0, "steps": res["steps"],
                  "stopped": res["stopped"], "best_step": res["best_step"],
                  "hidden": hidden}


def _evaluate(model: MaskedModel, estimator: MIEstimator, labels: LabelSet, hidden,
              held_out: float) -> dict:
    held = held_out_mask(labels.groups, held_out, 0)
    masked = labels.tokens[held] == model.mask_id
    directed = labels.directed[held] if labels.directed is not None else None
    result = evaluate_predictions(predict(estimator, hidden[held], masked), labels.mi[held],
                                  masked, directed=directed)
    result["cost"] = cost_fraction(model, estimator, labels.tokens[held][:64])
    result["contexts"] = int(held.sum())
    return result


@command("mi", "fit", help="label, train and evaluate an MI estimator for any model within a "
                           "CPU budget (read by mi-guided:estimator=OUT)")
@arguments(_args)
def mi_fit(args: argparse.Namespace) -> int:
    out = output_folder(args.out, "--out")
    parse_ratio_range(args.mask_ratio)
    model = load_model(args.model, trust_remote_code=args.trust_remote_code)
    task = model_task(model, args.corpus)
    options = text_options(args.corpus, args.length) if task == "text" else {}
    contexts, label_s = _label(args, model, task, options, out / "labels")
    labels = LabelSet.from_dir(out / "labels")
    labels.check_model(model)
    if (out / "train").exists():  # the training run is cheap: always a fresh one
        shutil.rmtree(out / "train")
    estimator, train = _train(args, model, labels, out / "train")
    result = _evaluate(model, estimator, labels, train.pop("hidden"), args.held_out)
    result["budget"] = {"label_s": round(label_s, 1), "train_s": round(train["seconds"], 1),
                        "contexts": contexts, **{k: train[k] for k in ("steps", "stopped",
                                                                      "best_step")}}
    for name in ("config.json", MIEstimator.WEIGHTS_FILE):
        shutil.copyfile(out / "train" / "best" / name, out / name)
    atomic_write_text(out / "eval.json", json.dumps(json_safe(result), indent=1) + "\n")
    print(format_metrics(result))
    print(f"estimator: {out} (mi-guided:estimator={out}); labels {label_s:.0f} s, training "
          f"{train['seconds']:.0f} s ({train['steps']} steps, {train['stopped']})")
    return 0


__all__ = ["model_task"]
