"""The MI estimator's losses: squared error of MI over pairs of masked positions, on a chosen
scale, and a within-context ranking term."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from unmask.errors import UnmaskError
from unmask.mi.estimator import MIEstimator
from unmask.models.base import ordered_masked_pairs

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
