"""PC-Sampler: position-aware calibration of confidence by how rare the proposed token is."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch

from unmask.errors import UnmaskError, require
from unmask.io import parse_json
from unmask.samplers.base import CountRule, Sampler, Selection, StepState, register, top_k_mask


def frequency_table(tokens: torch.Tensor, vocab_size: int, ignore: int | None = None
                    ) -> torch.Tensor:
    """(V,) float64 relative frequency of each id in a reference corpus ``tokens`` (any shape),
    not counting ``ignore`` (e.g. MASK)."""
    flat = tokens.reshape(-1).long()
    if ignore is not None:
        flat = flat[flat != ignore]
    require(flat.numel() > 0, "tokens: the reference corpus is empty")
    counts = torch.bincount(flat, minlength=vocab_size)[:vocab_size].double()
    return counts / counts.sum()


def _load_frequencies(value) -> torch.Tensor:
    if isinstance(value, (str, Path)):
        path = Path(value)
        if not path.is_file():
            raise UnmaskError(f"frequencies: no file {path}")
        text = path.read_text()
        try:
            data = parse_json(text)
        except json.JSONDecodeError:
            try:
                data = [float(t) for t in text.split()]
            except ValueError:
                raise UnmaskError(f"frequencies: {path} is neither a JSON list nor numbers "
                                  "separated by whitespace") from None
        value = data
    try:
        f = torch.as_tensor(value, dtype=torch.float64).detach().cpu()
    except (TypeError, ValueError, RuntimeError):
        raise UnmaskError("frequencies: expected a list of numbers, a tensor or a path") from None
    require(f.dim() == 1 and f.numel() >= 1, "frequencies: expected a 1-D table (V,)")
    require(bool(torch.isfinite(f).all() and (f >= 0).all() and f.sum() > 0),
            "frequencies: must be finite, non-negative and not all zero")
    return f


@register("pc")
@dataclass
class PCSampler(CountRule, Sampler):
    """score_i = exp(-position_decay * (i - i0)) * min(-p_i(x0_i) log f(x0_i), alpha); top-k.

    f: relative frequency of each token id in a reference corpus (``frequencies``: a (V,)
    table, a JSON list or whitespace-separated file, or None for uniform over the real
    tokens; it is renormalised over the real tokens). i0 is the row's first eligible
    position; the ranking within a row does not depend on it, it only keeps exp() in range.
    position_decay is the paper's lambda (0 for Sudoku, where position means nothing), alpha
    caps the calibrated confidence. k, steps, schedule: :class:`CountRule`.
    """

    reads_eligible_only: ClassVar[bool] = True

    position_decay: float = 0.25
    alpha: float = 10.0
    frequencies: object = None

    def __post_init__(self):
        super().__post_init__()
        require(self.position_decay >= 0,
                f"position_decay: must be >= 0, got {self.position_decay}")
        require(self.alpha > 0, f"alpha: must be > 0, got {self.alpha}")
        self._table = None if self.frequencies is None else _load_frequencies(self.frequencies)

    def log_frequency(self, real_mask: torch.Tensor) -> torch.Tensor:
        """(V,) log f over the real tokens (-inf elsewhere)."""
        v = real_mask.shape[0]
        if self._table is None:
            f = real_mask.double()
        else:
            require(self._table.numel() == v,
                    f"frequencies: table has {self._table.numel()} entries, the model's "
                    f"vocabulary has {v}")
            f = torch.where(real_mask, self._table, 0.0)
            require(bool(f.sum() > 0), "frequencies: no mass on the model's real tokens")
        return (f / f.sum()).log()

    def begin(self, batch_size: int, seq_len: int) -> None:
        self._neg_log_f = None  # (V,) -log f on the decode's device, from its first pass
        self._pos = None  # (N,) float64 positions

    def select(self, state: StepState) -> Selection:
        if getattr(self, "_neg_log_f", None) is None:  # once per decode (it checks the table)
            device = state.tokens.device
            self._neg_log_f = -self.log_frequency(state.real_mask.to(device)).to(device)
            self._pos = torch.arange(state.tokens.shape[1], device=device, dtype=torch.float64)
        # a token never seen in the corpus is maximally informative: capped at alpha
        info = (state.x0_prob * self._neg_log_f[state.x0]).clamp(max=self.alpha)  # (B, N) f64
        pos, n = self._pos, state.tokens.shape[1]
        first = torch.where(state.eligible, pos, n).min(1, keepdim=True).values  # (B, 1)
        weight = torch.exp((pos - first) * -self.position_decay)
        return Selection(top_k_mask(weight * info, state.eligible, self.count(state)))
