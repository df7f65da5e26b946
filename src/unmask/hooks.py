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
from unmask.models.base import MaskedModel
from unmask.samplers.base import Sampler, StepState
from unmask.samplers.verified import Verified


class Hook:
    """Base class of decode hooks; every method's default leaves the loop unchanged.

    rewrites: True for hooks that may change tokens after the write (``after_write``); the
        loop then does not reuse a sampler's output on the next state (lookahead samplers).
    """

    rewrites: ClassVar[bool] = False

    def prepare(self, model: MaskedModel, sampler: Sampler, tokens: torch.Tensor) -> None:
        """Called once before the first pass with the batch ``tokens`` (B, N) on the model's
        device; check compatibility and set up per-decode state here."""

    def adjust_log_probs(self, rows: torch.Tensor, log_probs: torch.Tensor) -> torch.Tensor:
        """(R, N, V) the log-probabilities the pass decodes from; ``rows`` (R,) are indices
        into the batch given to ``decode``."""
        return log_probs

    def after_write(self, rows: torch.Tensor, state: StepState, remask: torch.Tensor
                    ) -> torch.Tensor:
        """(R, N) bool positions to mask again after this pass's write, given those the hooks
        before this one chose (``remask``); ``state.tokens`` are the tokens before the write.
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
        require(isinstance(threshold, (int, float)) and not isinstance(threshold, bool)
                and 0.0 < threshold < 1.0,
                f"remask_threshold: must be in (0, 1), got {threshold!r}")
        require(isinstance(max_remasks, int) and not isinstance(max_remasks, bool)
                and max_remasks >= 0,
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
        self.given = tokens != model.mask_id
        self.counts = torch.zeros(tokens.shape, dtype=torch.long, device=tokens.device)

    def after_write(self, rows, state, remask):
        with torch.inference_mode():
            wrong = self.corrector.wrong_probs(state.output, state.tokens)
        new = (~state.masked & ~self.given[rows] & (self.counts[rows] < self.max_remasks)
               & (wrong > self.threshold))
        self.counts[rows] += new.long()
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
        require(isinstance(max_bans, int) and not isinstance(max_bans, bool) and max_bans >= 0,
                f"max_remasks: must be an integer >= 0, got {max_bans!r}")
        self.max_bans = max_bans

    def prepare(self, model, sampler, tokens):
        if self.max_bans >= len(model.real_token_ids):
            raise UnmaskError(f"max_remasks: {self.max_bans} bans could leave a position none "
                              f"of the model's {len(model.real_token_ids)} tokens; use fewer "
                              "with ban_remasked")
        self.banned = torch.zeros(*tokens.shape, model.vocab_size, dtype=torch.bool,
                                  device=tokens.device)

    def adjust_log_probs(self, rows, log_probs):
        return torch.log_softmax(log_probs.masked_fill(self.banned[rows], -torch.inf), -1)

    def after_write(self, rows, state, remask):
        vocab = torch.arange(self.banned.shape[-1], device=remask.device)
        self.banned[rows] |= remask[..., None] & (vocab == state.tokens[..., None])
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
