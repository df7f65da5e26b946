"""MI-guided parallel decoding: reveal many positions per pass only where they are
(conditionally) independent of each other.

One step (arXiv 2605.20187): visit eligible positions in scan order (ascending entropy, or
descending confidence); take position i while its cost
    H_i + lam * sum_{j already taken} I[i, j]
fits the remaining budget (which starts at gamma); otherwise i waits for a later pass.
Independent, confident positions go in parallel; dependent ones are split across passes.
The MI matrix I comes from the neural estimator on the hidden states of the same forward pass
(no extra model call), for the pairs that can change the pass's set only
(:meth:`_BudgetedMISampler.candidates`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from unmask.errors import UnmaskError, require
from unmask.io import parse_json
from unmask.mi.estimator import MIEstimator, load_estimator, needs_hidden_layers
from unmask.mi.probe import perturbation_mi
from unmask.pretrained import PRETRAINED_DIR, pretrained_path
from unmask.samplers.base import (
    Sampler,
    Selection,
    StepState,
    budget_prefix,
    check_scan_order,
    register,
    scan_order_scores,
)

#: the shipped estimators, by the task of their model or the name of a converted model
#: (``mi-guided:estimator=antiberty``)
SHIPPED_ESTIMATORS = {"sudoku": "sudoku_mi_estimator", "protein": "protein_mi_estimator",
                      "antiberty": "antiberty_mi_estimator"}


def check_uncharged(free_head: bool, free_max: bool) -> None:
    """The rule leaves at most one position of a pass uncharged: the head or the maximum."""
    require(not (free_head and free_max),
            "free_head, free_max: choose one position to leave uncharged, not both")


def mi_budget_select(entropy: torch.Tensor, mi: torch.Tensor, eligible: torch.Tensor,
                     scores: torch.Tensor, gamma: float, lam: float,
                     stop_at_first_miss: bool = False, free_head: bool = False,
                     free_max: bool = False) -> torch.Tensor:
    """The MI-guided selection rule, vectorised over the batch.

    entropy: (B, N) nats; mi: (B, N, N) pairwise MI in nats (symmetric); eligible: (B, N) bool;
    scores: (B, N), visited in descending order; gamma: initial budget (nats); lam: weight of
    the MI with positions already taken. Returns reveal (B, N) bool: never empty where a row
    has an eligible position (the first in scan order is taken when nothing fits).
    With ``stop_at_first_miss`` the scan of a row ends at its first position that does not fit;
    otherwise later (cheaper) positions may still fit.
    With ``free_head`` the first eligible position in scan order (the pass's head, the one
    sequential decoding would reveal) is always taken and charged nothing; the budget gamma is
    all for the positions revealed beside it, which still pay their MI with the head.
    With ``free_max`` (EB-Sampler's bound with the MI term) the set taken is charged
        sum_taken H - max_taken H + lam * sum_{taken pairs} I
    so the most uncertain position of the pass goes uncharged for its entropy (not for its
    MI); at ``lam=0`` with ``stop_at_first_miss`` this is EB-Sampler's prefix exactly. At most
    one position with H > gamma can be taken (two would leave the smaller one charged).
    """
    check_uncharged(free_head, free_max)
    b, n = entropy.shape
    ent = entropy.double()
    mi = mi.double()
    order = torch.argsort(scores.double().masked_fill(~eligible, -torch.inf), dim=1,
                          descending=True, stable=True)
    rows = torch.arange(b, device=entropy.device)
    taken = torch.zeros(b, n, dtype=torch.float64, device=entropy.device)
    # per row: the own costs and MI charges of the positions taken, and (free_max) the
    # largest own cost among them, which the set's charge leaves out
    spent, top = (torch.zeros(b, dtype=torch.float64, device=entropy.device) for _ in range(2))
    open_ = torch.ones(b, dtype=torch.bool, device=entropy.device)
    n_scan = int(eligible.sum(1).max()) if b else 0
    for t in range(n_scan):  # positions in scan order; each iteration is vectorised over rows
        i = order[:, t]
        valid = eligible[rows, i] & open_
        own = ent[rows, i]
        if free_head and t == 0:  # the head is charged nothing (and has nothing to pay MI to)
            own = torch.zeros_like(own)
        charge = own + lam * (mi[rows, i] * taken).sum(1)
        top_new = torch.maximum(top, own) if free_max else top
        take = valid & (spent + charge - top_new <= gamma + 1e-12)
        spent = torch.where(take, spent + charge, spent)
        top = torch.where(take, top_new, top)
        taken[rows, i] = torch.where(take, 1.0, taken[rows, i])
        if stop_at_first_miss:
            open_ = open_ & ~(valid & ~take)
    reveal = taken.bool()
    empty = ~reveal.any(1) & eligible.any(1)
    reveal[rows[empty], order[empty, 0]] = True
    return reveal


def cap_by_entropy(mi: torch.Tensor, entropy: torch.Tensor) -> torch.Tensor:
    """(B, N, N) ``mi`` with pair (i, j) at most min(H_i, H_j) (entropy: (B, N) nats), the
    bound every joint distribution obeys: I(X_i; X_j) <= min(H(X_i), H(X_j))."""
    ent = entropy.to(mi.dtype).clamp(min=0)
    return torch.minimum(mi, torch.minimum(ent[:, :, None], ent[:, None, :]))


@dataclass
class _BudgetedMISampler(Sampler):
    """Shared fields and rule of the MI-guided samplers; subclasses supply the MI matrix."""

    gamma: float = 0.3
    lam: float = 1.0
    order: str = "entropy"
    stop_at_first_miss: bool = False
    free_head: bool = False
    free_max: bool = False
    #: cap each pair's MI at the smaller of its two marginal entropies before charging it:
    #: I(X_i; X_j) <= min(H(X_i), H(X_j)) for any joint, so a pair with a near-certain position
    #: is charged near nothing, whatever the estimator says
    mi_cap: bool = False

    def __post_init__(self):
        require(self.gamma >= 0, f"gamma: must be >= 0, got {self.gamma}")
        require(self.lam >= 0, f"lam: must be >= 0, got {self.lam}")
        check_uncharged(self.free_head, self.free_max)
        check_scan_order(self.order)

    def mutual_information(self, state: StepState, rows: torch.Tensor | None = None
                           ) -> torch.Tensor:  # pragma: no cover
        """(B, N, N) pairwise MI in nats; with ``rows`` (B, N) bool, only the pairs with an end
        in ``rows`` need be right (the others may be 0)."""
        raise NotImplementedError

    def position_cost(self, state: StepState) -> torch.Tensor:
        """(B, N) each position's own cost against the budget, before the MI with positions
        already taken: its entropy in nats."""
        return state.entropy

    def select(self, state: StepState) -> Selection:
        own, scores = self.position_cost(state), scan_order_scores(state, self.order)
        mi = self.mutual_information(state, self.candidates(own, scores, state.eligible))
        if self.mi_cap:
            mi = cap_by_entropy(mi, state.entropy)
        reveal = mi_budget_select(own, mi, state.eligible, scores, self.gamma, self.lam,
                                  self.stop_at_first_miss, self.free_head, self.free_max)
        return Selection(reveal)

    def candidates(self, own: torch.Tensor, scores: torch.Tensor, eligible: torch.Tensor
                   ) -> torch.Tensor:
        """(B, N) bool: the positions whose MI can change this pass's set, given own costs
        (B, N), scan scores (B, N) and the eligible positions (B, N). Every pair the rule can
        take together has an end among them, so MI elsewhere may be left 0.

        A position is charged at least its own cost (MI >= 0), so only those with own cost
        <= gamma can join another: the uncharged head of ``free_head`` goes with riders that
        fit, and with ``free_max`` one position above gamma may be taken, but never two (the
        smaller would be charged). With ``stop_at_first_miss`` the scan also ends where the
        prefix's own costs alone overrun the budget, so only that prefix counts.
        """
        ok = eligible & (own <= self.gamma + 1e-12)
        if not self.stop_at_first_miss:
            return ok
        return ok & budget_prefix(own, scores, eligible, self.gamma,
                                  uncharged_max=self.free_max, free_first=self.free_head)


def shipped_estimator_for(model) -> Path:
    """The folder of the shipped estimator trained on ``model`` (any shipped estimator whose
    recorded weight fingerprint is the model's, e.g. AntiBERTy's or the shipped text
    model's); :class:`UnmaskError` when none was."""
    fingerprint = None
    for config in sorted(PRETRAINED_DIR.glob("*/config.json")):
        record = parse_json(config.read_text())
        if record.get("model_type") != "mi-estimator":
            continue
        want = record.get("config", {}).get("model_fingerprint")
        fingerprint = fingerprint or model.fingerprint()
        if want and want == fingerprint:
            return config.parent
    raise UnmaskError("estimator: no shipped MI estimator for this model; pass "
                      "estimator=FOLDER (unmask mi fit writes one)")


@register("mi-guided")
@dataclass
class MIGuidedSampler(_BudgetedMISampler):
    """MI-guided decoding with the neural estimator (one MDM pass per step).

    estimator: an :class:`~unmask.mi.estimator.MIEstimator`, a folder holding one, a shipped
    one's name (``antiberty`` or ``antiberty_mi_estimator``, :data:`SHIPPED_ESTIMATORS`), or
    None for the estimator shipped with the model's task (``model.config.task``, e.g. Sudoku)
    or trained on this very model (its weights' fingerprint, e.g. AntiBERTy).
    """

    estimator: object = field(default=None, repr=False)

    def prepare(self, model) -> None:
        """Load the estimator for ``model`` (once per decode; a loaded one is checked against
        the model), so that ``needs_hidden_layers`` is known before the first pass."""
        est = self.estimator
        if est is None:
            task = getattr(getattr(model, "config", None), "task", "")
            est = (pretrained_path(SHIPPED_ESTIMATORS[task]) if task in SHIPPED_ESTIMATORS
                   else shipped_estimator_for(model))
        if isinstance(est, str) and est in SHIPPED_ESTIMATORS and not Path(est).is_dir():
            est = SHIPPED_ESTIMATORS[est]
        if not isinstance(est, MIEstimator):
            est = load_estimator(est)  # a folder, else a shipped name
        est.check_model(model)
        self.estimator = est.to(model.device)

    @property
    def needs_hidden_layers(self) -> bool:
        return isinstance(self.estimator, MIEstimator) and needs_hidden_layers(self.estimator)

    def mutual_information(self, state: StepState, rows: torch.Tensor | None = None
                           ) -> torch.Tensor:
        est = self.estimator
        with torch.inference_mode():
            return est(est.features(state.output, state.model.model), state.masked, rows=rows)


@register("mi-oracle")
@dataclass
class MIOracleSampler(_BudgetedMISampler):
    """The same rule with ground-truth MI by perturbation probing (slow; for analysis of how
    much the estimator loses). Every probe is charged to the row's NFE and sequences.

    Only the :meth:`~_BudgetedMISampler.candidates` are probed (a pair probed in one direction
    takes that direction's value): the same decisions as probing all, at a fraction of the
    cost.
    eps: probe pruning threshold passed to :func:`~unmask.mi.probe.perturbation_mi`.
    """

    eps: float = 1e-3
    batch_size: int = 4096

    def __post_init__(self):
        super().__post_init__()
        require(0.0 <= self.eps < 1.0, f"eps: must be in [0, 1), got {self.eps}")

    def mutual_information(self, state: StepState, rows: torch.Tensor | None = None
                           ) -> torch.Tensor:
        candidates = state.eligible if rows is None else rows & state.eligible
        b, n = state.tokens.shape
        mi = torch.zeros(b, n, n, dtype=torch.float64, device=state.tokens.device)
        # probe only rows with a candidate, so a row's cost never depends on its batch-mates
        probe = candidates.any(1).nonzero().squeeze(1)
        if probe.numel():
            res = perturbation_mi(state.model, state.tokens[probe], eps=self.eps,
                                  batch_size=self.batch_size, positions=candidates[probe],
                                  row_ids=state.row_ids[probe])
            mi[probe] = res.mi.to(mi.dtype)
        return mi
