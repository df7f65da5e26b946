"""The decode loop's extras compiled for the CPU (:func:`unmask.host_reads.runs_on_host`):
ReMDM's remasking pass (:class:`unmask.hooks.ReMDMRemask`) and the end-at-EOS check
(:class:`unmask.generate.StopAtEOS`), one native loop over each row instead of a few dozen
small tensor operations a pass; the accelerators run the tensor operations.

Arrays are the tensors' own memory (``Tensor.numpy()``: no copy). ReMDM's arithmetic is the
tensor path's: the decoded share in float32 (an integer division in torch), the softmax and
sigma in float64, (eta * D) * weight as written there, so the remasked positions are the
same (the softmax's sum may add up in another order, moving sigma by an ulp, which a 52-bit
draw falls between with probability ~1e-16).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit

from unmask.rng_host import row_key, uniform_at


@njit(cache=True)
def _track(masked, remask, x0_prob, last_masked, last_conf, revealed_conf):
    """:meth:`unmask.hooks._RevealConfidence._track` for one row (each array (N,)): the
    confidence of the tokens the last pass revealed, and this pass's proposals' confidence
    for the next."""
    for j in range(masked.shape[0]):
        if last_masked[j] and not masked[j]:
            revealed_conf[j] = last_conf[j]
        last_conf[j] = np.float64(x0_prob[j])
        last_masked[j] = masked[j] and not remask[j]


@njit(cache=True)
def remdm_pass(rows, masked, remask, x0_prob, seeds, steps, stream, given, counts, last_masked,
               last_conf, revealed_conf, eta, use_conf, start, stop, max_remasks, out):
    """One pass of ReMDM over the pass's rows: ``rows`` (R,) into the (B, N) state arrays
    (``given``, ``counts``, ``last_masked``, ``last_conf``, ``revealed_conf``, updated in
    place); ``masked``, ``remask``, ``x0_prob`` (R, N) the pass's; ``out`` (R, N) bool
    receives remask | the positions sent back to MASK. The draw is the rows' (``seeds``,
    ``steps`` (R,)) uniforms of ``stream`` (:func:`unmask.rng.row_uniform`'s values), each
    computed where a position could go back only. Returns whether any position was sent
    back."""
    n = masked.shape[1]
    sigma = np.empty(n)
    decoded = np.empty(n, dtype=np.bool_)
    any_new = False
    for i in range(rows.shape[0]):
        r = rows[i]
        key = row_key(seeds[i], steps[i], stream)
        _track(masked[i], remask[i], x0_prob[i], last_masked[r], last_conf[r],
               revealed_conf[r])
        n_decoded, n_free, any_masked, top = 0, 0, False, -math.inf
        for j in range(n):
            any_masked = any_masked or masked[i, j]
            n_free += not given[r, j]
            decoded[j] = not given[r, j] and not masked[i, j] and not remask[i, j]
            if decoded[j]:
                n_decoded += 1
                top = max(top, -revealed_conf[r, j])
        share = np.float32(n_decoded) / np.float32(max(n_free, 1))
        active = share >= np.float32(start) and share < np.float32(stop) and any_masked
        scale = eta * np.float64(n_decoded)  # eta * D
        if use_conf:  # softmax over the decoded positions of -psi
            total = 0.0
            for j in range(n):
                sigma[j] = math.exp(-revealed_conf[r, j] - top) if decoded[j] else 0.0
                total += sigma[j]
            inv = 1.0 / total if total > 0 else 0.0
            for j in range(n):
                sigma[j] = min(scale * (sigma[j] * inv), 1.0)
        else:
            sigma[:] = eta
        for j in range(n):
            new = (decoded[j] and active and counts[r, j] < max_remasks
                   and uniform_at(key, j) < sigma[j])
            out[i, j] = remask[i, j] or new
            if new:
                counts[r, j] += 1
                last_masked[r, j] = True
                any_new = True
    return any_new


def remdm_host(hook, rows: torch.Tensor, state, remask: torch.Tensor,
               stream: int) -> torch.Tensor:
    """(R, N) bool: :meth:`unmask.hooks.ReMDMRemask.after_write` on the host (its draw: the
    pass's ``stream``), its state updated in place; ``remask`` itself where nothing goes
    back."""
    if hook.arrays is None:  # once a decode: the hook's state, written in place below
        hook.arrays = tuple(t.numpy() for t in (hook.given, hook.counts, hook.last_masked,
                                                hook.last_conf, hook.revealed_conf))
        hook.views, hook.scratch = {}, np.empty((0, 0), dtype=np.bool_)
    out = hook.scratch
    if out.shape != tuple(remask.shape):
        out = hook.scratch = np.empty(tuple(remask.shape), dtype=np.bool_)
    if not remdm_pass(_kept_view(hook.views, "rows", rows), state.masked.numpy(),
                      _kept_view(hook.views, "remask", remask), state.x0_prob.numpy(),
                      _kept_view(hook.views, "seeds", state.seeds),
                      state.global_step.numpy(), int(stream), *hook.arrays, float(hook.eta),
                      hook.strategy == "conf", float(hook.start), float(hook.stop),
                      int(hook.max_remasks), out):
        return remask
    return torch.from_numpy(out.copy())


def _kept_view(views: dict, name: str, t: torch.Tensor) -> np.ndarray:
    """``t.numpy()``, kept in ``views`` while ``name`` is the same tensor pass after pass (the
    loop's rows, seeds and all-False remask stand until a row leaves)."""
    kept = views.get(name)
    if kept is None or kept[0] is not t:
        kept = views[name] = (t, t.numpy())
    return kept[1]


@njit(cache=True)
def _eos_ended(eligible, tokens, eos_id, block, gen_start, out):
    """``out`` (R,) bool: whether row r's block before its first eligible position (blocks
    of ``block`` from ``gen_start``; the first one has none) is all ``eos_id``; whether any
    is."""
    any_ended = False
    for r in range(eligible.shape[0]):
        first = 0  # no eligible position: as argmax's 0
        for j in range(eligible.shape[1]):
            if eligible[r, j]:
                first = j
                break
        start = first - (first - gen_start) % block - block
        ended = start >= gen_start
        j = start
        while ended and j < start + block:
            ended = tokens[r, j] == eos_id
            j += 1
        out[r] = ended
        any_ended = any_ended or ended
    return any_ended


def eos_ended_host(eligible: torch.Tensor, tokens: torch.Tensor, eos_id: int, block: int,
                   gen_start: int) -> torch.Tensor | None:
    """(R,) bool: :class:`unmask.generate.StopAtEOS`'s ended rows; None when none is."""
    out = np.empty(eligible.shape[0], dtype=np.bool_)
    if not _eos_ended(eligible.numpy(), tokens.numpy(), int(eos_id), int(block),
                      int(gen_start), out):
        return None
    return torch.from_numpy(out)
