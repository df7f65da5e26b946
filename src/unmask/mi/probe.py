"""Ground-truth pairwise mutual information by perturbation probing (SPEC §1).

For a context x with masked positions M, one base pass gives p_j and H_j for every j in M.
Probing position i with token v (x_i := v) gives p_{j|i=v}; then

    H(X_j | X_i, C) = sum_v p_i(v) H(p_{j|i=v}),     MI_ij = H_j - H(X_j | X_i, C)

with row i the probed position. All probes of all contexts are laid out as one flat list of
(context, position, token) triples and evaluated in chunks of ``batch_size`` sequences.

Pruning skips tokens with p_i(v) < eps. Let d_i be the dropped mass of row i, A_ij the mean of
H(p_{j|i=v}) over the kept tokens weighted by p_i (what is computed) and B_ij the same mean over
the dropped tokens (unknown, but in [0, log R] with R the number of real tokens):

* renormalised (p_i divided by its kept mass, the default): the estimate of H(X_j | X_i, C) is
  A_ij, the full sum is (1 - d_i) A_ij + d_i B_ij, so the error of MI_ij is
  d_i (B_ij - A_ij), in [-d_i A_ij, d_i (log R - A_ij)]:
  ``|error| <= d_i * max(A_ij, log R - A_ij) <= d_i * log R``.
* not renormalised: the estimate is (1 - d_i) A_ij, so MI_ij is overestimated by
  d_i B_ij, in [0, d_i log R]: ``|error| <= d_i * log R`` (the SPEC bound).

Renormalising is the better estimator: it assumes the dropped tokens behave like the kept ones
instead of assuming they leave X_j certain. The symmetrised matrix clips (MI + MI^T)/2 at 0, a
1-Lipschitz map, so its error is at most (bound_ij + bound_ji) / 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from unmask.errors import UnmaskError, require
from unmask.models.base import MaskedModel
from unmask.models.handle import ModelHandle
from unmask.probs import entropy_from_log_probs, real_log_probs


@dataclass
class PerturbationMI:
    """Probing result for B contexts of length N (float64, nats).

    mi: (B, N, N) symmetrised (MI + MI^T)/2 clipped at 0; zero diagonal; zero where either
        position is revealed. With ``positions``, a pair probed in one direction only takes that
        direction's value; a pair probed in neither is 0.
    directed: (B, N, N) raw MI_ij = H_j - H(X_j | X_i, C), row i = probed position. May be
        negative (a model's conditionals need not form one joint). Zero on rows not probed, on
        revealed columns and on the diagonal.
    entropy: (B, N) marginal entropy H_j of each masked position (0 where revealed).
    dropped_mass: (B, N) probability mass p_i pruned from row i (0 on rows not probed).
    directed_error_bound: (B, N, N) bound on |directed - directed at eps=0|.
    error_bound: (B, N, N) bound on |mi - mi at eps=0| (same ``positions``).
    probed: (B, N) bool, the rows i that were probed.
    log_probs: (B, N, V) base-pass log-probabilities over the real tokens (-inf elsewhere;
        zeros for contexts with nothing masked).
    row_sequences: (B,) sequences evaluated for each context (1 base + its probes; 0 if
        nothing is masked).
    model_calls: model calls made (base chunks + probe chunks).
    sequences: sequences evaluated in total.
    """

    mi: torch.Tensor
    directed: torch.Tensor
    entropy: torch.Tensor
    dropped_mass: torch.Tensor
    directed_error_bound: torch.Tensor
    error_bound: torch.Tensor
    probed: torch.Tensor
    log_probs: torch.Tensor
    row_sequences: torch.Tensor
    model_calls: int
    sequences: int


def directed_error_bound(dropped_mass: torch.Tensor, conditional_entropy: torch.Tensor,
                         n_real_tokens: int, renormalize: bool = True) -> torch.Tensor:
    """(B, N, N) bound on the pruning error of directed MI (see the module docstring).

    dropped_mass: (B, N) pruned mass d_i per probed row; conditional_entropy: (B, N, N) the
    computed H(X_j | X_i, C) estimate (= entropy[:, None, :] - directed on probed pairs).
    """
    log_r = math.log(n_real_tokens)
    d = dropped_mass[:, :, None]
    if not renormalize:
        return d * log_r
    a = conditional_entropy.clamp(0.0, log_r)
    return d * torch.maximum(a, log_r - a)


def symmetrize(directed: torch.Tensor, available: torch.Tensor) -> torch.Tensor:
    """(B, N, N) mean of the available directions of each pair, clipped at 0, zero diagonal.

    directed: (B, N, N) with zeros where ``available`` (B, N, N) bool is False.
    """
    count = available.double() + available.transpose(1, 2).double()
    total = directed + directed.transpose(1, 2)
    sym = torch.where(count > 0, total / count.clamp_min(1.0), torch.zeros_like(total))
    n = directed.shape[-1]
    eye = torch.eye(n, dtype=torch.bool, device=directed.device)
    return sym.clamp_min(0.0).masked_fill(eye, 0.0)


def _chunks(total: int, size: int):
    for start in range(0, total, size):
        yield start, min(start + size, total)


def perturbation_mi(model: MaskedModel | ModelHandle, tokens: torch.Tensor, *, eps: float = 0.0,
                    batch_size: int = 4096, renormalize: bool = True,
                    positions: torch.Tensor | None = None,
                    row_ids: torch.Tensor | None = None) -> PerturbationMI:
    """Pairwise MI of the masked positions of ``tokens`` (B, N) by probing every token.

    model: a :class:`MaskedModel`, or the :class:`ModelHandle` of a decode loop (its counters
        are then charged, per original row ``row_ids`` (B,), default 0..B-1).
    eps: skip probes whose token has p_i(v) < eps (tokens with p_i(v) = 0 are never probed,
        and each probed row keeps at least its most likely token). 0 probes everything.
    batch_size: sequences per model call.
    renormalize: divide p_i by its kept mass (see the module docstring for both bounds).
    positions: optional (B, N) bool restricting which masked positions i are probed (rows of
        ``directed``); every masked j is still a column.
    The model runs under ``torch.inference_mode`` in its own precision (``autocast_bf16``).
    """
    handle = model if isinstance(model, ModelHandle) else None
    net = handle.model if handle is not None else model
    net.check_tokens(tokens)
    require(isinstance(eps, (int, float)) and 0.0 <= eps < 1.0,
            f"eps: must be in [0, 1), got {eps}")
    require(isinstance(batch_size, int) and batch_size >= 1,
            f"batch_size: must be an integer >= 1, got {batch_size}")
    b, n = tokens.shape
    device = tokens.device
    masked = tokens == net.mask_id  # (B, N)
    if positions is not None:
        if not isinstance(positions, torch.Tensor) or positions.shape != tokens.shape \
                or positions.dtype != torch.bool:
            raise UnmaskError(f"positions: expected a bool tensor of shape {tuple(tokens.shape)}")
        probed = masked & positions.to(device)
    else:
        probed = masked
    if row_ids is None:
        row_ids = torch.arange(b, device=device)
    else:
        require(isinstance(row_ids, torch.Tensor) and row_ids.shape == (b,),
                f"row_ids: expected a tensor of shape ({b},)")
        row_ids = row_ids.to(device=device, dtype=torch.long)
    if handle is None:
        handle = ModelHandle(net, b, device)
        row_ids = torch.arange(b, device=device)
    real_mask = net.real_token_mask.to(device)
    real_ids = torch.tensor(net.real_token_ids, device=device, dtype=torch.long)
    n_real = len(net.real_token_ids)

    # 1. base pass on every context that has something masked
    entropy = torch.zeros(b, n, dtype=torch.float64, device=device)
    base_log_probs = torch.zeros(b, n, net.vocab_size, dtype=torch.float64, device=device)
    active = masked.any(1).nonzero().squeeze(1)
    calls = 0
    for lo, hi in _chunks(len(active), batch_size):
        rows = active[lo:hi]
        out = handle(tokens[rows], row_ids[rows])
        calls += 1
        # float64 from here on: the MI is a small difference of sums of entropies
        log_p = real_log_probs(out.logits.double(), real_mask)
        entropy[rows] = torch.where(masked[rows], entropy_from_log_probs(log_p), 0.0)
        base_log_probs[rows] = log_p
    p_real = base_log_probs[..., real_ids].exp()  # (B, N, R)

    # 2. the probe list: (context, position, token) for every kept token of every probed row
    keep = (p_real > 0) & (p_real >= eps) & probed[..., None]  # (B, N, R)
    top = torch.nn.functional.one_hot(p_real.argmax(-1), n_real).bool()
    keep |= top & probed[..., None]
    kept_mass = (p_real * keep).sum(-1)  # (B, N)
    dropped = torch.where(probed, (1.0 - kept_mass).clamp_min(0.0), 0.0)
    weight = p_real / kept_mass.clamp_min(1e-300)[..., None] if renormalize else p_real
    ctx, pos, tok = keep.nonzero(as_tuple=True)  # (P,) each, context-major
    probe_weight = weight[ctx, pos, tok]
    probe_token = real_ids[tok]

    # 3. probe in flat chunks; accumulate sum_v w_i(v) H(p_{j|i=v}) into row (context, i)
    cond = torch.zeros(b * n, n, dtype=torch.float64, device=device)
    for lo, hi in _chunks(len(ctx), batch_size):
        c, i, v = ctx[lo:hi], pos[lo:hi], probe_token[lo:hi]
        arange = torch.arange(hi - lo, device=device)
        x = tokens[c]
        x[arange, i] = v
        out = handle(x, row_ids[c])
        calls += 1
        h = entropy_from_log_probs(real_log_probs(out.logits.double(), real_mask))  # (c, N)
        still_masked = x == net.mask_id  # columns j: masked in the context, j != i
        h = torch.where(still_masked, h, 0.0)
        cond.index_add_(0, c * n + i, probe_weight[lo:hi, None] * h)
    cond = cond.view(b, n, n)

    eye = torch.eye(n, dtype=torch.bool, device=device)
    available = probed[:, :, None] & masked[:, None, :] & ~eye  # (B, N, N)
    directed = torch.where(available, entropy[:, None, :] - cond, 0.0)
    d_bound = torch.where(available, directed_error_bound(dropped, cond, n_real, renormalize),
                          0.0)
    mi = symmetrize(directed, available)
    count = available.double() + available.transpose(1, 2).double()
    sym_bound = torch.where(count > 0, (d_bound + d_bound.transpose(1, 2))
                            / count.clamp_min(1.0), 0.0)
    row_sequences = masked.any(1).long() + keep.sum((1, 2))
    return PerturbationMI(mi=mi, directed=directed, entropy=entropy, dropped_mass=dropped,
                          directed_error_bound=d_bound, error_bound=sym_bound, probed=probed,
                          log_probs=base_log_probs, row_sequences=row_sequences, model_calls=calls,
                          sequences=int(row_sequences.sum()))


def naive_sequences(tokens: torch.Tensor, mask_id: int, n_real_tokens: int) -> torch.Tensor:
    """(B,) cost of unpruned probing, 1 + |M| |V| per context with a masked position."""
    m = (tokens == mask_id).sum(1)
    return torch.where(m > 0, 1 + m * n_real_tokens, 0)


def floor_sequences(result: PerturbationMI, real_token_ids, eps: float) -> torch.Tensor:
    """(B,) the pruning floor 1 + sum_i |{v : p_i(v) >= eps}| over the probed rows (contexts
    with nothing masked cost 0)."""
    p = result.log_probs[..., list(real_token_ids)].exp()
    kept = ((p >= eps) & (p > 0) & result.probed[..., None]).sum((1, 2))
    return torch.where(result.row_sequences > 0, 1 + kept, 0)

