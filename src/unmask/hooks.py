"""Decode hooks: small pieces that change what the loop does around the sampler's choice.

A hook is called by :func:`unmask.decode.decode` at fixed points of every pass, like a
``LogitsProcessor`` in transformers' generation loop. The corrector is three of them:
:class:`Remask` (mask again the decoded tokens a corrector finds wrong), :class:`CheckFinished`
(keep a row that has just been filled for one more pass, so it is checked) and
:class:`BanRemasked` (a token sent back is not proposed at that position again);
:func:`corrector_hooks` builds them together.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from unmask.errors import UnmaskError, require
from unmask.host_reads import runs_on_host
from unmask.models.base import MaskedModel
from unmask.models.handle import inference_mode
from unmask.probs import real_log_probs
from unmask.samplers.base import Sampler, Selection, StepState, add_rows, put_rows, rows_of
from unmask.samplers.spec import register_hook
from unmask.samplers.verified import Verified
from unmask.validation import is_int, is_number


class Hook:
    """Base class of decode hooks; every method's default leaves the loop unchanged. Every
    method but ``prepare`` runs in ``torch.inference_mode`` (the decode's passes), so a hook
    builds no autograd graph there.

    rewrites: True for hooks that may change tokens after the write (``after_write``); the
        loop then does not reuse a sampler's output on the next state (lookahead samplers),
        nor assume a row's block changes only when its eligible positions are revealed. A
        hook whose ``after_write`` only reads leaves it False.
    reads_eligible_only: True for hooks whose choices depend on the pass's per-position
        values (``adjust_log_probs``, ``state``) at eligible positions only, whichever
        positions ``columns`` / ``state.columns`` span
        (:attr:`~unmask.samplers.base.Sampler.reads_eligible_only`: the loop computes over the
        current blocks only when the sampler and every hook do).
    """

    rewrites: ClassVar[bool] = False
    reads_eligible_only: ClassVar[bool] = False

    def prepare(self, model: MaskedModel, sampler: Sampler, tokens: torch.Tensor) -> None:
        """Called once before the first pass with the batch ``tokens`` (B, N) on the model's
        device (the loop's own state, written in place every pass: a hook may keep it to
        read the rows' current tokens later); check compatibility and set up per-decode
        state here."""

    def adjust_log_probs(self, rows: torch.Tensor, log_probs: torch.Tensor,
                         columns: slice = slice(0, None)) -> torch.Tensor:
        """(R, W, V) the log-probabilities the pass decodes from, at the positions ``columns``
        (lo:hi, W = hi - lo; every position unless the loop computes the current blocks
        only); ``rows`` (R,) are indices into the batch given to ``decode``."""
        return log_probs

    def adjust_selection(self, state: StepState, sel: Selection, new: torch.Tensor
                         ) -> tuple[Selection, torch.Tensor]:
        """The pass's selection and the (R, N) tokens to write where it reveals, between the
        sampler's choice and the write: a hook may reveal less (e.g. a constraint keeps a
        jointly feasible part), and must then mark ``stale`` the rows whose
        ``sel.next_output`` assumed the whole reveal."""
        return sel, new

    def after_write(self, rows: torch.Tensor, state: StepState, remask: torch.Tensor
                    ) -> torch.Tensor:
        """(R, N) bool positions to mask again after this pass's write, given those the hooks
        before this one chose (``remask``); ``state.tokens`` are the tokens before the write.
        ``remask`` is not written into: a hook that sends nothing back returns it as given
        (the loop then skips what a remask costs the write), else a new tensor
        (``remask | sent_back``, with ``rewrites`` True).
        """
        return remask

    def keep_rows(self, state: StepState) -> torch.Tensor | None:
        """(R,) bool rows to keep for another pass even if they have no MASK left, or None."""
        return None

    def stats(self) -> dict[str, torch.Tensor]:
        """Per-row (B,) statistics for ``DecodeResult.stats``."""
        return {}


class Remask(Hook):
    """Mask again the decoded tokens a corrector finds wrong, so they are decoded anew.

    Every pass, ``corrector.wrong_probs(output, tokens)`` reads the loop's own forward pass;
    a decoded token (neither given nor still masked) whose probability of being wrong exceeds
    ``threshold`` is masked again, at most ``max_remasks`` times per position (so decoding
    ends). Reports ``stats["remasked"]`` (B,): tokens sent back per row.

    Args:
        corrector: a :class:`~unmask.corrector.Corrector` of the model (anything with
            ``check_model(model)`` and ``wrong_probs(output, tokens) -> (B, N)``).
        threshold: in (0, 1).
        max_remasks: integer >= 0.
    """

    rewrites: ClassVar[bool] = True

    def __init__(self, corrector, threshold: float = 0.3, max_remasks: int = 2):
        require(callable(getattr(corrector, "wrong_probs", None))
                and callable(getattr(corrector, "check_model", None)),
                "corrector: expected an object with check_model() and wrong_probs()")
        require(is_number(threshold) and 0.0 < threshold < 1.0,
                f"remask_threshold: must be in (0, 1), got {threshold!r}")
        require(is_int(max_remasks) and max_remasks >= 0,
                f"max_remasks: must be an integer >= 0, got {max_remasks!r}")
        self.corrector, self.threshold, self.max_remasks = corrector, threshold, max_remasks
        self.counts = torch.zeros(0, 0, dtype=torch.long)

    def prepare(self, model, sampler, tokens):
        if isinstance(sampler, Verified):
            raise UnmaskError("verify: not with a corrector (it may change the state after the "
                              "verified pass); use one or the other")
        self.corrector.check_model(model)
        if isinstance(self.corrector, torch.nn.Module):
            self.corrector.to(tokens.device)  # it reads the model's pass where the model runs
        self.counts = torch.zeros(tokens.shape, dtype=torch.long, device=tokens.device)
        # how often each position may go back: never where given
        self.cap = torch.where(tokens != model.mask_id, 0, self.max_remasks)

    def after_write(self, rows, state, remask):
        with inference_mode():
            wrong = self.corrector.wrong_probs(state.output, state.tokens)
        new = (((wrong > self.threshold) & (rows_of(self.counts, rows) < rows_of(self.cap, rows)))
               > state.masked)  # on bools, a > b is a & ~b
        add_rows(self.counts, rows, new)
        return remask | new

    def stats(self):
        return {"remasked": self.counts.sum(1)}


class CheckFinished(Hook):
    """A row whose last MASK was filled gets one more pass before it ends, so that the hooks
    after the write (:class:`Remask`) see it complete; it ends only when such a pass leaves it
    complete."""

    def keep_rows(self, state):
        return state.masked.any(1)


class BanRemasked(Hook):
    """A token masked again (by the hooks before this one) is not proposed at that position
    again: the model's distribution there is renormalised without it.

    Args:
        max_bans: how many tokens one position can have banned (the ``max_remasks`` of the
            :class:`Remask` before it); below the model's number of real tokens, so a position
            always keeps one.
    """

    def __init__(self, max_bans: int):
        require(is_int(max_bans) and max_bans >= 0,
                f"max_remasks: must be an integer >= 0, got {max_bans!r}")
        self.max_bans = max_bans

    def prepare(self, model, sampler, tokens):
        if self.max_bans >= len(model.real_token_ids):
            raise UnmaskError(f"max_remasks: {self.max_bans} bans could leave a position none "
                              f"of the model's {len(model.real_token_ids)} tokens; use fewer "
                              "with ban_remasked")
        self.banned = torch.zeros(*tokens.shape, model.vocab_size, dtype=torch.bool,
                                  device=tokens.device)

    def adjust_log_probs(self, rows, log_probs, columns=slice(0, None)):
        banned = rows_of(self.banned, rows)[:, columns]
        return torch.log_softmax(log_probs.masked_fill(banned, -torch.inf), -1)

    def after_write(self, rows, state, remask):
        vocab = torch.arange(self.banned.shape[-1], device=remask.device)
        sent_back = remask[..., None] & (vocab == state.tokens[..., None])  # (R, N, V)
        if len(rows) == len(self.banned):  # every row (as rows_of): in place
            self.banned |= sent_back
        else:
            self.banned[rows] |= sent_back
        return remask


def corrector_hooks(corrector, *, threshold: float = 0.3, max_remasks: int = 2,
                    ban_remasked: bool = False) -> tuple[Hook, ...]:
    """The corrector as decode hooks: :class:`Remask`, :class:`CheckFinished` and, with
    ``ban_remasked``, :class:`BanRemasked`.

    Args:
        corrector: see :class:`Remask`.
        threshold: a decoded token whose probability of being wrong exceeds this is masked
            again.
        max_remasks: how often one position may be masked again.
        ban_remasked: a token sent back is not proposed at that position again; then
            ``max_remasks`` must be below the number of real tokens.

    Returns:
        The hooks, in the order ``decode(..., hooks=)`` takes them.
    """
    hooks: tuple[Hook, ...] = (Remask(corrector, threshold, max_remasks), CheckFinished())
    return hooks + (BanRemasked(max_remasks),) if ban_remasked else hooks


def _check_unit(name: str, value, *, open_low: bool = False) -> None:
    ok = is_number(value) and (0.0 < value <= 1.0 if open_low else 0.0 <= value <= 1.0)
    require(ok, f"{name}: must be in {'(0, 1]' if open_low else '[0, 1]'}, got {value!r}")


def _check_count(name: str, value) -> None:
    require(is_int(value) and value >= 0,
            f"{name}: must be an integer >= 0, got {value!r}")


class _RevealConfidence(Hook):
    """Shared state of the re-masking hooks: which positions were given, how often each went
    back to MASK (``counts``), and the loop's confidence in each token when it was revealed
    (``revealed_conf``, (B, N) float64; 1 for given tokens)."""

    def prepare(self, model, sampler, tokens):
        self.mask_id = model.mask_id
        self.given = tokens != model.mask_id
        self.counts = torch.zeros(tokens.shape, dtype=torch.long, device=tokens.device)
        self.revealed_conf = torch.ones(tokens.shape, dtype=torch.float64, device=tokens.device)
        self.last_conf = torch.ones(tokens.shape, dtype=torch.float64, device=tokens.device)
        self.last_masked = ~self.given

    def _track(self, rows, state, remask) -> None:
        """Record the confidence of the tokens the last pass revealed (masked then, decoded
        now) and this pass's proposals' confidence for the next."""
        fresh = rows_of(self.last_masked, rows) & ~state.masked
        put_rows(self.revealed_conf, rows, torch.where(fresh, rows_of(self.last_conf, rows),
                                                   rows_of(self.revealed_conf, rows)))
        put_rows(self.last_conf, rows, state.x0_prob.double())
        put_rows(self.last_masked, rows, state.masked & ~remask)


@register_hook("wino", primary="tau2")
class WinoVerify(_RevealConfidence):
    """WINO's narrow-out step (Wide-In, Narrow-Out, arXiv 2507.18578): every pass, a token
    decoded in an earlier pass is checked by the model with its own position masked, and
    masked again when the model, seeing every other position, no longer backs it:

        re-mask i  iff  p_theta(x_i | z with i masked) < tau2.

    WINO computes these in the pass itself (a shadow copy of the block); here they are one
    batched call of one sequence per checked position (counted in ``sequences``). The wide-in
    step is a lenient threshold sampler (``threshold:tau=TAU1``). At most ``max_checks``
    tokens per row are checked each pass: those revealed with the lowest confidence (the
    loop's ``x0_prob`` at their reveal). A position is masked again at most ``max_remasks``
    times, so decoding ends. Reports ``stats["remasked"]`` (B,). Spec name:
    ``+wino=TAU2[,max_checks=C][,max_remasks=R]`` (``threshold:tau=0.7+wino=0.9``).

    Args:
        tau2: in (0, 1]: the confidence a decoded token needs to stay.
        max_checks: tokens checked per row and pass (integer >= 1).
        max_remasks: integer >= 0.
    """

    rewrites: ClassVar[bool] = True

    def __init__(self, tau2: float = 0.9, max_checks: int = 8, max_remasks: int = 1):
        _check_unit("tau2", tau2, open_low=True)
        _check_count("max_checks", max_checks)
        require(max_checks >= 1, f"max_checks: must be >= 1, got {max_checks!r}")
        _check_count("max_remasks", max_remasks)
        self.tau2, self.max_checks, self.max_remasks = tau2, max_checks, max_remasks
        self.counts = torch.zeros(0, 0, dtype=torch.long)

    def after_write(self, rows, state, remask):
        self._track(rows, state, remask)
        counts = rows_of(self.counts, rows)
        decoded = (~state.masked & ~rows_of(self.given, rows) & ~remask
                   & (counts < self.max_remasks))
        k = min(self.max_checks, state.tokens.shape[1])
        conf = rows_of(self.revealed_conf, rows).masked_fill(~decoded, torch.inf)
        low, pos = conf.topk(k, dim=1, largest=False)  # (R, k)
        check = low.isfinite() & state.masked.any(1, keepdim=True)  # only rows still decoding
        if not check.any():
            return remask
        r, c = check.nonzero(as_tuple=True)
        p = pos[r, c]
        seqs = state.tokens[r]  # (R, N), a copy: one sequence per checked token
        seq = torch.arange(len(r), device=seqs.device)
        seqs[seq, p] = self.mask_id
        out = state.model(seqs, state.row_ids[r])
        # each sequence is read at its checked position only: (R, V)
        lp = real_log_probs(out.logits[seq, p], state.real_mask.to(seqs.device))
        kept = lp.gather(-1, state.tokens[r, p][:, None]).squeeze(-1).exp()
        new = torch.zeros_like(remask)
        new[r, p] = kept < self.tau2  # (r, p) pairs are distinct
        put_rows(self.counts, rows, counts + new.long())
        put_rows(self.last_masked, rows, rows_of(self.last_masked, rows) | new)
        return remask | new

    def stats(self):
        return {"remasked": self.counts.sum(1)}


#: stream of the loop's counter-based noise that :class:`ReMDMRemask` draws from
REMDM_STREAM = 101
REMDM_STRATEGIES = ("cap", "conf")


@register_hook("remdm", primary="eta")
class ReMDMRemask(_RevealConfidence):
    """ReMDM-style remasking (Remasking Discrete Diffusion Models, arXiv 2503.00307).

    ReMDM's reverse step lets a decoded token return to MASK: for z_t = x (decoded),
    q(z_s | z_t, x) = Cat((1 - sigma_t) x + sigma_t m), with sigma_t <= sigma_max =
    min(1, (1 - alpha_s) / alpha_t). Its schedules used here, per decoded (not given) token l:

        cap:   sigma^l = eta                                  (ReMDM-cap, eta <= sigma_max)
        conf:  sigma^l = min(1, eta D softmax(-psi)^l)        (ReMDM-conf)

    with psi^l the confidence of token l when it was revealed and D the number of decoded
    tokens of the row (so both schedules mask eta D tokens again in expectation, conf
    preferring the least confident). Remasking runs only while the row's decoded share is in
    [``start``, ``stop``) (ReMDM's switch-on/off window) and the row still has a MASK, and a
    position goes back at most ``max_remasks`` times, so decoding ends. Draws are the loop's
    counter-based noise (stream :data:`REMDM_STREAM`): reproducible per row seed. Reports
    ``stats["remasked"]`` (B,). Spec name: ``+remdm=ETA[,strategy=S][,start=A][,stop=B]
    [,max_remasks=R]`` (``topk:k=2+remdm=0.05,strategy=cap``).

    Args:
        eta: in [0, 1].
        strategy: ``"cap"`` or ``"conf"``.
        start, stop: the window, 0 <= start <= stop <= 1, as shares of the row's decodable
            positions.
        max_remasks: integer >= 0.
    """

    rewrites: ClassVar[bool] = True

    def __init__(self, eta: float = 0.05, strategy: str = "conf", start: float = 0.0,
                 stop: float = 1.0, max_remasks: int = 1):
        _check_unit("eta", eta)
        require(strategy in REMDM_STRATEGIES,
                f"strategy: expected one of {REMDM_STRATEGIES}, got {strategy!r}")
        _check_unit("start", start)
        _check_unit("stop", stop)
        require(start <= stop, f"start, stop: start {start!r} is after stop {stop!r}")
        _check_count("max_remasks", max_remasks)
        self.eta, self.strategy, self.start, self.stop = eta, strategy, start, stop
        self.max_remasks = max_remasks
        self.counts = torch.zeros(0, 0, dtype=torch.long)

    def prepare(self, model, sampler, tokens):
        super().prepare(model, sampler, tokens)
        #: the per-decode state as arrays sharing its memory, for the host's compiled pass
        self.arrays = None

    def after_write(self, rows, state, remask):
        if runs_on_host(remask.device):
            from unmask.loop_kernels import remdm_host

            return remdm_host(self, rows, state, remask, REMDM_STREAM)
        draw = state.uniform(REMDM_STREAM, (remask.shape[1],))  # (R, N)
        self._track(rows, state, remask)
        given = rows_of(self.given, rows)
        decoded = ~state.masked & ~given & ~remask
        share = decoded.sum(1) / (~given).sum(1).clamp(min=1)
        active = (share >= self.start) & (share < self.stop) & state.masked.any(1)
        d = decoded.sum(1, keepdim=True).double()
        if self.strategy == "cap":
            sigma = torch.full(decoded.shape, float(self.eta), dtype=torch.float64,
                               device=decoded.device)
        else:
            weights = torch.softmax((-rows_of(self.revealed_conf, rows)).masked_fill(~decoded,
                                                                                  -torch.inf),
                                    dim=1).nan_to_num(0.0)
            sigma = (self.eta * d * weights).clamp(max=1.0)
        counts = rows_of(self.counts, rows)
        new = (decoded & active[:, None] & (counts < self.max_remasks)
               & (draw < sigma))
        put_rows(self.counts, rows, counts + new.long())
        put_rows(self.last_masked, rows, rows_of(self.last_masked, rows) | new)
        return remask | new

    def stats(self):
        return {"remasked": self.counts.sum(1)}
