"""The base of samplers that wrap another: every part of the sampler protocol forwarded.

A wrapper changes one thing about its inner sampler's decisions (verifies them, ends rows
early, adds decode hooks) and is otherwise that sampler: the loop reads
``needs_hidden_layers``, ``needs_attentions``, ``reads_eligible_only`` and
``evaluates_next_state`` from it, calls ``prepare``, ``begin``, ``stats`` and
``decode_hooks`` on it, and takes its
:class:`~unmask.samplers.base.Selection` (tokens, entropy and the next-output channel
included). :class:`SamplerWrapper` forwards all of them, so a subclass overrides only what it
changes (usually ``select``, calling ``self.inner.select``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from unmask.errors import require
from unmask.models.base import MaskedModel
from unmask.samplers.base import Sampler, Selection, StepState


@dataclass
class SamplerWrapper(Sampler):
    """A sampler that is its ``inner`` sampler in every part of the protocol it does not
    override.

    inner: the wrapped :class:`~unmask.samplers.base.Sampler` (a wrapper too, possibly).
    """

    inner: Sampler

    def __post_init__(self):
        require(isinstance(self.inner, Sampler),
                f"inner: expected a Sampler, got {type(self.inner).__name__}")

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.inner.name

    @property
    def label(self) -> str:
        return self.inner.label

    @property
    def evaluates_next_state(self) -> bool:  # type: ignore[override]
        return self.inner.evaluates_next_state

    @property
    def needs_hidden_layers(self) -> bool:  # type: ignore[override]
        return self.inner.needs_hidden_layers

    @property
    def needs_attentions(self) -> bool:  # type: ignore[override]
        return self.inner.needs_attentions

    @property
    def reads_eligible_only(self) -> bool:  # type: ignore[override]
        return self.inner.reads_eligible_only

    def prepare(self, model: MaskedModel) -> None:
        self.inner.prepare(model)

    def begin(self, batch_size: int, seq_len: int) -> None:
        self.inner.begin(batch_size, seq_len)

    def select(self, state: StepState) -> Selection:
        return self.inner.select(state)

    def stats(self) -> dict[str, torch.Tensor]:
        return self.inner.stats()

    def decode_hooks(self) -> tuple:
        return self.inner.decode_hooks()



@dataclass
class EveryPosition(SamplerWrapper):
    """``inner``, with the decode loop computing the pass at every position of the rows
    (distributions, and the model on whole rows) although ``inner`` reads eligible positions
    only: the same tokens and passes, at the cost the narrow pass saves (for measuring it)."""

    reads_eligible_only: ClassVar[bool] = False
