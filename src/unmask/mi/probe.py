"""Ground-truth pairwise mutual information by perturbation probing (arXiv 2605.20187).

For a context x with masked positions M, one base pass gives p_j and H_j for every j in M.
Probing position i with token v (x_i := v) gives p_{j|i=v}; then

    H(X_j | X_i, C) = sum_v p_i(v) H(p_{j|i=v}),     MI_ij = H_j - H(X_j | X_i, C)

with row i the probed position. All probes of all contexts are laid out as one flat list of
(context, position, token) triples and evaluated in chunks of ``batch_size`` sequences.

Memory does not grow with |V| x N x B: the base pass runs in the same chunks, and of its
(chunk, N, V) probabilities only what the probes need is kept: the entropies, and the
supported tokens (p_i(v) >= eps, among the ``top_k`` most likely) with their weights. A chunk
holds at most ``max_logits`` logits (sequences x N x V), so at a large vocabulary the chunk
shrinks instead of the (chunk, N, V) float64 tensors growing; the probe list grows with the
number of supported tokens, at most |M| min(R, 1/eps, top_k) per context.

Pruning skips tokens with p_i(v) < eps, and tokens outside the ``top_k`` most likely of
row i. Let d_i be the dropped mass of row i, A_ij the mean of
H(p_{j|i=v}) over the kept tokens weighted by p_i (what is computed) and B_ij the same mean over
the dropped tokens (unknown, but in [0, log R] with R the number of real tokens):

* renormalised (p_i divided by its kept mass, the default): the estimate of H(X_j | X_i, C) is
  A_ij, the full sum is (1 - d_i) A_ij + d_i B_ij, so the error of MI_ij is
  d_i (B_ij - A_ij), in [-d_i A_ij, d_i (log R - A_ij)]:
  ``|error| <= d_i * max(A_ij, log R - A_ij) <= d_i * log R``.
* not renormalised: the estimate is (1 - d_i) A_ij, so MI_ij is overestimated by
  d_i B_ij, in [0, d_i log R]: ``|error| <= d_i * log R``.

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
from unmask.validation import is_int


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
    support: (B, N) long, tokens of each probed row the support rule admits (p_i(v) > 0,
        p_i(v) >= eps, among the ``top_k`` most likely); 0 on rows not probed.
    probes: (B, N) long, tokens probed on each row: ``support``, or 1 (the most likely token)
        where the rule admits none.
    row_sequences: (B,) sequences evaluated for each context (1 base + its probes; 0 if
        nothing is masked).
    model_calls: model calls made (base chunks + probe chunks).
    sequences: sequences evaluated in total (a property: one host read).
    """

    mi: torch.Tensor
    directed: torch.Tensor
    entropy: torch.Tensor
    dropped_mass: torch.Tensor
    directed_error_bound: torch.Tensor
    error_bound: torch.Tensor
    probed: torch.Tensor
    support: torch.Tensor
    probes: torch.Tensor
    row_sequences: torch.Tensor
    model_calls: int

    @property
    def sequences(self) -> int:
        return int(self.row_sequences.sum())


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


def _probe_rows(masked: torch.Tensor, positions: torch.Tensor | None,
                row_ids: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Check :func:`perturbation_mi`'s ``positions`` and ``row_ids`` against ``masked``
    (B, N). Returns (probed (B, N) bool, row_ids (B,) long), on ``masked``'s device."""
    b = masked.shape[0]
    device = masked.device
    if positions is not None:
        if not isinstance(positions, torch.Tensor) or positions.shape != masked.shape \
                or positions.dtype != torch.bool:
            raise UnmaskError(f"positions: expected a bool tensor of shape {tuple(masked.shape)}")
        probed = masked & positions.to(device)
    else:
        probed = masked
    if row_ids is None:
        return probed, torch.arange(b, device=device)
    require(isinstance(row_ids, torch.Tensor) and row_ids.shape == (b,),
            f"row_ids: expected a tensor of shape ({b},)")
    return probed, row_ids.to(device=device, dtype=torch.long)


def _log_probs64(logits: torch.Tensor, real_mask: torch.Tensor) -> torch.Tensor:
    """(..., V) float64 log-probabilities over the real tokens: the values of
    :func:`unmask.probs.real_log_probs` on ``logits.double()``, with one float64 copy of
    ``logits`` alive beside the result instead of two."""
    z = logits.to(torch.float64, copy=True)  # never the caller's tensor
    z.masked_fill_(~real_mask, -torch.inf)
    return torch.log_softmax(z, dim=-1)


#: floats per token that one inference call of a transformer holds beside its logits, per unit
#: of hidden size: every layer's hidden states (a Hugging Face model returns them all), the
#: feed-forward's 4 D and the attention. A BERT of 8 layers at d=512 holds about this (2.3 MB
#: per sequence of 64 tokens at its peak).
ACTIVATIONS_PER_HIDDEN = 16
#: at most this many such floats per model call (512 MB of float32)
MAX_ACTIVATIONS = 1 << 27


def chunk_size(batch_size: int, length: int, vocab_size: int, max_logits: int,
               hidden_size: int = 0, max_activations: int | None = None) -> int:
    """Sequences per model call: ``batch_size``, lowered so that one call's logits
    (sequences, ``length``, ``vocab_size``) hold at most ``max_logits`` elements and its
    activations (``ACTIVATIONS_PER_HIDDEN * hidden_size`` floats per token; 0: not counted)
    at most ``max_activations`` (default ``MAX_ACTIVATIONS``; at least 1 sequence). At a
    small vocabulary the activations are what bound memory: 25 logits but ~8,000 activation
    floats a token for AntiBERTy."""
    max_activations = MAX_ACTIVATIONS if max_activations is None else max_activations
    by_logits = max_logits // max(1, length * vocab_size)
    by_activations = max_activations // max(1, length * ACTIVATIONS_PER_HIDDEN * hidden_size)
    return max(1, min(batch_size, by_logits, by_activations))


@dataclass
class _Support:
    """What the base pass keeps of a context's (N, V) probabilities.

    entropy (B, N) float64; support, probes (B, N) long; dropped (B, N) float64 pruned mass;
    and the flat probe list, context-major: ctx, pos, token (P,) long, weight (P,) float64
    (p_i(v), divided by the kept mass of row i when renormalising)."""

    entropy: torch.Tensor
    support: torch.Tensor
    probes: torch.Tensor
    dropped: torch.Tensor
    ctx: torch.Tensor
    pos: torch.Tensor
    token: torch.Tensor
    weight: torch.Tensor


def _base_pass(handle: ModelHandle, tokens: torch.Tensor, masked: torch.Tensor,
               probed: torch.Tensor, row_ids: torch.Tensor, real_mask: torch.Tensor,
               chunk: int, eps: float, top_k: int | None, renormalize: bool
               ) -> tuple[_Support, int]:
    """One pass on every context of ``tokens`` (B, N) with a masked position, in chunks of
    ``chunk`` rows; each chunk's (chunk, N, V) probabilities are reduced to entropies and the
    supported tokens of its probed rows before the next chunk runs. Returns (the support,
    model calls made)."""
    b, n = tokens.shape
    device = tokens.device
    f64 = dict(dtype=torch.float64, device=device)
    entropy = torch.zeros(b, n, **f64)
    dropped = torch.zeros(b, n, **f64)
    support = torch.zeros(b, n, dtype=torch.long, device=device)
    probes = torch.zeros(b, n, dtype=torch.long, device=device)
    lists: list[tuple[torch.Tensor, ...]] = []
    active = masked.any(1).nonzero().squeeze(1)
    calls = 0
    for lo, hi in _chunks(len(active), chunk):
        rows = active[lo:hi]
        out = handle(tokens[rows], row_ids[rows])
        calls += 1
        # float64 from here on: the MI is a small difference of sums of entropies
        p = _log_probs64(out.logits, real_mask).exp_()  # (c, N, V), 0 off real
        del out
        entropy[rows] = torch.where(masked[rows], torch.special.entr(p).sum(-1), 0.0)
        rule = (p > 0) & (p >= eps)
        if top_k is not None and top_k < p.shape[-1]:
            best = p.topk(top_k, dim=-1)
            rule &= torch.zeros_like(rule).scatter_(-1, best.indices, True)
            first = best.indices[..., :1]
        else:
            first = p.argmax(-1, keepdim=True)
        rule &= probed[rows, :, None]
        support[rows] = rule.sum(-1)
        keep = rule.scatter_(-1, first, probed[rows, :, None])  # the top token always
        del rule
        probes[rows] = keep.sum(-1)
        r, pos, tok = keep.nonzero(as_tuple=True)  # context-major, like the rows
        del keep
        w = p[r, pos, tok]
        kept_mass = torch.zeros(len(rows), n, **f64).index_put_((r, pos), w, accumulate=True)
        dropped[rows] = torch.where(probed[rows], (1.0 - kept_mass).clamp_min(0.0), 0.0)
        if renormalize:
            w = w / kept_mass[r, pos].clamp_min(1e-300)
        lists.append((rows[r], pos, tok, w))
        del p
    if lists:
        ctx, pos, tok, w = (torch.cat(parts) for parts in zip(*lists, strict=True))
    else:
        ctx = pos = tok = torch.zeros(0, dtype=torch.long, device=device)
        w = torch.zeros(0, **f64)
    return _Support(entropy, support, probes, dropped, ctx, pos, tok, w), calls


def _probe_pass(handle: ModelHandle, tokens: torch.Tensor, sup: _Support,
                row_ids: torch.Tensor, real_mask: torch.Tensor, chunk: int
                ) -> tuple[torch.Tensor, int]:
    """Run the probes of ``sup`` in flat chunks of ``chunk`` sequences. Returns (cond
    (B, N, N) float64: row (context, i) holds sum_v w_i(v) H(p_{j|i=v}) over the columns j
    still masked; model calls made)."""
    b, n = tokens.shape
    device = tokens.device
    mask_id = handle.model.mask_id
    cond = torch.zeros(b * n, n, dtype=torch.float64, device=device)
    calls = 0
    for lo, hi in _chunks(len(sup.ctx), chunk):
        c, i, v = sup.ctx[lo:hi], sup.pos[lo:hi], sup.token[lo:hi]
        arange = torch.arange(hi - lo, device=device)
        x = tokens[c]
        x[arange, i] = v
        out = handle(x, row_ids[c])
        calls += 1
        # entropies of the columns j still masked (in the context, j != i) only: the
        # (K, V) float64 work shrinks with the share of the context that is masked
        still = (x == mask_id).nonzero(as_tuple=True)
        h = torch.zeros(hi - lo, n, dtype=torch.float64, device=device)
        p = _log_probs64(out.logits[still], real_mask).exp_()  # (K, V)
        del out
        h[still] = torch.special.entr(p, out=p).sum(-1)
        del p
        cond.index_add_(0, c * n + i, sup.weight[lo:hi, None] * h)
    return cond.view(b, n, n), calls


#: default bound on the logits of one model call (sequences x N x V): 2^24 float32 logits
#: are 64 MiB, the float64 probabilities made from them 128 MiB each (a few live at once);
#: Sudoku and protein contexts still get 4096 sequences per call
MAX_LOGITS = 1 << 24


def perturbation_mi(model: MaskedModel | ModelHandle, tokens: torch.Tensor, *, eps: float = 0.0,
                    batch_size: int = 4096, renormalize: bool = True,
                    positions: torch.Tensor | None = None,
                    row_ids: torch.Tensor | None = None, top_k: int | None = None,
                    max_logits: int = MAX_LOGITS) -> PerturbationMI:
    """Pairwise MI of the masked positions of ``tokens`` (B, N) by probing their supported
    tokens.

    model: a :class:`MaskedModel`, or the :class:`ModelHandle` of a decode loop (its counters
        are then charged, per original row ``row_ids`` (B,), default 0..B-1; ``tokens`` are
        then the loop's, whose ids it has checked, so they are not read back again).
    eps: skip probes whose token has p_i(v) < eps (tokens with p_i(v) = 0 are never probed,
        and each probed row keeps at least its most likely token). 0 probes everything.
    top_k: probe at most the ``top_k`` most likely tokens of each row (None: no cap), so a
        context costs at most 1 + |M| top_k sequences whatever the vocabulary.
    batch_size: at most this many sequences per model call.
    max_logits: at most this many logits (sequences x N x V) per model call; the chunk is
        ``min(batch_size, max_logits // (N V))`` sequences (at least 1), and fewer when the
        model's activations would pass ``MAX_ACTIVATIONS`` (:func:`chunk_size`), so peak
        memory is bounded at any vocabulary and model size.
    renormalize: divide p_i by its kept mass (see the module docstring for both bounds).
    positions: optional (B, N) bool restricting which masked positions i are probed (rows of
        ``directed``); every masked j is still a column.
    The model runs under ``torch.inference_mode`` in its own precision (``autocast_bf16``).
    Cost: 1 + ``probes.sum()`` sequences per context with a masked position (``row_sequences``),
    against the naive 1 + |M| |V| (:func:`naive_sequences`) and the floor 1 + ``support.sum()``
    (:func:`floor_sequences`).
    """
    handle = model if isinstance(model, ModelHandle) else None
    net = handle.model if handle is not None else model
    if handle is None:
        net.check_tokens(tokens)
    require(isinstance(eps, (int, float)) and 0.0 <= eps < 1.0,
            f"eps: must be in [0, 1), got {eps}")
    require(is_int(batch_size) and batch_size >= 1,
            f"batch_size: must be an integer >= 1, got {batch_size}")
    require(top_k is None or (is_int(top_k)
                              and top_k >= 1),
            f"top_k: must be None or an integer >= 1, got {top_k}")
    require(is_int(max_logits) and max_logits >= 1,
            f"max_logits: must be an integer >= 1, got {max_logits}")
    b, n = tokens.shape
    device = tokens.device
    masked = tokens == net.mask_id  # (B, N)
    probed, row_ids = _probe_rows(masked, positions, row_ids)
    if handle is None:
        handle = ModelHandle(net, b, device)
        row_ids = torch.arange(b, device=device)
    real_mask = net.real_token_mask.to(device)
    n_real = len(net.real_token_ids)
    chunk = chunk_size(batch_size, n, real_mask.shape[-1], max_logits,
                       int(getattr(net, "hidden_size", 0) or 0))

    # 1. base pass on every context that has something masked, reduced chunk by chunk to the
    #    entropies and the probe list: (context, position, token) for every supported token
    sup, calls = _base_pass(handle, tokens, masked, probed, row_ids, real_mask, chunk,
                            float(eps), top_k, renormalize)

    # 2. probe in flat chunks; accumulate sum_v w_i(v) H(p_{j|i=v}) into row (context, i)
    cond, probe_calls = _probe_pass(handle, tokens, sup, row_ids, real_mask, chunk)
    calls += probe_calls

    entropy = sup.entropy
    eye = torch.eye(n, dtype=torch.bool, device=device)
    available = probed[:, :, None] & masked[:, None, :] & ~eye  # (B, N, N)
    directed = torch.where(available, entropy[:, None, :] - cond, 0.0)
    d_bound = torch.where(available, directed_error_bound(sup.dropped, cond, n_real,
                                                          renormalize), 0.0)
    mi = symmetrize(directed, available)
    count = available.double() + available.transpose(1, 2).double()
    sym_bound = torch.where(count > 0, (d_bound + d_bound.transpose(1, 2))
                            / count.clamp_min(1.0), 0.0)
    row_sequences = masked.any(1).long() + sup.probes.sum(1)
    return PerturbationMI(mi=mi, directed=directed, entropy=entropy, dropped_mass=sup.dropped,
                          directed_error_bound=d_bound, error_bound=sym_bound, probed=probed,
                          support=sup.support, probes=sup.probes, row_sequences=row_sequences,
                          model_calls=calls)


def naive_sequences(tokens: torch.Tensor, mask_id: int, n_real_tokens: int) -> torch.Tensor:
    """(B,) cost of unpruned probing, 1 + |M| |V| per context with a masked position."""
    m = (tokens == mask_id).sum(1)
    return torch.where(m > 0, 1 + m * n_real_tokens, 0)


def floor_sequences(result: PerturbationMI) -> torch.Tensor:
    """(B,) the support floor 1 + sum_i |{v : p_i(v) >= eps}| over the probed rows (the
    tokens the support rule admits, ``result.support``; contexts with nothing masked cost
    0). The probe costs more only where a row admits no token and its top token is probed."""
    return torch.where(result.row_sequences > 0, 1 + result.support.sum(1), 0)
