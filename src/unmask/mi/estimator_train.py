"""Training and evaluating the MI estimator on ground-truth label sets.

The MDM is frozen, so its hidden states are computed once per context and kept; an epoch then
costs only the estimator's own passes. Loss: mean squared error over the pairs (i, j), i != j,
of masked positions. Contexts are split into train / held-out by their group (the puzzle a
context comes from; in :mod:`unmask.mi.labels` every context is its own puzzle grid) with a
hash of (split seed, group), so a context keeps its side of the split however many contexts a
label set holds. Training stops early when the held-out loss has not improved for
``patience`` evaluations; ``out/best/`` holds the best estimator, ``out/checkpoint.pt`` the
state to resume from.

Evaluation metrics are computed over the unordered pairs i < j of masked positions (the
matrices are symmetric), pooled over contexts, overall and per mask-ratio bucket:
MSE, Pearson, Spearman (average ranks for ties) and top-decile recall (of the true top 10% of
pairs, the share also in the predicted top 10%; ties broken by pair order). With the probe's
directed values at hand, the same metrics on the pairs the labels resolve (see
:func:`label_resolution`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from unmask.errors import UnmaskError, require
from unmask.frozen_head import frozen_features
from unmask.mi.estimator import (
    EstimatorConfig,
    MIEstimator,
    estimator_features,
    needs_hidden_layers,
)
from unmask.models.base import MaskedModel, ordered_masked_pairs
from unmask.training import (
    adamw,
    append_history,
    load_checkpoint,
    save_checkpoint,
    saved_config,
    warmup_cosine_lr,
)

MASK_RATIO_BUCKETS = (0.0, 0.25, 0.5, 0.75, 1.0)


# -- label sets ------------------------------------------------------------------------------

@dataclass
class LabelSet:
    """Ground-truth MI for M contexts of length N.

    tokens: (M, N) long with MASK at the masked positions.
    mi: (M, N, N) float symmetric MI in nats (0 off masked pairs).
    groups: (M,) long puzzle id of each context (the unit of the held-out split).
    model_fingerprint: the MDM the labels were probed on.
    identity: what made the labels (the label folder's identity), for the record.
    directed: optional (M, N, N) float, the probe's directed values (row i probed), from
        which ``mi`` was symmetrised; read from a label folder, not carried by moved copies.
    """

    tokens: torch.Tensor
    mi: torch.Tensor
    groups: torch.Tensor
    model_fingerprint: str
    identity: dict | None = None
    directed: torch.Tensor | None = None

    def __post_init__(self):
        m, n = self.tokens.shape
        require(self.mi.shape == (m, n, n),
                f"mi: expected shape {(m, n, n)}, got {tuple(self.mi.shape)}")
        require(self.groups.shape == (m,),
                f"groups: expected shape {(m,)}, got {tuple(self.groups.shape)}")
        require(self.directed is None or self.directed.shape == (m, n, n),
                f"directed: expected shape {(m, n, n)}, got "
                f"{None if self.directed is None else tuple(self.directed.shape)}")

    @property
    def resolved(self) -> torch.Tensor | None:
        """(M, N, N) bool, the pairs whose label exceeds its probe asymmetry
        (:func:`label_resolution`); None without the directed values."""
        return None if self.directed is None else label_resolution(self.mi, self.directed)

    def __len__(self) -> int:
        return self.tokens.shape[0]

    @classmethod
    def from_dir(cls, path: str | Path) -> LabelSet:
        """Read a label folder written by ``unmask mi label``."""
        from unmask.mi.labels import read_labels

        path = Path(path)
        if not path.is_dir():
            raise UnmaskError(f"labels: {path} is not a directory")
        tensors, manifest = read_labels(path)
        if "tokens" not in tensors or "mi" not in tensors:
            raise UnmaskError(f"labels: {path} holds no contexts")
        identity = manifest.get("identity", {})
        # every context of a label folder is drawn from its own puzzle grid
        groups = torch.arange(len(tensors["tokens"]))
        directed = tensors["directed"].float() if "directed" in tensors else None
        return cls(tensors["tokens"].long(), tensors["mi"].float(), groups,
                   identity.get("model_fingerprint", ""), identity, directed)

    def moved(self, index: torch.Tensor, cell_perm: np.ndarray,
              token_map: np.ndarray) -> LabelSet:
        """Contexts ``index`` (K,) moved by K symmetries: position i of copy k is position
        cell_perm[k, i] of the original, tokens relabelled by token_map[k] (K, V), the MI
        matrix permuted alike; each copy keeps its original's group (so the held-out split
        never separates a context from its copies)."""
        perm = torch.from_numpy(np.asarray(cell_perm, dtype=np.int64))
        tmap = torch.from_numpy(np.asarray(token_map, dtype=np.int64))
        require(perm.shape == (len(index), self.tokens.shape[1]),
                f"cell_perm: expected shape {(len(index), self.tokens.shape[1])}, "
                f"got {tuple(perm.shape)}")
        tokens = torch.gather(tmap, 1, torch.gather(self.tokens[index], 1, perm))
        mi = self.mi[index]
        mi = torch.gather(mi, 1, perm[:, :, None].expand_as(mi))
        mi = torch.gather(mi, 2, perm[:, None, :].expand_as(mi))
        return LabelSet(tokens, mi, self.groups[index], self.model_fingerprint, self.identity)

    def check_model(self, model: MaskedModel) -> None:
        """Raise :class:`UnmaskError` unless the labels were probed on ``model``."""
        got = model.fingerprint()
        if self.model_fingerprint != got:
            raise UnmaskError(f"labels: probed on model {self.model_fingerprint or '?'}, "
                              f"not on this model ({got})")


def label_resolution(mi: torch.Tensor, directed: torch.Tensor) -> torch.Tensor:
    """(M, N, N) bool: the pairs whose symmetrised label ``mi`` exceeds half the difference of
    the probe's two directions, |MI_ij - MI_ji| / 2 (``directed`` (M, N, N), row i probed).

    For one joint distribution the two directions agree; an MDM's conditionals need not form
    one, and where the directions differ by more than the value the label does not fix the
    pair's rank (on Sudoku: pairs with a near-certain cell, whose MI is at the scale of that
    disagreement, or clipped to exactly 0)."""
    d = directed.double()
    return mi.double() > (d - d.transpose(1, 2)).abs() / 2


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on uint64: a fixed, well-spread hash of each value."""
    x = x.astype(np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def held_out_mask(groups: torch.Tensor, fraction: float, seed: int = 0) -> torch.Tensor:
    """(M,) bool: the contexts whose group hashes into the held-out ``fraction``."""
    require(0.0 < fraction < 1.0, f"held_out: must be in (0, 1), got {fraction}")
    g = groups.cpu().numpy().astype(np.int64).view(np.uint64)
    with np.errstate(over="ignore"):
        h = _mix64(g ^ _mix64(np.full(g.shape, seed, dtype=np.uint64)))
    u = (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)  # uniform in [0, 1)
    return torch.from_numpy(u < fraction)


# -- hidden states ---------------------------------------------------------------------------

def compute_features(model: MaskedModel, tokens: torch.Tensor, config: EstimatorConfig,
                     batch_size: int = 256, dtype: torch.dtype = torch.float16,
                     progress: Callable[[int], None] | None = None) -> torch.Tensor:
    """(M, N, F) frozen features (see :func:`estimator_features`) of ``model`` on ``tokens``
    (M, N) for an estimator of ``config``, stored in ``dtype`` (float16 halves the memory;
    post-norm hidden states and probabilities lose nothing that matters)."""
    return frozen_features(model, tokens, lambda out, x: estimator_features(out, model, config),
                           config.feature_size, output_hidden_layers=config.reads_hidden_layers,
                           batch_size=batch_size, dtype=dtype, progress=progress)


# -- metrics ---------------------------------------------------------------------------------

def rankdata(x: torch.Tensor) -> torch.Tensor:
    """(P,) float64 ranks 1..P of ``x`` (P,), tied values sharing their average rank."""
    x = x.double().flatten()
    order = torch.argsort(x, stable=True)
    _, inverse, counts = torch.unique(x[order], return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).double()  # last 1-based rank of each run of ties
    avg = ends - (counts.double() - 1) / 2
    ranks = torch.empty_like(x)
    ranks[order] = avg[inverse]
    return ranks


def pearson(a: torch.Tensor, b: torch.Tensor) -> float:
    """Pearson correlation of two (P,) vectors; nan when either is constant."""
    a, b = a.double() - a.double().mean(), b.double() - b.double().mean()
    denom = math.sqrt(float((a * a).sum()) * float((b * b).sum()))
    return float((a * b).sum()) / denom if denom > 0 else float("nan")


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    return pearson(rankdata(a), rankdata(b))


def top_decile_recall(pred: torch.Tensor, true: torch.Tensor, fraction: float = 0.1) -> float:
    """Of the ``fraction`` of pairs with the largest true MI, the share that are also among the
    ``fraction`` with the largest predicted MI (k = ceil(fraction * P) pairs each)."""
    p = true.numel()
    if p == 0:
        return float("nan")
    k = max(1, math.ceil(fraction * p))
    top_true = torch.argsort(true.double(), descending=True, stable=True)[:k]
    top_pred = torch.argsort(pred.double(), descending=True, stable=True)[:k]
    hit = torch.zeros(p, dtype=torch.bool)
    hit[top_true] = True
    return float(hit[top_pred].sum()) / k


def pair_metrics(pred: torch.Tensor, true: torch.Tensor) -> dict:
    """MSE, Pearson, Spearman, top-decile recall of predicted vs true values (P,)."""
    if true.numel() == 0:
        return {"pairs": 0}
    return {"pairs": int(true.numel()),
            "mse": float(((pred.double() - true.double()) ** 2).mean()),
            "pearson": pearson(pred, true), "spearman": spearman(pred, true),
            "top_decile_recall": top_decile_recall(pred, true),
            "true_mean": float(true.double().mean())}


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
        if directed is not None and sel.any():
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


# -- training --------------------------------------------------------------------------------

@dataclass
class EstimatorTrainConfig:
    """Training settings.

    eval_every: optimiser steps between held-out evaluations (0 = once per epoch).
    patience: evaluations without a held-out improvement before stopping.
    held_out: share of groups (puzzles) held out; split_seed picks which.
    augment: symmetry copies per training context (see :func:`augmented_training_set`;
        the held-out contexts are never moved).
    loss_scale: what the squared error compares: MI in 'nats', 'sqrt' or 'log' of it (see
        :func:`to_loss_scale`); the held-out loss that picks the best estimator uses the
        same scale.
    rank_weight: weight of a within-context ranking term added to the squared error (see
        :func:`pair_rank_loss`; 0 = plain MSE). Early stopping still uses the squared error.
    rank_samples: pairs of pairs drawn per context for that term.
    """

    batch_size: int = 16
    lr: float = 5e-3
    min_lr: float = 1e-4
    weight_decay: float = 0.01
    warmup_steps: int = 100
    max_epochs: int = 200
    eval_every: int = 0
    patience: int = 15
    held_out: float = 0.1
    split_seed: int = 0
    seed: int = 0
    grad_clip: float = 1.0
    max_time_s: float | None = None
    augment: int = 0
    loss_scale: str = "nats"
    rank_weight: float = 0.0
    rank_samples: int = 512

    def __post_init__(self):
        require(self.batch_size >= 1, f"batch_size: must be >= 1, got {self.batch_size}")
        require(self.lr > 0 and self.min_lr >= 0, "lr, min_lr: must be positive")
        require(self.max_epochs >= 1, f"max_epochs: must be >= 1, got {self.max_epochs}")
        require(self.eval_every >= 0, f"eval_every: must be >= 0, got {self.eval_every}")
        require(self.patience >= 1, f"patience: must be >= 1, got {self.patience}")
        require(0.0 < self.held_out < 1.0, f"held_out: must be in (0, 1), got {self.held_out}")
        require(self.augment >= 0, f"augment: must be >= 0, got {self.augment}")
        require(self.rank_weight >= 0, f"rank_weight: must be >= 0, got {self.rank_weight}")
        require(self.rank_samples >= 1, f"rank_samples: must be >= 1, got {self.rank_samples}")
        require(self.loss_scale in LOSS_SCALES, f"loss_scale: expected one of "
                f"{', '.join(LOSS_SCALES)}, got {self.loss_scale!r}")


def planned_steps(labels: LabelSet, cfg: EstimatorTrainConfig) -> int:
    """Optimiser steps of a run that is not stopped early: max_epochs x batches per epoch
    (``labels`` as passed to :func:`train_estimator`, copies included)."""
    n_train = int((~held_out_mask(labels.groups, cfg.held_out, cfg.split_seed)).sum())
    return cfg.max_epochs * math.ceil(n_train / cfg.batch_size)


def augmented_training_set(labels: LabelSet, cfg: EstimatorTrainConfig, symmetries
                           ) -> LabelSet:
    """``labels`` followed by ``cfg.augment`` symmetry copies of each of its *training*
    contexts (``symmetries(count, seed) -> (cell_perm, token_map)``, see
    :class:`unmask.mi.labels.ContextTask`). Copies keep their original's group, so they land on
    the training side of the same split; the held-out contexts stay the probed ones."""
    if not cfg.augment:
        return labels
    if symmetries is None:
        raise UnmaskError("augment: the labels' task has no known symmetry")
    train_idx = (~held_out_mask(labels.groups, cfg.held_out, cfg.split_seed)).nonzero()[:, 0]
    index = train_idx.repeat(cfg.augment)
    cell_perm, token_map = symmetries(len(index), cfg.seed)
    copies = labels.moved(index, cell_perm, token_map)
    return LabelSet(torch.cat([labels.tokens, copies.tokens]), torch.cat([labels.mi, copies.mi]),
                    torch.cat([labels.groups, copies.groups]), labels.model_fingerprint,
                    labels.identity)


#: scales the training loss can compare MI on (see :func:`to_loss_scale`)
LOSS_SCALES = ("nats", "sqrt", "log")
#: added under the square root so its gradient stays finite at MI = 0 (nats)
SQRT_FLOOR = 1e-4
#: added under the logarithm of the 'log' scale (nats): above it errors count relative
LOG_FLOOR = 0.05


def to_loss_scale(mi: torch.Tensor, scale: str) -> torch.Tensor:
    """MI in nats mapped to the scale the loss compares on, all monotone (the ranking of pairs
    is unchanged): 'nats' (identity); 'sqrt' (sqrt(MI + 1e-4) - 1e-2: an error on a weak pair
    weighs more against one on a strong pair than in plain nats); 'log' (log(MI + 0.05) -
    log(0.05): errors on pairs well above 0.05 nats count relative to their value, so the
    pairs near a top-decile threshold weigh as much as the strongest ones)."""
    if scale == "nats":
        return mi
    if scale == "sqrt":
        return torch.sqrt(mi + SQRT_FLOOR) - SQRT_FLOOR ** 0.5
    if scale == "log":
        return torch.log1p(mi / LOG_FLOOR)
    raise UnmaskError(f"loss_scale: expected one of {', '.join(LOSS_SCALES)}, got {scale!r}")


def pair_squared_error(pred: torch.Tensor, true: torch.Tensor, masked: torch.Tensor,
                       scale: str = "nats") -> tuple[torch.Tensor, torch.Tensor]:
    """(sum, count): the squared error of the MI mapped by :func:`to_loss_scale`, summed over
    the ordered pairs i != j of masked positions ((B, N, N) inputs), and their number."""
    pairs = ordered_masked_pairs(masked)
    diff = to_loss_scale(pred, scale) - to_loss_scale(true, scale)
    return ((diff ** 2) * pairs).sum(), pairs.sum()


def pair_mse(pred: torch.Tensor, true: torch.Tensor, masked: torch.Tensor,
             scale: str = "nats") -> torch.Tensor:
    """Mean squared error over ordered pairs i != j of masked positions ((B, N, N) inputs),
    of the MI mapped by :func:`to_loss_scale` (0 when there is no such pair)."""
    total, count = pair_squared_error(pred, true, masked, scale)
    return total / count if count > 0 else pred.sum() * 0.0


def pair_rank_loss(pred: torch.Tensor, true: torch.Tensor, masked: torch.Tensor,
                   samples: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Within-context pairwise ranking loss (RankNet): for ``samples`` random pairs (a, b) of
    masked pairs i != j per context ((B, N, N) inputs), softplus(-sign(t_a - t_b) (s_a - s_b))
    with s = log(pred + 1e-6) and t the true MI, averaged over draws whose true MI differ. It
    pays for every misordered pair of one context, weak or strong, which the squared error
    barely sees; 0 when no context has two masked pairs."""
    b, n = masked.shape
    pairs = ordered_masked_pairs(masked).view(b, n * n)
    rows = pairs.sum(1) >= 2
    if not rows.any():
        return pred.sum() * 0.0
    weights = pairs[rows].float()
    a = torch.multinomial(weights, samples, replacement=True, generator=generator)
    c = torch.multinomial(weights, samples, replacement=True, generator=generator)
    score = torch.log(pred.reshape(b, n * n)[rows] + 1e-6)
    truth = true.reshape(b, n * n)[rows].to(score.dtype)
    sign = torch.sign(truth.gather(1, a) - truth.gather(1, c))
    loss = F.softplus(-sign * (score.gather(1, a) - score.gather(1, c)))
    keep = sign != 0
    return (loss * keep).sum() / keep.sum().clamp_min(1)


def held_out_loss(estimator: MIEstimator, hidden: torch.Tensor, mi: torch.Tensor,
                  masked: torch.Tensor, batch_size: int = 256, scale: str = "nats") -> float:
    """Pair MSE (on ``scale``) over all masked pairs i != j of the given contexts
    (pair-weighted)."""
    total, count = 0.0, 0
    with torch.inference_mode():
        for lo in range(0, len(hidden), batch_size):
            sl = slice(lo, lo + batch_size)
            pred = estimator(hidden[sl].float(), masked[sl])
            batch_total, batch_count = pair_squared_error(pred, mi[sl], masked[sl], scale)
            total += float(batch_total)
            count += int(batch_count)
    return total / max(count, 1)


def _resumable_settings(cfg: EstimatorTrainConfig) -> EstimatorTrainConfig:
    """The training settings a resumed run must share with its checkpoint: all but the time
    budget, which is per run (a resume may be given more time)."""
    return replace(cfg, max_time_s=None)


def train_estimator(estimator: MIEstimator, hidden: torch.Tensor, labels: LabelSet,
                    mask_id: int, cfg: EstimatorTrainConfig, out_dir: str | Path, *,
                    resume: bool = False, log: Callable[[str], None] = print,
                    progress: Callable[[int, int], None] | None = None,
                    extra: dict | None = None) -> dict:
    """Train ``estimator`` on stored ``hidden`` (M, N, D) states of the labelled contexts.

    out_dir/checkpoint.pt: estimator, optimiser, step, best, history (for ``resume``).
    out_dir/best/: the estimator with the lowest held-out loss (MIEstimator.save).
    out_dir/history.jsonl: one line per evaluation.
    progress(step, total_steps) is called after every step. Batches are a pure function of
    (seed, step), so a resumed run sees the batches an uninterrupted one would have.
    Returns {"best_loss", "best_step", "steps", "stopped", "history"}.
    """
    require(len(hidden) == len(labels),
            f"hidden: {len(hidden)} contexts for {len(labels)} labelled contexts")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    masked_all = labels.tokens == mask_id
    held = held_out_mask(labels.groups, cfg.held_out, cfg.split_seed)
    train_idx = (~held).nonzero().squeeze(1)
    held_idx = held.nonzero().squeeze(1)
    if len(train_idx) == 0 or len(held_idx) == 0:
        raise UnmaskError(f"labels: {len(labels)} contexts are too few to hold out "
                          f"{cfg.held_out:.0%} and still train")
    h_held, mi_held, m_held = hidden[held_idx], labels.mi[held_idx], masked_all[held_idx]
    steps_per_epoch = math.ceil(len(train_idx) / cfg.batch_size)
    total_steps = cfg.max_epochs * steps_per_epoch
    eval_every = cfg.eval_every or steps_per_epoch

    opt = adamw(estimator, cfg.lr, cfg.weight_decay)

    def lr_at(step: int) -> float:
        return warmup_cosine_lr(step, cfg.lr, cfg.min_lr, cfg.warmup_steps, total_steps)

    step, history, best, best_step, bad = 0, [], math.inf, 0, 0
    ckpt = out / "checkpoint.pt"
    if resume:
        state = load_checkpoint(ckpt, "cpu", {
            "estimator_config": (estimator.config, "for another estimator configuration")})
        saved_cfg = saved_config(EstimatorTrainConfig, state.get("train_config"))
        if saved_cfg is None or _resumable_settings(saved_cfg) != _resumable_settings(cfg):
            raise UnmaskError(f"resume: {ckpt} was written with other training settings")
        estimator.load_state_dict(state["estimator"])
        opt.load_state_dict(state["optimizer"])
        step, history, best = state["step"], state["history"], state["best"]
        best_step, bad = state["best_step"], state["bad"]
        log(f"resumed at step {step}, best held-out loss {best:.5g}")
    else:
        # the loss of the untrained head, so the history shows what training bought
        history.append({"step": 0, "held_out_loss": held_out_loss(
            estimator, h_held, mi_held, m_held, scale=cfg.loss_scale)})

    def checkpoint():
        save_checkpoint(ckpt, {"estimator": estimator.state_dict(), "optimizer": opt.state_dict(),
                               "step": step, "history": history, "best": best,
                               "best_step": best_step, "bad": bad,
                               "estimator_config": asdict(estimator.config),
                               "train_config": asdict(cfg)})

    start = time.time()
    stopped = "max_epochs"
    running = None
    while step < total_steps:
        if bad >= cfg.patience:
            stopped = "early_stopping"
            break
        if cfg.max_time_s is not None and time.time() - start > cfg.max_time_s:
            stopped = "max_time"
            break
        epoch, k = divmod(step, steps_per_epoch)
        perm = torch.from_numpy(np.random.default_rng([cfg.seed, epoch])
                                .permutation(len(train_idx)))
        idx = train_idx[perm[k * cfg.batch_size:(k + 1) * cfg.batch_size]]
        estimator.train()
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        masked = masked_all[idx]
        pred = estimator(hidden[idx].float(), masked)
        loss = pair_mse(pred, labels.mi[idx], masked, cfg.loss_scale)
        if cfg.rank_weight:
            gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
            loss = loss + cfg.rank_weight * pair_rank_loss(pred, labels.mi[idx], masked,
                                                           cfg.rank_samples, gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(estimator.parameters(), cfg.grad_clip)
        opt.step()
        step += 1
        value = float(loss.detach())
        running = value if running is None else 0.95 * running + 0.05 * value
        if progress is not None:
            progress(step, total_steps)
        if step % eval_every == 0 or step == total_steps:
            estimator.eval()
            loss_h = held_out_loss(estimator, h_held, mi_held, m_held, scale=cfg.loss_scale)
            record = {"step": step, "epoch": round(step / steps_per_epoch, 2),
                      "train_loss": running, "held_out_loss": loss_h, "lr": lr_at(step),
                      "wall_s": round(time.time() - start, 1)}
            if loss_h < best:
                best, best_step, bad = loss_h, step, 0
                estimator.save(out / "best", extra={
                    "train": record, **(extra or {}),
                    "split": {"held_out": cfg.held_out, "split_seed": cfg.split_seed,
                              "train_contexts": len(train_idx),
                              "held_out_contexts": len(held_idx)}})
                record["best"] = True
            else:
                bad += 1
            append_history(out, history, record, log)
            checkpoint()
    checkpoint()
    return {"best_loss": best, "best_step": best_step, "steps": step, "stopped": stopped,
            "history": history}
