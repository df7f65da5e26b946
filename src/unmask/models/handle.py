"""The model as the decode loop runs it: counted per row, with self-conditioning state."""

from __future__ import annotations

import contextlib

import torch

from unmask.errors import UnmaskError
from unmask.models.base import MaskedModel, ModelOutput
from unmask.probs import previous_pass_probs

#: the largest |logit| a position's most likely token may have: a trained model's are in
#: the tens; beyond this the weights hold values near the float range (one that overflows)
MAX_TOP_LOGIT = 1e8

_ON_ALREADY = contextlib.nullcontext()


def inference_mode() -> contextlib.AbstractContextManager:
    """``torch.inference_mode()``, or nothing where it is on already (the decode loop's
    passes run in it, and entering it again costs as much as a few small operations)."""
    return _ON_ALREADY if torch.is_inference_mode_enabled() else torch.inference_mode()


def check_logits(model: MaskedModel, logits: torch.Tensor) -> None:
    """Refuse in one line a model whose logits (..., V) are not usable numbers: a position
    whose largest logit is NaN, infinite or beyond :data:`MAX_TOP_LOGIT` (weights holding a
    NaN, or values so large the pass overflows). A token may be -inf, not every token."""
    top = logits.amax(-1)
    if not bool((top.abs() < MAX_TOP_LOGIT).all()):  # False for NaN too
        name = getattr(model, "source", None) or type(model).__name__
        raise UnmaskError(f"model: {name} gives logits that are not finite numbers of a "
                          f"sane size (NaN, infinite or beyond {MAX_TOP_LOGIT:g}) on its first "
                          "pass; its weights hold NaN, infinite or huge values")


class ModelHandle:
    """Runs the model for the loop and for samplers that call it themselves (lookahead,
    verification, probing), counting per original row.

    Attributes:
        model: the :class:`MaskedModel`.
        calls: (B,) model calls that included each row (NFE).
        sequences: (B,) sequences evaluated for each row (> calls for lookahead samplers).
        prev_probs: (B, N, V) for a self-conditioning model (else None): each row's beliefs
            from the loop's last pass (zeros before the first and at revealed positions),
            given to every call for that row, lookahead candidates included.
        output_attentions: every call also returns the attention weights
            (``ModelOutput.attentions``), for samplers that read them.

    ``tokens`` (B, N), the decode's rows, tell a model that :attr:`~MaskedModel.supports_padded`
    whether a call's rows hold padding: read once here, which rows do (``padded_rows``; only
    real tokens are ever written, never ``pad_id``); where none does, no call reads it again,
    and where one does, a caller that knows its rows says (``padded``: the decode loop, which
    follows its rows on the host).
    """

    def __init__(self, model: MaskedModel, batch_size: int, device: torch.device,
                 seq_len: int = 0, self_condition: bool = True, output_attentions: bool = False,
                 tokens: torch.Tensor | None = None):
        self.model = model
        self._extra = {"output_attentions": True} if output_attentions else {}
        #: (B,) whether each row holds padding, on the host (None: not known, the model reads
        #: each call's)
        self.padded_rows: list[bool] | None = (
            (tokens == model.pad_id).any(1).tolist()  # one read, per decode
            if tokens is not None and model.supports_padded else None)
        self.any_padded = None if self.padded_rows is None else any(self.padded_rows)
        if self.any_padded is False:
            self._extra["padded"] = False
        self.calls = torch.zeros(batch_size, dtype=torch.long, device=device)
        self.sequences = torch.zeros(batch_size, dtype=torch.long, device=device)
        self.prev_probs = (torch.zeros(batch_size, seq_len, model.vocab_size, device=device)
                           if self_condition and model.self_conditioning
                           else None)
        self._checked = False  # the first call's logits are checked (check_logits)

    def __call__(self, tokens: torch.Tensor, rows: torch.Tensor,
                 output_hidden_layers: bool = False, logits_positions: slice | None = None,
                 distinct: bool = False, padded: bool | None = None) -> ModelOutput:
        """Run the model on ``tokens`` (M, N); ``rows`` (M,) names the original row of each
        sequence (a row named several times is charged one call and M_row sequences;
        ``distinct``: the caller knows ``rows`` increasing, each named once, as the loop's).
        ``logits_positions`` (for a model that ``supports_logits_positions``): the output
        covers those positions only. ``padded``: whether ``tokens`` hold padding, where the
        caller knows (:attr:`padded_rows`; None: as far as the handle knows, else the model
        reads it)."""
        extra = (self._extra if logits_positions is None
                 else dict(self._extra, logits_positions=logits_positions))
        if self.any_padded and padded is not None:  # (no row is: padded=False in _extra)
            extra = dict(extra, padded=padded)
        with inference_mode():
            if self.prev_probs is None:
                out = self.model(tokens, output_hidden_layers=output_hidden_layers, **extra)
            else:
                out = self.model(tokens, output_hidden_layers=output_hidden_layers,
                                 prev_probs=self.prev_probs[rows], **extra)
        if not self._checked:
            check_logits(self.model, out.logits)
            self._checked = True
        self.count(rows, distinct)
        return out

    def count(self, rows: torch.Tensor, distinct: bool = False) -> None:
        """Charge one call to each row named in ``rows`` and one sequence per name
        (``distinct``: each named once, increasing)."""
        if distinct and rows.shape[0] == self.calls.shape[0]:  # every row, once each
            self.calls += 1
            self.sequences += 1
            return
        # a row named several times gets the same value written several times: one call
        self.calls[rows] += 1
        self.sequences.index_add_(0, rows, torch.ones_like(rows))

    def remember(self, rows: torch.Tensor, probs: torch.Tensor, still_masked: torch.Tensor
                 ) -> None:
        """Keep the loop's pass on ``rows`` (R,) for the next: ``probs`` (R, N, V) where
        ``still_masked`` (R, N), zeros elsewhere. No-op without self-conditioning."""
        if self.prev_probs is not None:
            self.prev_probs[rows] = previous_pass_probs(probs, still_masked)
