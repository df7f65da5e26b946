"""DAPD, dependency-aware parallel decoding via attention (Kim, Jeon, Jeon, No;
arXiv 2603.12996).

Training-free: the model's own self-attention on the current state induces a dependency graph
over the masked positions (an edge where two positions attend strongly to each other, no edge
where they are taken as conditionally independent), and a pass reveals an independent set of
that graph, so no two strongly coupled positions are revealed together.

Our reading, in the paper's terms: with A = the attention weights averaged over heads (and over
layers, or one chosen layer), the dependence of masked positions i != j is the symmetrised
weight s_ij = (A_ij + A_ji) / 2, measured in units of the uniform weight 1/N; i and j share an
edge when N * s_ij > tau. The independent set is built greedily in descending confidence
(p_i(x0_i)): a position is taken when it clears ``min_confidence`` and has no edge to a position
already taken; the most confident eligible position is always taken. The set is maximal among
the candidates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from unmask.errors import UnmaskError, require
from unmask.host_reads import runs_on_host
from unmask.samplers.base import Sampler, Selection, StepState, register
from unmask.samplers.scan import greedy_scan
from unmask.validation import is_int

#: attention dtypes the host scan reads as they are (others go through :meth:`dependence`)
HOST_DTYPES = (torch.float32, torch.float64)


def greedy_independent_set(adjacency: torch.Tensor, scores: torch.Tensor,
                           candidates: torch.Tensor, eligible: torch.Tensor) -> torch.Tensor:
    """(B, N) bool: a maximal independent set of the candidates, built in descending score.

    adjacency: (B, N, N) bool, symmetric (the diagonal is ignored); scores: (B, N), visited in
    descending order (ties to the lower index); candidates: (B, N) bool, positions that may be
    taken; eligible: (B, N) bool. The highest-scoring eligible position of each row that has one
    is always taken (progress), candidate or not. Vectorised over rows: one step per rank.
    """
    return greedy_scan(scores, eligible, adjacency, 0, "max", available=candidates)


@register("dapd")
@dataclass
class DAPDSampler(Sampler):
    """Reveal a greedy independent set, in confidence order, of the attention dependency graph
    over the eligible positions (arXiv 2603.12996). Needs a model that returns attention
    weights (``MaskedModel.supports_attentions``, e.g. :class:`MDMTransformer`); the loop asks
    for them because of ``needs_attentions``.

    tau: edge threshold, in units of the uniform attention weight 1/N: i and j are dependent
        when N * (A_ij + A_ji) / 2 > tau (A = attention averaged over heads and layers).
    layer: None = average the attention of every applied layer; an int picks one (Python
        indexing, -1 = the last).
    min_confidence: positions with p_i(x0_i) below this wait (the most confident one is
        always revealed).
    """

    needs_attentions: ClassVar[bool] = True

    tau: float = 1.0
    layer: int | None = None
    min_confidence: float = 0.0

    def __post_init__(self):
        require(isinstance(self.tau, (int, float)) and self.tau >= 0,
                f"tau: must be a number >= 0, got {self.tau!r}")
        require(self.layer is None or is_int(self.layer),
                f"layer: must be None or an integer, got {self.layer!r}")
        require(0.0 <= self.min_confidence <= 1.0,
                f"min_confidence: must be in [0, 1], got {self.min_confidence}")

    def dependence(self, state: StepState) -> torch.Tensor:
        """(B, N, N) N * (A + A^T) / 2, A the head- (and layer-) averaged attention of the
        state's pass, summed in float32 (float64 for float64 weights)."""
        att = self._layers(state)
        total = None  # (B, N, N) sum over layers and heads, one term at a time
        for w in att:
            part = w[:, 0].to(torch.promote_types(w.dtype, torch.float32), copy=True)
            for h in range(1, w.shape[1]):
                part += w[:, h]
            total = part if total is None else total.add_(part)
        return (total + total.transpose(1, 2)).mul_(self._scale(att))

    def _layers(self, state: StepState) -> tuple[torch.Tensor, ...]:
        """The attention layers (B, H, N, N) the dependence averages."""
        att = state.output.attentions
        if att is None:
            raise UnmaskError("dapd: the model returns no attention weights; DAPD needs one "
                              "that does (supports_attentions, e.g. an MDMTransformer)")
        if self.layer is not None:
            if not -len(att) <= self.layer < len(att):
                raise UnmaskError(f"layer: {self.layer} is outside the model's {len(att)} "
                                  "attention layers")
            att = (att[self.layer],)
        return tuple(att)

    @staticmethod
    def _scale(att: tuple[torch.Tensor, ...]) -> float:
        """N / (2 x the number of attention maps averaged): turns the head and layer sum of
        A + A^T into N * (A + A^T) / 2 of the mean."""
        return att[0].shape[-1] / (2 * len(att) * att[0].shape[1])

    def prepare(self, model) -> None:
        if not model.supports_attentions:
            raise UnmaskError(f"dapd: {type(model).__name__} returns no attention weights; DAPD "
                              "needs a model that does (supports_attentions, e.g. an "
                              "MDMTransformer)")

    def select(self, state: StepState) -> Selection:
        candidates = state.eligible & (state.x0_prob >= self.min_confidence)
        att = self._layers(state)
        if runs_on_host(state.eligible.device) and att[0].dtype in HOST_DTYPES:
            # the scan on the host: each taken position's edges from the attention alone
            from unmask.samplers.scan_kernels import run_attention

            return Selection(run_attention(state.x0_prob, state.eligible,
                                           candidates, att, self._scale(att), self.tau))
        adjacency = self.dependence(state) > self.tau  # the diagonal is never read
        return Selection(greedy_independent_set(adjacency, state.x0_prob, candidates,
                                                state.eligible))
