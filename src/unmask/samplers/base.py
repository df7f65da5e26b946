"""The sampler contract: a sampler looks at one step's state and chooses what to reveal.

The decode loop (:func:`unmask.decode.decode`) owns the tokens, the model calls, counting and
stopping. A sampler is a small validated object with one method, ``select(state)``, that
returns which eligible positions to reveal (and, optionally, which tokens to write there).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import typing
from dataclasses import dataclass
from typing import ClassVar

import torch

from unmask.errors import UnmaskError, require
from unmask.models.base import MaskedModel, ModelOutput
from unmask.models.handle import ModelHandle
from unmask.rng import row_gumbel, row_uniform
from unmask.validation import describe, is_int, is_scalar_hint, matches, plain


def widen_columns(values: torch.Tensor, columns: slice, n: int,
                  fill: float | torch.Tensor = 0.0) -> torch.Tensor:
    """(B, N) from per-position ``values`` (B, W) of the positions ``columns`` of rows of
    length ``n``; elsewhere ``fill`` (a number, or a (B, N) tensor to take from)."""
    if values.shape[1] == n:
        return values
    if isinstance(fill, torch.Tensor):
        out = fill.clone()
    elif values.dim() == 2:  # one operation
        lo = columns.start or 0
        return torch.constant_pad_nd(values, (lo, n - lo - values.shape[1]), fill)
    else:
        out = values.new_full((values.shape[0], n, *values.shape[2:]), fill)
    out[:, columns] = values
    return out


def rows_of(t: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``t[rows]``, ``rows`` (R,) increasing indices into ``t``'s rows (the decode loop's
    rows, which only ever leave): when there are as many as ``t`` has rows, ``t`` itself
    (no copy; write back with :func:`put_rows`)."""
    return t if rows.shape[0] == t.shape[0] else t[rows]


def put_rows(t: torch.Tensor, rows: torch.Tensor, value: torch.Tensor) -> None:
    """``t[rows] = value`` in place (``rows`` as :func:`rows_of`'s)."""
    if rows.shape[0] == t.shape[0]:
        t.copy_(value)
    else:
        t[rows] = value


def add_rows(t: torch.Tensor, rows: torch.Tensor, value) -> None:
    """``t[rows] += value`` in place (``rows`` as :func:`rows_of`'s)."""
    if rows.shape[0] == t.shape[0]:
        t += value
    else:
        t[rows] += value


@dataclass
class StepState:
    """Everything a sampler may read at one step, for the B rows still decoding.

    tokens: (B, N) current tokens (MASK where still hidden).
    masked: (B, N) bool, positions still MASK anywhere in the sequence.
    eligible: (B, N) bool, masked positions of the current block: the only ones to reveal.
    output: the model's :class:`ModelOutput` on ``tokens`` (logits (B, W, V), hidden (B, W, D))
        at the positions ``columns``.
    log_probs: (B, W, V) log-softmax over real tokens only (-inf on MASK and special ids), at
        the positions ``columns``.
    probs: (B, W, V) ``log_probs.exp()``.
    entropy: (B, N) H_i in nats over real tokens (0 where not masked, and outside
        ``columns``).
    x0: (B, N) proposed token per position (argmax, or a Gumbel draw at the temperature;
        outside ``columns``, the current token).
    x0_prob: (B, N) the "confidence" of the proposal: p_i(x0_i), or max_v p_i(v) with
        ``DecodeConfig(confidence="max")`` (equal at temperature 0; 0 outside ``columns``).
    step: (B,) step index within the current block (0 on entering a block).
    global_step: (B,) step index since the start of decoding.
    block_masked: (B,) how many positions of the current block were masked on entering it.
    row_ids: (B,) each row's index in the batch given to ``decode`` (for per-row state).
    seeds: (B,) each row's random seed.
    temperature: token temperature (0 = argmax).
    model: handle that runs the model and counts calls and sequences (lookahead samplers).
    mask_id: the model's MASK id.
    real_mask: (V,) bool, the ids a sampler may emit (``MaskedModel.real_token_mask``, built
        once per decode on the loop's device; shared by every row).
    columns: the positions lo:hi (W = hi - lo) the pass's distributions cover: every
        position (W = N) unless the sampler ``reads_eligible_only``; then whole blocks from
        the first to the last block any row is decoding (every eligible position is inside).
    """

    tokens: torch.Tensor
    masked: torch.Tensor
    eligible: torch.Tensor
    output: ModelOutput
    log_probs: torch.Tensor
    probs: torch.Tensor
    entropy: torch.Tensor
    x0: torch.Tensor
    x0_prob: torch.Tensor
    step: torch.Tensor
    global_step: torch.Tensor
    block_masked: torch.Tensor
    row_ids: torch.Tensor
    seeds: torch.Tensor
    temperature: float
    model: ModelHandle
    mask_id: int
    real_mask: torch.Tensor
    columns: slice = dataclasses.field(default_factory=lambda: slice(0, None))

    def widen(self, values: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
        """(B, N) per-position ``values`` (B, W) of the positions ``columns``, ``fill``
        elsewhere."""
        return widen_columns(values, self.columns, self.tokens.shape[1], fill)

    def rows(self, index: torch.Tensor) -> StepState:
        """The state of the rows ``index`` (a (R,) long index) only."""
        picked = {f.name: getattr(self, f.name)[index] for f in dataclasses.fields(self)
                  if isinstance(getattr(self, f.name), torch.Tensor) and f.name != "real_mask"}
        return dataclasses.replace(self, output=self.output.rows(index), **picked)

    @functools.cached_property
    def top2(self) -> torch.Tensor:
        """(B, W, 2) the two largest of ``probs`` at each position of ``columns``, the largest
        first (``probs.topk(2).values``), computed on first use and kept with the state: the
        largest is the proposal's (at temperature 0) or the argmax's, the second the largest
        of the others (a gather and a max, no sort)."""
        top = (self.x0[:, self.columns] if self.temperature == 0
               else self.probs.argmax(-1))[..., None]  # (B, W, 1)
        first = self.probs.gather(-1, top)
        second = self.probs.scatter(-1, top, 0.0).amax(-1, keepdim=True)
        return torch.cat([first, second], -1)

    def uniform(self, stream: int, shape: tuple[int, ...]) -> torch.Tensor:
        """Per-row uniform noise (B, *shape) in float64, reproducible per row and step."""
        return row_uniform(self.seeds, self.global_step, stream, shape)

    def gumbel(self, stream: int, shape: tuple[int, ...]) -> torch.Tensor:
        """Per-row standard Gumbel noise (B, *shape) in float64."""
        return row_gumbel(self.seeds, self.global_step, stream, shape)


@dataclass
class Selection:
    """A sampler's decision for one step.

    reveal: (B, N) bool, a non-empty subset of ``state.eligible`` in every row.
    tokens: (B, N) tokens to write where ``reveal``; None means ``state.x0``.
    next_output: the model output on the state after this step, when the sampler has already
        computed it (lookahead samplers, verified passes); the loop then skips its own forward
        pass.
    entropy: (B, N) nats each revealed position adds to the cumulative entropy; None means
        ``state.entropy``.
    stale: (B,) bool, with ``next_output`` only: its rows that do not hold (a wrapper changed
        their step); the loop runs the model on their next state itself, finding them with
        its stopping check's read. None: every row holds.
    """

    reveal: torch.Tensor
    tokens: torch.Tensor | None = None
    next_output: ModelOutput | None = None
    entropy: torch.Tensor | None = None
    stale: torch.Tensor | None = None


class Sampler:
    """Base class. Subclasses are dataclasses whose fields are the sampler's parameters,
    validated in ``__post_init__``, registered by name with :func:`register`."""

    name: ClassVar[str] = ""
    #: True for samplers that run the model on their next state themselves and hand it to the
    #: loop (``Selection.next_output``, lookahead samplers): their sets cannot be verified.
    evaluates_next_state: ClassVar[bool] = False
    #: True when ``select`` reads the model's hidden layers (``state.output.hidden_layers``);
    #: final after :meth:`prepare`.
    needs_hidden_layers: ClassVar[bool] = False
    #: True when ``select`` reads the model's attention weights (``state.output.attentions``);
    #: the loop then asks every model call for them.
    needs_attentions: ClassVar[bool] = False
    #: True when ``select`` reads the per-position values of ``state`` (entropy, x0, x0_prob,
    #: log_probs, probs, output) at eligible positions only and its choice does not depend on
    #: which positions ``state.columns`` spans: the loop then computes them over the current
    #: blocks only (``StepState.columns``), and the model's logits there only where it can.
    reads_eligible_only: ClassVar[bool] = False

    @property
    def label(self) -> str:
        """The sampler's name in messages."""
        return self.name or type(self).__name__

    def prepare(self, model: MaskedModel) -> None:
        """Called once per decode before the first pass: load resources for ``model`` and
        declare needs (``needs_hidden_layers``) here."""

    def begin(self, batch_size: int, seq_len: int) -> None:
        """Called once at the start of each decode, after :meth:`prepare` (reset per-decode
        state here)."""

    def select(self, state: StepState) -> Selection:  # pragma: no cover - abstract
        """The pass's :class:`Selection` for ``state``; runs in ``torch.inference_mode``
        (as the decode's passes do)."""
        raise NotImplementedError

    def stats(self) -> dict[str, torch.Tensor]:
        """Per-row (B,) statistics for ``DecodeResult.stats`` after a decode (none here)."""
        return {}

    def decode_hooks(self) -> tuple:
        """Decode hooks (:class:`unmask.hooks.Hook`) the loop runs with this sampler, after
        those it is given (none here; a spec's hook modifiers,
        :class:`~unmask.samplers.spec.WithHooks`)."""
        return ()


_REGISTRY: dict[str, type[Sampler]] = {}


def register(name: str):
    """Class decorator: register a sampler class under ``name``."""

    def wrap(cls: type[Sampler]) -> type[Sampler]:
        if name in _REGISTRY:
            raise RuntimeError(f"sampler {name!r} registered twice")
        cls.name = name
        if dataclasses.is_dataclass(cls) and not getattr(cls.__init__, "typed", False):
            cls.__init__ = _typed_init(cls.__init__)
        _REGISTRY[name] = cls
        return cls

    return wrap


def _typed_init(init):
    """``init`` (a dataclass ``__init__``) preceded by :func:`_check_param` on each argument
    given, so a sampler built directly is typed as :func:`make_sampler` types it."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def typed_init(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        hints = _field_hints(type(self))
        for key, value in list(bound.arguments.items())[1:]:
            bound.arguments[key] = _check_param(self.name, key, hints.get(key, object), value)
        init(*bound.args, **bound.kwargs)

    typed_init.typed = True
    return typed_init


@functools.cache
def _field_hints(cls) -> dict:
    try:
        return typing.get_type_hints(cls)
    except (NameError, TypeError):  # annotations this module cannot resolve: no type checks
        return {}


def available_samplers() -> list[str]:
    return sorted(_REGISTRY)


def sampler_class(name: str) -> type[Sampler]:
    if name not in _REGISTRY:
        raise UnmaskError(
            f"sampler: unknown name {name!r}; choose from {', '.join(available_samplers())}"
        )
    return _REGISTRY[name]


def make_sampler(name: str, **params) -> Sampler:
    """Build a registered sampler.

    Args:
        name: a registered name (:func:`available_samplers`).
        **params: the sampler's fields. Each is checked against the field's type first: a
            number where an int or float is expected (numpy integers count as ints, True and
            False do not), True or False where a bool is, a string where a str is.

    Returns:
        The sampler. Raises :class:`UnmaskError` naming an unknown parameter or a value of the
        wrong type.
    """
    require(isinstance(name, str), f"sampler: expected a name, got {type(name).__name__}")
    cls = sampler_class(name)
    fields = {f.name: f for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else {}
    unknown = sorted(set(params) - set(fields))
    if unknown:
        raise UnmaskError(
            f"sampler {name!r}: unknown parameter {unknown[0]!r}; "
            f"accepted: {', '.join(fields) or 'none'}"
        )
    return cls(**params)  # typed by the registered __init__ (_typed_init)


def _check_param(sampler: str, key: str, hint, value):
    """``value`` for the field ``key`` of type ``hint``, with numpy scalars made Python ones;
    UnmaskError when it is not of the type. Types other than int/float/bool/str (and their
    unions with None) are left to the sampler's own checks."""
    if not is_scalar_hint(hint):
        return value  # some option the sampler checks itself (a tensor, a path, an object)
    value = plain(value)
    if not matches(value, hint):
        raise UnmaskError(f"sampler {sampler!r}: {key}: expected {describe(hint)}, got {value!r}")
    if is_int(value) and abs(value) > MAX_PARAM_INT:
        raise UnmaskError(f"sampler {sampler!r}: {key}: out of range (an integer of at most "
                          f"2**31 in magnitude), got {str(value)[:30]}")
    return value


#: the largest integer a sampler parameter may hold, in magnitude (a count, a position)
MAX_PARAM_INT = 2**31


def parse_param_value(text: str):
    """Parse a CLI ``K=V`` value: int, float, bool, None or string."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


# ---------------------------------------------------------------- shared selection helpers

SCHEDULES = ("linear", "cosine")


@dataclass
class CountRule:
    """How many positions a top-k style sampler reveals per step.

    k: fixed count per step (k = 1 is sequential decoding), used when ``steps`` is None.
    steps: number of steps per block; the count then follows ``schedule`` over those steps
        (the last step reveals everything left).
    schedule: 'linear' or 'cosine' number-of-masks schedule.
    """

    k: int = 1
    steps: int | None = None
    schedule: str = "linear"

    def __post_init__(self):
        require(is_int(self.k) and self.k >= 1,
                f"k: must be an integer >= 1, got {self.k}")
        require(self.steps is None or (is_int(self.steps) and self.steps >= 1),
                f"steps: must be None or an integer >= 1, got {self.steps}")
        require(self.schedule in SCHEDULES,
                f"schedule: expected one of {SCHEDULES}, got {self.schedule!r}")

    def count(self, state: StepState) -> torch.Tensor:
        """(B,) number of positions to reveal this step, in [1, eligible count]."""
        n_eligible = state.eligible.sum(1)
        if self.steps is None:
            return n_eligible.clamp(max=self.k)  # k >= 1
        left = self.masks_left(state.tokens.shape[1], state.step.device)
        width = left.shape[1]
        remain = left[state.block_masked, state.step.clamp(max=width - 1)]
        if width < self.steps:  # past the table only where tokens went back to MASK
            direct = _masks_left(state.block_masked, state.step.clamp(max=self.steps - 1),
                                 self.steps, self.schedule)
            remain = torch.where(state.step >= width, direct, remain)
        return (n_eligible - remain).clamp(min=1).minimum(n_eligible)

    def masks_left(self, n: int, device: torch.device) -> torch.Tensor:
        """(n + 1, min(steps, n + 1)) long: the masks that may remain after step s (0-based)
        of a block that held m masks when entered, at [m, s] (made once a row length and
        device). A block's steps past n come only where tokens go back to MASK (a step
        reveals one at least): :meth:`count` computes those alone, so the table stays
        (n + 1)^2 however many steps are asked for."""
        kept = self.__dict__.get("_masks_left")
        key = (n, torch.device(device), self.steps, self.schedule)
        if kept is None or kept[0] != key:
            step = torch.arange(min(self.steps, n + 1), device=device)
            masks = torch.arange(n + 1, device=device)
            kept = (key, _masks_left(masks[:, None], step[None, :], self.steps, self.schedule))
            self.__dict__["_masks_left"] = kept
        return kept[1]


def _masks_left(masks: torch.Tensor, step: torch.Tensor, steps: int, schedule: str
                ) -> torch.Tensor:
    """The masks that may remain after ``step`` (0-based) of ``steps`` of a block that held
    ``masks`` when entered (broadcast; long), by the schedule's fraction of masks left."""
    frac = ((step + 1).double() / steps).clamp(max=1.0)
    left = 1.0 - frac if schedule == "linear" else torch.cos(math.pi / 2 * frac)
    # rounding down guarantees the last step (frac = 1) empties the block
    return torch.floor(masks.double() * left + 1e-9).long()


def orderable(scores: torch.Tensor) -> torch.Tensor:
    """``scores`` as a floating tensor that takes -inf, for ranking: floating scores as they
    are (their order, ties included, is the same in any wider dtype: no copy), others in
    float64."""
    return scores if scores.is_floating_point() else scores.double()


def top_k_mask(scores: torch.Tensor, eligible: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """(B, N) bool: the k[b] highest-scoring eligible positions of each row.

    Ties go to the lower position index (stable sort), so the choice is deterministic.
    """
    masked_scores = torch.where(eligible, orderable(scores), -math.inf)
    order = torch.argsort(masked_scores, dim=1, descending=True, stable=True)
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(order.shape[1], device=order.device).expand_as(order))
    return (ranks < k[:, None]) & eligible


def budget_prefix(cost: torch.Tensor, scores: torch.Tensor, eligible: torch.Tensor,
                  gamma: float, *, uncharged_max: bool = False, free_first: bool = False
                  ) -> torch.Tensor:
    """(B, N) bool: each row's longest prefix of eligible positions, visited in descending
    ``scores`` (B, N), whose costs (B, N) fit the budget: sum - (max, with ``uncharged_max``)
    <= gamma, the first position costing nothing with ``free_first``. The charge never
    decreases along the scan, so the prefix is a count (EB-Sampler's rule with
    ``uncharged_max``: its first position always fits)."""
    order = torch.argsort(orderable(scores).masked_fill(~eligible, -torch.inf), dim=1,
                          descending=True, stable=True)
    c = torch.where(eligible, cost.double(), 0.0).gather(1, order)
    if free_first:
        c[:, 0] = 0.0
    charged = c.cumsum(1) - (c.cummax(1).values if uncharged_max else 0.0)
    prefix = torch.zeros_like(eligible)
    prefix.scatter_(1, order, charged <= gamma + 1e-12)
    return prefix & eligible


def at_least_one(reveal: torch.Tensor, scores: torch.Tensor, eligible: torch.Tensor
                 ) -> torch.Tensor:
    """Add the best-scoring eligible position to rows that reveal nothing (always progress;
    ties to the lower position, as :func:`top_k_mask`). No host read."""
    return torch.where(reveal.any(1, keepdim=True), reveal, best_position(scores, eligible))


def best_position(scores: torch.Tensor, eligible: torch.Tensor) -> torch.Tensor:
    """(B, N) bool: each row's highest-scoring eligible position (the first of equal ones;
    none in a row with no eligible position) = ``top_k_mask`` with k = 1, without sorting."""
    masked_scores = torch.where(eligible, orderable(scores), -math.inf)
    first = masked_scores.argmax(1, keepdim=True)  # the first maximum
    best = torch.zeros_like(eligible).scatter_(1, first, True)
    return best & eligible
