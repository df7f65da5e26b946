"""MI-guided parallel decoding: reveal many positions per pass only where they are
(conditionally) independent of each other.

One step (arXiv 2605.20187): visit eligible positions in scan order (ascending entropy, or
descending confidence); take position i while its cost
    H_i + lam * sum_{j already taken} I[i, j]
fits the remaining budget (which starts at gamma); otherwise i waits for a later pass.
Independent, confident positions go in parallel; dependent ones are split across passes.
The MI matrix I comes from the neural estimator on the hidden states of the same forward pass
(no extra model call); on large inputs only the pairs that can change the pass's set are
computed (:meth:`_BudgetedMISampler.candidates`). On an accelerator neither the estimator on
small inputs nor the rule reads anything back from the device, so a pass costs an EB pass plus
the estimator; on the CPU the rule reads back, as it scans, whether to go on.
Parameters left unset take the estimator's recommended setting (``recommended.json`` beside
its weights), else :data:`RULE_DEFAULTS`.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import torch

from unmask.errors import UnmaskError, require
from unmask.frozen_head import resolve_head_dir
from unmask.host_reads import runs_on_host
from unmask.io import parse_json
from unmask.mi.estimator import WEIGHTS_FILE, MIEstimator, load_estimator, needs_hidden_layers
from unmask.mi.probe import perturbation_mi
from unmask.models.handle import inference_mode
from unmask.pretrained import PRETRAINED_DIR, SHIPPED_HEADS, pretrained_path
from unmask.samplers.base import Sampler, Selection, StepState, budget_prefix, orderable, register
from unmask.samplers.scan import check_scan_order, scan_order_scores, scan_rows

#: the shipped estimators, by the task of their model or the name of a shipped or converted
#: model (``mi-guided:estimator=antiberty``, ``estimator=text``)
SHIPPED_ESTIMATORS = SHIPPED_HEADS[MIEstimator.KIND]


def check_uncharged(free_head: bool, free_max: bool) -> None:
    """The rule leaves at most one position of a pass uncharged: the head or the maximum."""
    require(not (free_head and free_max),
            "free_head, free_max: choose one position to leave uncharged, not both")


def mi_budget_select(entropy: torch.Tensor, mi: torch.Tensor, eligible: torch.Tensor,
                     scores: torch.Tensor, gamma: float, lam: float,
                     stop_at_first_miss: bool = False, free_head: bool = False,
                     free_max: bool = False) -> torch.Tensor:
    """The MI-guided selection rule, vectorised over the batch. On an accelerator it reads
    nothing back to the host; on the CPU the scan below runs on the host as a compiled loop
    (:func:`~unmask.samplers.scan_kernels.budget_scan`).

    entropy: (B, N) nats, >= 0; mi: (B, N, N) pairwise MI in nats, >= 0 (symmetric);
    eligible: (B, N) bool; scores: (B, N), visited in descending order (ties: lower index
    first); gamma: initial budget (nats); lam: weight of the MI with positions already taken.
    Returns reveal (B, N) bool: never empty where a row has an eligible position (the first
    in scan order is taken when nothing fits).

    The scan visits a row's eligible positions in order and takes position i while its cost
        H_i + lam * sum_{j already taken} I[i, j]
    fits what is left of the budget. Without ``stop_at_first_miss`` a position that does not
    fit is passed over and later (cheaper) positions may still fit; with it the scan of a row
    ends at its first position that does not fit, so the set is the longest prefix of the scan
    whose charge fits, computed in closed form (cumulative sums; no loop).
    With ``free_head`` the first position in scan order (the pass's head, the one sequential
    decoding would reveal) is charged nothing; the budget gamma is all for the positions
    revealed beside it, which still pay their MI with the head.
    With ``free_max`` (EB-Sampler's bound with the MI term) the set taken is charged
        sum_taken H - max_taken H + lam * sum_{taken pairs} I
    so the most uncertain position of the pass goes uncharged for its entropy (not for its
    MI); at ``lam=0`` with ``stop_at_first_miss`` this is EB-Sampler's prefix exactly. At most
    one position with H > gamma can be taken (two would leave the smaller one charged).
    """
    check_uncharged(free_head, free_max)
    if not stop_at_first_miss and runs_on_host(eligible.device):
        from unmask.samplers.scan_kernels import run_budget

        return run_budget(entropy, mi, scores, eligible, gamma + 1e-12, lam, free_head,
                          free_max)
    order = torch.argsort(orderable(scores).masked_fill(~eligible, -torch.inf), dim=1,
                          descending=True, stable=True)
    valid = eligible.gather(1, order)  # (B, N) in scan order
    own = torch.where(valid, entropy.double().gather(1, order), 0.0)
    if free_head:  # the head is charged nothing (and has nothing to pay MI to)
        own[:, 0] = 0.0
    limit = gamma + 1e-12
    if stop_at_first_miss:
        take = _budget_prefix_taken(own, _paid_to_earlier(mi, order, eligible, lam), valid,
                                    limit, free_max)
    else:
        take = _budget_scan_taken(own, mi, order, valid, limit, lam, free_max)
    reveal = torch.zeros_like(eligible).scatter_(1, order, take)
    # progress: a row that takes nothing reveals the first position of its scan
    empty = ~reveal.any(1) & eligible.any(1)
    head = torch.zeros_like(eligible).scatter_(1, order[:, :1], empty[:, None])
    return reveal | head


def _paid_to_earlier(mi: torch.Tensor, order: torch.Tensor, eligible: torch.Tensor,
                     lam: float) -> torch.Tensor:
    """(B, N) in scan ``order``: lam * the MI (B, N, N) each position has with the eligible
    positions scanned before it, summed in float64."""
    b, n = order.shape
    rank = torch.empty_like(order).scatter_(1, order, torch.arange(n, device=order.device)
                                            .expand(b, n))
    before = (rank[:, None, :] < rank[:, :, None]) & eligible[:, None, :]
    paid = torch.where(before, mi, 0).sum(-1, dtype=torch.float64) * lam
    return paid.gather(1, order)


def _budget_prefix_taken(own: torch.Tensor, paid: torch.Tensor, valid: torch.Tensor,
                         limit: float, free_max: bool) -> torch.Tensor:
    """(B, N) bool in scan order: the rule stopping at its first miss. Every valid position
    before the first miss is taken, so position t is charged with the whole prefix up to t
    taken: C_t = sum of own costs + sum of the MI charges ``paid`` (B, N) (- the largest own
    cost with ``free_max``); the set is the valid positions before the first valid t with
    C_t > limit."""
    charged = torch.where(valid, own + paid, 0.0).cumsum(1)
    if free_max:
        charged = charged - own.cummax(1).values
    miss = valid & ~(charged <= limit)
    return valid & (miss.cumsum(1) == 0)


def _budget_scan_taken(own: torch.Tensor, mi: torch.Tensor, order: torch.Tensor,
                       valid: torch.Tensor, limit: float, lam: float, free_max: bool
                       ) -> torch.Tensor:
    """(B, N) bool in scan order: the rule passing over positions that do not fit, from own
    costs ``own`` (B, N) and ``valid`` (B, N), both in scan ``order`` (B, N), and the MI
    ``mi`` (B, N, N). The scan is sequential in t (what is taken changes every later charge):
    one step per position, each a few tensor operations over the batch, none read back
    (where a scan reads back, the CPU, :func:`mi_budget_select` runs a compiled loop on the
    host instead: :func:`~unmask.samplers.scan_kernels.budget_scan`).
    ``cost`` (B, N), in scan order, holds every position's own cost plus lam * its MI with the
    positions taken so far (an invalid position fits no finite budget), ``spent`` (B, 1) the
    charges of the positions taken; the MI each step pays is gathered once, before the scan."""
    b, n = own.shape
    steps = n
    cost = torch.where(valid, own, torch.inf)
    # (T, B, N): [t, b, s] = mi[b, s-th, t-th], what the s-th pays once the t-th is taken
    pays = scan_rows(mi.transpose(1, 2), order, steps)
    spent, top = own.new_zeros(b, 1), own.new_zeros(b, 1)
    taken = valid.new_zeros(n, b, 1)
    cost_at, owns = cost[:, :steps].split(1, 1), own[:, :steps].split(1, 1)
    takes = taken[:steps].unbind(0)
    for t in range(steps):
        charged = spent + cost_at[t]
        if free_max:
            top_new = torch.maximum(top, owns[t])
            torch.le(charged - top_new, limit, out=takes[t])
            top = torch.where(takes[t], top_new, top)
        else:
            torch.le(charged, limit, out=takes[t])
        spent = torch.where(takes[t], charged, spent)
        cost.addcmul_(takes[t], pays[t], value=lam)
    return taken.squeeze(-1).T & valid


def cap_by_entropy(mi: torch.Tensor, entropy: torch.Tensor) -> torch.Tensor:
    """(B, N, N) ``mi`` with pair (i, j) at most min(H_i, H_j) (entropy: (B, N) nats), the
    bound every joint distribution obeys: I(X_i; X_j) <= min(H(X_i), H(X_j))."""
    ent = entropy.to(mi.dtype).clamp(min=0)
    return torch.minimum(mi, torch.minimum(ent[:, :, None], ent[:, None, :]))


#: the rule's settings where neither the sampler's parameters nor the estimator's recommended
#: setting (:data:`RECOMMENDED_FILE`) give them
RULE_DEFAULTS = {"gamma": 0.3, "lam": 1.0, "order": "entropy", "stop_at_first_miss": False,
                 "free_head": False, "free_max": False, "mi_cap": False}
#: a shipped or fitted estimator's recommended rule settings, in its folder:
#: ``{"params": {...}, "chosen_on": "..."}``
RECOMMENDED_FILE = "recommended.json"


@dataclass
class _BudgetedMISampler(Sampler):
    """Shared fields and rule of the MI-guided samplers; subclasses supply the MI matrix.

    When the caller sets none of the rule's fields (plain ``mi-guided``), they take the
    estimator's recommended setting where it has one (:meth:`apply_recommended`, at
    :meth:`prepare`); fields left unset otherwise take :data:`RULE_DEFAULTS`, so a spec that
    names some parameters means the same rule with or without a recommendation.
    """

    gamma: float | None = None
    lam: float | None = None
    order: str | None = None
    stop_at_first_miss: bool | None = None
    free_head: bool | None = None
    free_max: bool | None = None
    #: cap each pair's MI at the smaller of its two marginal entropies before charging it:
    #: I(X_i; X_j) <= min(H(X_i), H(X_j)) for any joint, so a pair with a near-certain position
    #: is charged near nothing, whatever the estimator says
    mi_cap: bool | None = None

    def __post_init__(self):
        self._unset = frozenset(k for k in RULE_DEFAULTS if getattr(self, k) is None)
        self.apply_recommended({})

    def apply_recommended(self, params: dict) -> None:
        """Give the fields their values in ``params`` (a recommended setting) if the caller
        set none of them, else (and for those ``params`` leaves out) :data:`RULE_DEFAULTS`
        to each field left unset; then check the rule's settings."""
        unknown = sorted(set(params) - set(RULE_DEFAULTS))
        require(not unknown, f"recommended setting: unknown parameter {unknown[:1]}; accepted: "
                             f"{', '.join(RULE_DEFAULTS)}")
        plain = len(self._unset) == len(RULE_DEFAULTS)
        #: the recommended setting these fields took ({}: none), reported by :meth:`stats`
        self.recommended = dict(params) if plain else {}
        for key in self._unset:
            setattr(self, key, params.get(key, RULE_DEFAULTS[key]) if plain
                    else RULE_DEFAULTS[key])
        require(self.gamma >= 0, f"gamma: must be >= 0, got {self.gamma}")
        require(self.lam >= 0, f"lam: must be >= 0, got {self.lam}")
        require(math.isfinite(self.gamma) and math.isfinite(self.lam),
                f"gamma, lam: must be finite (an infinite budget takes every position in one "
                f"pass), got {self.gamma}, {self.lam}")
        check_uncharged(self.free_head, self.free_max)
        check_scan_order(self.order)

    def begin(self, batch_size: int, seq_len: int) -> None:
        self._rows = batch_size

    def stats(self) -> dict[str, torch.Tensor]:
        """``stats["recommended"]`` (B,) ones when the rule took its estimator's recommended
        setting (plain ``mi-guided``): what decoded says so beside its result."""
        if not self.recommended:
            return {}
        return {"recommended": torch.ones(getattr(self, "_rows", 0), dtype=torch.long)}

    def wants_rows(self, state: StepState) -> bool:
        """Whether :meth:`mutual_information` is given the candidates (``rows``) this pass;
        without them it computes every pair."""
        return True

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
        rows = self.candidates(own, scores, state.eligible) if self.wants_rows(state) else None
        mi = self.mutual_information(state, rows)
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
        fingerprint = fingerprint or _model_fingerprint(model)
        if want and want == fingerprint:
            return config.parent
    raise NoEstimator("estimator: no shipped MI estimator for this model; pass "
                      "estimator=FOLDER (unmask mi fit writes one)")


class NoEstimator(UnmaskError):
    """No MI estimator was given and none is shipped for the model."""


_FINGERPRINTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOADED: dict[tuple, MIEstimator] = {}


def _model_fingerprint(model) -> str:
    """``model.fingerprint()``, hashed once per model object and version of its weights (it
    hashes every weight: milliseconds a decode need not pay again)."""
    key = sum(p._version for p in model.parameters())
    cached = _FINGERPRINTS.get(model)
    if cached is None or cached[0] != key:
        cached = _FINGERPRINTS[model] = (key, model.fingerprint())
    return cached[1]


def _load_estimator_once(name_or_path) -> tuple[MIEstimator, dict]:
    """The estimator in a folder or of a shipped name, and its recommended setting (the
    ``params`` of :data:`RECOMMENDED_FILE` there, {} without one): read once per process and
    version of its files, so that a decode does not pay for reading it again."""
    folder = resolve_head_dir(name_or_path, MIEstimator.KIND).resolve()
    files = [folder / WEIGHTS_FILE, folder / "config.json", folder / RECOMMENDED_FILE]
    key = (str(folder), *(f.stat().st_mtime_ns if f.is_file() else None for f in files))
    if key not in _LOADED:
        _LOADED[key] = load_estimator(folder)
    return _LOADED[key], read_recommended(folder)


def read_recommended(folder: str | Path) -> dict:
    """The recommended rule settings stored beside an estimator (``params`` of
    :data:`RECOMMENDED_FILE` in ``folder``); {} when there are none."""
    path = Path(folder) / RECOMMENDED_FILE
    if not path.is_file():
        return {}
    try:
        params = parse_json(path.read_text())["params"]
    except (ValueError, KeyError, TypeError) as e:
        raise UnmaskError(f"estimator: {path} is not a recommended setting "
                          f"({{\"params\": {{...}}}}): {e}") from None
    require(isinstance(params, dict), f"estimator: {path}: params must be an object")
    try:
        check_recommended(params)
    except UnmaskError as e:
        raise UnmaskError(f"estimator: {path}: {e}") from None
    return params


def check_recommended(params: dict) -> None:
    """Check a recommended setting as a spec's parameters are checked (the same typing and
    ranges: ``"gamma": "1"`` or ``"stop_at_first_miss": "false"`` is refused, not read as
    something else); a null is refused, not read as the default."""
    unknown = sorted(set(params) - set(RULE_DEFAULTS))
    require(not unknown, f"recommended setting: unknown parameter {unknown[:1]}; accepted: "
                         f"{', '.join(RULE_DEFAULTS)}")
    nulls = [k for k, v in params.items() if v is None]
    require(not nulls, f"{nulls[:1]}: null is not a setting (leave the key out for the "
                       "default)")
    MIGuidedSampler(**params)  # typed and range-checked as a spec's mi-guided parameters


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
        """Load the estimator for ``model`` (read once per process; a loaded one is checked
        against the model), so that ``needs_hidden_layers`` is known before the first pass,
        and give the fields left unset the estimator's recommended setting."""
        est = self.estimator
        if est is None:
            task = getattr(getattr(model, "config", None), "task", "")
            est = (pretrained_path(SHIPPED_ESTIMATORS[task]) if task in SHIPPED_ESTIMATORS
                   else shipped_estimator_for(model))
        if isinstance(est, str) and est in SHIPPED_ESTIMATORS and not Path(est).is_dir():
            est = SHIPPED_ESTIMATORS[est]
        if not isinstance(est, MIEstimator):
            est, self._recommended = _load_estimator_once(est)  # a folder or shipped name
        est.check_model(model)
        self.estimator = est.to(model.device)
        self.apply_recommended(getattr(self, "_recommended", {}))

    def wants_rows(self, state: StepState) -> bool:
        est = self.estimator
        return not (isinstance(est, MIEstimator)
                    and est.all_pairs_cheaper(*state.tokens.shape))

    @property
    def needs_hidden_layers(self) -> bool:
        return isinstance(self.estimator, MIEstimator) and needs_hidden_layers(self.estimator)

    def mutual_information(self, state: StepState, rows: torch.Tensor | None = None
                           ) -> torch.Tensor:
        est = self.estimator
        with inference_mode():
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
