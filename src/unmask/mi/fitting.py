"""An MI estimator for any model within a CPU budget, in one call (:func:`fit`): ground-truth
MI labels by probing (top-k capped, resumable shards, any engine) until a time or context
budget, the estimator trained on the model's hidden states within a time budget
(:func:`unmask.mi.estimator_train.train_estimator`), scored on the held-out contexts
(:func:`unmask.mi.estimator_eval.evaluate_predictions`, with the labels' own noise ceiling),
and written into the output folder itself, so that ``mi-guided:estimator=OUT`` reads it::

    OUT/
        config.json, estimator.safetensors    the estimator (best held-out loss)
        eval.json                             held-out metrics, cost, the budget spent
        labels/                               the label folder (``unmask mi label`` format)
        train/                                the training run (checkpoint, history)

``unmask mi fit`` is this function with flags.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from unmask.errors import require
from unmask.folders import claim_folder, mark_folder
from unmask.io import atomic_path, atomic_write_text, json_safe
from unmask.metrics import held_out_mask
from unmask.mi.estimator import EstimatorConfig, MIEstimator
from unmask.mi.estimator_eval import (
    compute_features,
    cost_fraction,
    evaluate_predictions,
    predict,
)
from unmask.mi.estimator_train import EstimatorTrainConfig, train_estimator
from unmask.mi.label_files import MANIFEST, checked_manifest
from unmask.mi.label_set import LabelSet
from unmask.mi.labels import write_labels
from unmask.models.base import MaskedModel
from unmask.validation import is_int


@dataclass(frozen=True)
class FitBudget:
    """What :func:`fit` may spend, and how it labels.

    contexts: label at most this many contexts.
    label_s: stop labelling after the shard that passes this many seconds.
    train_s: stop training after this many seconds.
    mask_ratio: (lo, hi) of the contexts' mask ratio.
    top_k: probe at most the K most likely tokens per masked position (None: all).
    eps: the probe's tolerance (:func:`unmask.mi.labels.write_labels`).
    shard_size: contexts per label shard.
    held_out: share of contexts held out of training, scored by the evaluation.
    seed: of the contexts, the split and the estimator's initialisation.
    """

    contexts: int = 1024
    label_s: float = 600.0
    train_s: float = 300.0
    mask_ratio: tuple[float, float] = (0.1, 0.9)
    top_k: int | None = 8
    eps: float = 1e-3
    shard_size: int = 32
    held_out: float = 0.1
    seed: int = 0

    def __post_init__(self):
        for name in ("contexts", "shard_size"):
            value = getattr(self, name)
            require(is_int(value) and value >= 1, f"{name}: must be an integer >= 1, got "
                                                  f"{value!r}")
        require(self.label_s > 0 and self.train_s > 0, "label_s, train_s: must be > 0")
        require(0 < self.held_out < 1, f"held_out: must be in (0, 1), got {self.held_out}")


#: how a folder written by :func:`fit` is marked (:mod:`unmask.folders`)
FIT_COMMAND = "mi fit"


def fit(model: MaskedModel, out: str | Path, task: str, *, budget: FitBudget = FitBudget(),
        options: dict | None = None, source=None, engine=None, model_name: str | None = None,
        on_labels: Callable[[Path], None] | None = None, overwrite: bool = False,
        log=print) -> dict:
    """Label, train and evaluate an MI estimator for ``model`` into ``out`` (see the module).

    Args:
        model: the model (its hidden states are the estimator's features).
        out: the folder written; its ``labels/`` resumes a killed run.
        task: the context task of the labels (:func:`unmask.mi.labels.get_task`).
        budget: what may be spent (:class:`FitBudget`).
        options: the task's own settings (the text task: its corpus and length).
        source: what the engine's workers label with (a recipe; None: ``model``).
        engine: where label shards are computed (None: this process).
        model_name: how the estimator's files name the model.
        on_labels: called with ``out`` once the labels are written, before training.
        overwrite: write into an ``out`` that holds other files (never a model folder:
            :func:`unmask.folders.claim_folder`); without it such an ``out`` is refused.
        log: one line per labelled shard.

    Returns:
        The held-out evaluation (``eval.json``), with ``budget``: the seconds spent, the
        contexts labelled, the training steps and why it stopped.
    """
    out = claim_folder(out, "out", FIT_COMMAND, overwrite=overwrite,
                       own_files=(f"labels/{MANIFEST}",))
    contexts, label_s = _label(model if source is None else source, out / "labels", task,
                               budget, options or {}, engine, log)
    mark_folder(out, FIT_COMMAND)  # until then labels/manifest.json says whose it is
    if on_labels is not None:
        on_labels(out)
    labels = LabelSet.from_dir(out / "labels")
    labels.check_model(model)
    if (out / "train").exists():  # the training run is cheap: always a fresh one
        shutil.rmtree(out / "train")
    estimator, train = _train(model, labels, out / "train", budget, model_name)
    result = _evaluate(model, estimator, labels, train.pop("hidden"), budget.held_out)
    result["budget"] = {"label_s": round(label_s, 1), "train_s": round(train["seconds"], 1),
                        "contexts": contexts, **{k: train[k] for k in ("steps", "stopped",
                                                                      "best_step")}}
    for name in ("config.json", MIEstimator.WEIGHTS_FILE):
        with atomic_path(out / name) as tmp:
            shutil.copyfile(out / "train" / "best" / name, tmp)
    atomic_write_text(out / "eval.json", json.dumps(json_safe(result), indent=1) + "\n")
    return result


def _label(source, out: Path, task: str, budget: FitBudget, options: dict, engine,
           log) -> tuple[int, float]:
    """Label shard after shard until the contexts or the seconds run out; (contexts,
    seconds)."""
    t0, done = time.perf_counter(), 0
    # the first call covers the contexts a former run labelled: each of their shards is
    # checked against its sha256 and a changed one recomputed (not only the first shard's)
    kept = (checked_manifest(out / MANIFEST, "labels").get("contexts")
            if (out / MANIFEST).is_file() else 0)
    kept = kept if is_int(kept) and kept > 0 else 0
    while done < budget.contexts and (done == 0 or time.perf_counter() - t0 < budget.label_s):
        goal = min(budget.contexts, max(done + budget.shard_size, kept))
        manifest = write_labels(source, out, contexts=goal, task=task, seed=budget.seed,
                                eps=budget.eps, mask_ratio=budget.mask_ratio,
                                shard_size=budget.shard_size, top_k=budget.top_k,
                                options=options, engine=engine)
        done = manifest["contexts"]
        log(f"labels: {done} contexts ({time.perf_counter() - t0:.0f} s)")
    return done, time.perf_counter() - t0


def _train(model: MaskedModel, labels: LabelSet, out: Path, budget: FitBudget,
           model_name: str | None) -> tuple[MIEstimator, dict]:
    """Train the estimator on the labels within the budget; (the best one, summary)."""
    est_cfg = EstimatorConfig(hidden_size=model.hidden_size,
                              model_fingerprint=model.fingerprint())
    cfg = EstimatorTrainConfig(held_out=budget.held_out, seed=budget.seed,
                               max_time_s=budget.train_s)
    torch.manual_seed(budget.seed)
    t0 = time.perf_counter()
    hidden = compute_features(model, labels.tokens, est_cfg)
    res = train_estimator(MIEstimator(est_cfg), hidden, labels, model.mask_id, cfg, out,
                          log=lambda line: None,  # the history is in OUT/train
                          extra={"labels": {"identity": labels.identity,
                                            "contexts": len(labels)}, "model": model_name},
                          data={"labels": labels.identity, "contexts": len(labels)})
    best = MIEstimator.load(out / "best", model)
    return best, {"seconds": time.perf_counter() - t0, "steps": res["steps"],
                  "stopped": res["stopped"], "best_step": res["best_step"],
                  "hidden": hidden}


def _evaluate(model: MaskedModel, estimator: MIEstimator, labels: LabelSet, hidden,
              held_out: float) -> dict:
    """The estimator scored on the held-out contexts, and its cost beside the model's."""
    held = held_out_mask(labels.groups, held_out, 0)
    masked = labels.tokens[held] == model.mask_id
    directed = labels.directed[held] if labels.directed is not None else None
    result = evaluate_predictions(predict(estimator, hidden[held], masked), labels.mi[held],
                                  masked, directed=directed)
    result["cost"] = cost_fraction(model, estimator, labels.tokens[held][:64])
    result["contexts"] = int(held.sum())
    return result
