"""Evaluating the MI estimator against ground-truth labels: its frozen features, predictions,
metrics over the unordered pairs i < j of masked positions (pooled over contexts, overall and
per mask-ratio bucket: MSE, Pearson, Spearman, top-decile recall), the probe's agreement with
itself (with the probe's directed values), and the estimator's cost."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import torch

from unmask.frozen_head import frozen_features
from unmask.metrics import pair_metrics, spearman, top_decile_recall
from unmask.mi.estimator import (
    EstimatorConfig,
    MIEstimator,
    estimator_features,
    needs_hidden_layers,
)
from unmask.mi.label_set import label_resolution
from unmask.mi.probe import MAX_LOGITS, chunk_size
from unmask.models.base import MaskedModel

MASK_RATIO_BUCKETS = (0.0, 0.25, 0.5, 0.75, 1.0)


def compute_features(model: MaskedModel, tokens: torch.Tensor, config: EstimatorConfig,
                     batch_size: int = 256, dtype: torch.dtype = torch.float16,
                     progress: Callable[[int], None] | None = None) -> torch.Tensor:
    """(M, N, F) frozen features (see :func:`estimator_features`) of ``model`` on ``tokens``
    (M, N) for an estimator of ``config``, stored in ``dtype`` (float16 halves the memory;
    post-norm hidden states and probabilities lose nothing that matters). Batches hold at
    most ``batch_size`` contexts and, like the probe's calls, at most ``MAX_LOGITS`` logits
    (N x V each), so a large vocabulary shrinks the batch instead of growing the memory."""
    batch_size = chunk_size(batch_size, tokens.shape[1], model.vocab_size, MAX_LOGITS)
    return frozen_features(model, tokens, lambda out, x: estimator_features(out, model, config),
                           config.feature_size, output_hidden_layers=config.reads_hidden_layers,
                           batch_size=batch_size, dtype=dtype, progress=progress)


# -- metrics ---------------------------------------------------------------------------------


def masked_pairs(masked: torch.Tensor) -> torch.Tensor:
    """(M, N, N) bool: unordered pairs i < j of masked positions."""
    n = masked.shape[1]
    upper = torch.ones(n, n, dtype=torch.bool).triu(1)
    return masked[:, :, None] & masked[:, None, :] & upper


def probe_agreement(true: torch.Tensor, directed: torch.Tensor, masked: torch.Tensor) -> dict:
    """How well the probe reproduces its own labels: the reference an estimator's scores are
    read against. ``true`` (M, N, N) symmetrised labels, ``directed`` (M, N, N) the directed
    values they came from (row i probed), over the unordered masked pairs i < j:

    - ``one_direction``: :func:`pair_metrics` of the single probe direction MI_ij against the
      labels (the ground truth asked once instead of twice);
    - ``between_directions``: MI_ij against MI_ji (for one joint distribution the two agree
      exactly; an MDM's conditionals need not form one);
    - ``ceiling``: what a perfect symmetric predictor would score against the labels if each
      direction were the pair's true value plus independent noise of one law, MI_ij = S + e1,
      MI_ji = S + e2. The label's noise (e1 + e2) / 2 then has the law of the half-difference
      (e1 - e2) / 2, so its ``mse`` is the mean squared half-difference; the correlation of
      S with the mean of two measurements whose correlation is r is sqrt(2r / (1 + r))
      (Spearman-Brown), exact for ``pearson``, an approximation for ``spearman`` (both from
      ``between_directions``; the clip at 0 is ignored)."""
    pairs = masked_pairs(masked.cpu())
    d = directed.cpu()
    forward, backward = d[pairs], d.transpose(1, 2)[pairs]
    between = pair_metrics(forward, backward)

    def through_two(r: float) -> float:
        return math.sqrt(2 * r / (1 + r)) if r > 0 else float("nan")

    half = (forward.double() - backward.double()) / 2
    ceiling = {"mse": float((half ** 2).mean()) if len(half) else float("nan"),
               "pearson": through_two(between["pearson"]),
               "spearman": through_two(between["spearman"])}
    return {"one_direction": pair_metrics(forward, true.cpu()[pairs]),
            "between_directions": between, "ceiling": ceiling}


def evaluate_predictions(pred: torch.Tensor, true: torch.Tensor, masked: torch.Tensor,
                         buckets=MASK_RATIO_BUCKETS, directed: torch.Tensor | None = None
                         ) -> dict:
    """Metrics of predicted vs true MI (M, N, N) over masked pairs, overall and per bucket of
    mask ratio (share of masked positions); plus the mean over contexts of the within-context
    Spearman and top-decile recall (what a decoder ranking pairs of one state relies on).
    directed: optional (M, N, N) directed probe values the labels were symmetrised from; with
    them the metrics are also given on the pairs the labels resolve (:func:`label_resolution`),
    under ``"resolved"`` with their ``share`` of all pairs, and the probe's agreement with
    itself under ``"probe"`` (:func:`probe_agreement`), overall and per bucket."""
    pairs = masked_pairs(masked.cpu())
    pred, true = pred.cpu(), true.cpu()
    result = {"contexts": int(len(true)), **pair_metrics(pred[pairs], true[pairs])}
    if directed is not None:
        sub = pairs & label_resolution(true, directed.cpu())
        result["resolved"] = {"share": float(sub.sum()) / max(int(pairs.sum()), 1),
                              **pair_metrics(pred[sub], true[sub])}
        result["probe"] = probe_agreement(true, directed, masked)
    ratio = masked.float().mean(1).cpu()
    per_bucket = []
    for k, (lo, hi) in enumerate(zip(buckets[:-1], buckets[1:], strict=True)):
        last = k == len(buckets) - 2
        sel = (ratio >= lo) & ((ratio <= hi) if last else (ratio < hi))
        sub = pairs & sel[:, None, None]
        bucket = {"mask_ratio": [lo, hi], "contexts": int(sel.sum()),
                  **pair_metrics(pred[sub], true[sub])}
        if directed is not None and bool(sub.any()):  # contexts of one masked token: no pair
            bucket["probe"] = probe_agreement(true[sel], directed[sel], masked[sel])
        per_bucket.append(bucket)
    result["buckets"] = per_bucket
    within_s, within_r = [], []
    for c in range(len(true)):  # evaluation only, not the hot path
        t, p = true[c][pairs[c]], pred[c][pairs[c]]
        if t.numel() >= 10 and float(t.std()) > 0:
            within_s.append(spearman(p, t))
            within_r.append(top_decile_recall(p, t))
    result["spearman_within"] = float(np.mean(within_s)) if within_s else float("nan")
    result["recall_within"] = float(np.mean(within_r)) if within_r else float("nan")
    return result


def predict(estimator: MIEstimator, hidden: torch.Tensor, masked: torch.Tensor,
            batch_size: int = 256) -> torch.Tensor:
    """(M, N, N) float32 estimated MI from stored hidden states (M, N, D)."""
    parts = []
    with torch.inference_mode():
        for lo in range(0, len(hidden), batch_size):
            parts.append(estimator(hidden[lo:lo + batch_size].float(),
                                   masked[lo:lo + batch_size]))
    n = hidden.shape[1]
    return torch.cat(parts) if parts else torch.zeros(0, n, n)


def _time_call(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up: allocator, kernels
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def cost_fraction(model: MaskedModel, estimator: MIEstimator, tokens: torch.Tensor,
                  repeats: int = 5) -> dict:
    """Median wall time of one MDM forward on ``tokens`` (B, N) and of the estimator on its
    hidden states, and their ratio (the estimator's cost as a fraction of a forward)."""
    layers = needs_hidden_layers(estimator)
    with torch.inference_mode():
        out = model(tokens, output_hidden_layers=layers)
        hidden = estimator.features(out, model)
        masked = tokens == model.mask_id
        model_s = _time_call(lambda: model(tokens, output_hidden_layers=layers), repeats)
        est_s = _time_call(lambda: estimator(hidden, masked), repeats)
    return {"batch": int(tokens.shape[0]), "model_forward_s": model_s, "estimator_s": est_s,
            "fraction": est_s / model_s,
            "model_parameters": sum(p.numel() for p in model.parameters()),
            "estimator_parameters": sum(p.numel() for p in estimator.parameters())}
