"""The decode loop: one loop for every sampler.

The loop owns the state (tokens, blocks, counters), calls the model once per pass (unless the
sampler already computed the next state's output), asks the sampler which positions to
reveal, writes them, and drops finished rows from the batch so they stop costing passes.
Everything else composes around it: samplers (:mod:`unmask.samplers`, verification as the
:class:`~unmask.samplers.verified.Verified` wrapper) and hooks (:mod:`unmask.hooks`, e.g. the
corrector); self-conditioning lives in the :class:`~unmask.models.handle.ModelHandle`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

from unmask.constraints.base import constraint_hook
from unmask.errors import require
from unmask.hooks import Hook
from unmask.kv_cache import CACHE_MODES, BlockKVCache, block_span
from unmask.models.base import MaskedModel, ModelOutput
from unmask.models.handle import ModelHandle
from unmask.probs import propose, real_log_probs
from unmask.rng import row_gumbel
from unmask.samplers.base import (
    Sampler,
    Selection,
    StepState,
    add_rows,
    put_rows,
    rows_of,
    widen_columns,
)
from unmask.samplers.spec import parse_spec
from unmask.validation import is_int, is_temperature, temperature_message

#: What confidence-type rules rank by when sampling (:class:`DecodeConfig`).
CONFIDENCE = ("draw", "max")


@dataclass
class DecodeConfig:
    """Loop settings shared by every sampler.

    temperature: token temperature; 0 takes the argmax, > 0 samples (Gumbel, float64).
    block_size: semi-autoregressive blocks of this many positions, decoded left to right
        (None = one block), counted back from the end of the row: where it does not divide
        the row's length N, the first block holds the first ``N % block_size`` positions
        (a prompt right-aligned before whole blocks of masks needs no padding).
    record_history: keep the token state after every pass.
    self_condition: give a self-conditioning model the previous pass's beliefs (False: zeros,
        every pass as if it were the first; for ablations). No effect on other models.
    confidence: what ``StepState.x0_prob`` (the score of confidence-type rules) holds when
        sampling: ``"draw"``, the probability of the token drawn at the position (LLaDA's
        low-confidence remasking, MaskGIT); ``"max"``, the largest probability there,
        which does not depend on the draw. Equal at temperature 0.
    cache_kv: None (every pass runs the model on the whole rows; on the rows up to the end of
        the current blocks for a ``block_causal`` model and a sampler that
        ``reads_eligible_only``), ``"prefix"`` or ``"dual"``: Fast-dLLM's block KV cache,
        refreshed at block boundaries, for model folders whose code takes
        ``past_key_values`` (:mod:`unmask.kv_cache`; an approximation for bidirectional
        models).
    batch_invariant: the loop's model pass runs one row at a time, each on the positions it
        would compute decoded alone, so that a row's tokens do not depend on the rows beside
        it (the kernels of a batched pass may sum in another order for another row count:
        ``docs/gpu.md``). Slower; passes that samplers run themselves (lookahead, verified)
        stay batched.
    """

    temperature: float = 0.0
    block_size: int | None = None
    record_history: bool = False
    self_condition: bool = True
    confidence: str = "draw"
    cache_kv: str | None = None
    batch_invariant: bool = False

    def __post_init__(self):
        require(is_temperature(self.temperature),
                temperature_message("temperature", self.temperature))
        require(self.block_size is None or (is_int(self.block_size) and self.block_size >= 1),
                f"block_size: must be None or an integer >= 1, got {self.block_size!r}")
        require(isinstance(self.record_history, bool),
                f"record_history: must be True or False, got {self.record_history!r}")
        require(isinstance(self.self_condition, bool),
                f"self_condition: must be True or False, got {self.self_condition!r}")
        require(self.confidence in CONFIDENCE,
                f"confidence: expected one of {', '.join(CONFIDENCE)}, got {self.confidence!r}")
        require(isinstance(self.batch_invariant, bool),
                f"batch_invariant: must be True or False, got {self.batch_invariant!r}")
        require(self.cache_kv is None or self.cache_kv in CACHE_MODES,
                f"cache_kv: expected None or one of {', '.join(CACHE_MODES)}, got "
                f"{self.cache_kv!r}")


@dataclass
class DecodeResult:
    """What decoding produced, per row of the input batch.

    tokens: (B, N) decoded tokens (no MASK left).
    nfe: (B,) model calls that included the row (forward passes).
    sequences: (B,) sequences the model evaluated for the row (> nfe for lookahead samplers
        and verified passes).
    steps: (B,) decoding passes taken.
    cumulative_entropy: (B,) sum over passes of the entropies (nats) of the revealed positions
        (for a verified pass, each one's entropy given the pass's positions revealed before it).
    reveal_step: (B, N) the pass at which each position was (last) revealed (-1 if given).
    stats: per-feature (B,) statistics reported by the sampler and the hooks, e.g.
        ``stats["rejected"]`` (verified passes: chosen positions held back for a later pass),
        ``stats["remasked"]`` (corrector: decoded tokens sent back to MASK).
    history: optional list of (B, N) token states after each pass.
    """

    tokens: torch.Tensor
    nfe: torch.Tensor
    sequences: torch.Tensor
    steps: torch.Tensor
    cumulative_entropy: torch.Tensor
    reveal_step: torch.Tensor
    stats: dict[str, torch.Tensor] = field(default_factory=dict)
    history: list[torch.Tensor] | None = field(default=None, repr=False)


def decode(
    model: MaskedModel,
    tokens: torch.Tensor,
    sampler: Sampler | str,
    config: DecodeConfig | None = None,
    *,
    seed: int | torch.Tensor = 0,
    hooks: tuple[Hook, ...] | list[Hook] = (),
    progress=None,
    constraint=None,
) -> DecodeResult:
    """Fill every MASK of ``tokens`` with ``sampler``.

    Args:
        model: the :class:`MaskedModel`; decoding runs on its device.
        tokens: (B, N) long, MASK where to decode; given tokens never change (nor, without a
            hook that masks again, revealed ones).
        sampler: a :class:`Sampler` or a spec (``"eb:gamma=0.1+verify=0.002"``,
            :func:`~unmask.samplers.spec.parse_spec`; not ``+corrector``: pass ``hooks``).
        config: loop settings (:class:`DecodeConfig`; None: the defaults).
        seed: an int s gives rows the seeds s, s+1, ..., s+B-1 (so row r decoded alone with
            seed s+r gives the same output), or a (B,) tensor of per-row seeds.
        hooks: :class:`~unmask.hooks.Hook` s called every pass, in order (e.g.
            :func:`~unmask.hooks.corrector_hooks`).
        progress: optional callable(n_finished_rows) for progress display.
        constraint: None, a :class:`~unmask.constraints.ConstraintSpec` (the decoded row
            must spell a string of its language, from position 0) or a
            :class:`~unmask.constraints.base.Constraint`; applied after ``hooks``
            (:class:`~unmask.constraints.base.Constrain`: ``stats["cut_passes"]``,
            ``stats["dead_end"]``).

    Returns:
        A :class:`DecodeResult` whose tensors are on the device of ``tokens``. Rows with
        nothing masked cost 0 passes. The passes (every ``select`` and hook call after
        ``prepare``) run in ``torch.inference_mode``; the result's tensors are ordinary ones.
    """
    config, sampler, hooks = _check_args(model, tokens, sampler, config, hooks)
    hooks = (*hooks, *sampler.decode_hooks())  # a spec's hook modifiers ride on its sampler
    if constraint is not None:  # last: what it allows is final
        hooks = (*hooks, constraint_hook(constraint))
    loop = _Loop(model, tokens, config, seed,
                 output_attentions=sampler.needs_attentions and model.supports_attentions)
    sampler.prepare(model)
    for hook in hooks:
        hook.prepare(model, sampler, loop.tokens)
    sampler.begin(*tokens.shape)
    # the passes' many small operations skip autograd's bookkeeping; what leaves is copied out
    with torch.inference_mode():
        stats = _passes(loop, sampler, hooks, progress)
        result = loop.result(stats)
    return _released(result, tokens.device)


def _passes(loop: _Loop, sampler: Sampler, hooks: tuple[Hook, ...], progress
            ) -> dict[str, torch.Tensor]:
    """Decode ``loop``'s rows with ``sampler`` and ``hooks`` until none holds a MASK (nor is
    kept by a hook); the sampler's and hooks' stats."""
    reuse_next, remaskers, may_be_complete = loop.plan(sampler, hooks)
    rows, cached, some_complete = loop.follow_rows(loop.unfinished()), None, False
    while rows.numel():
        x, masked, eligible = loop.enter_blocks(rows)
        cols = loop.columns(rows)
        out = (loop.forward(x, rows, sampler.needs_hidden_layers, cols) if cached is None
               else cached.positions(cols.start, cols.stop))
        state = loop.step_state(rows, x, masked, eligible, out, hooks, cols)
        sel, new, broken = _select(sampler, state, loop.real_mask, some_complete)
        for hook in hooks:
            sel, new = hook.adjust_selection(state, sel, new)
        nothing = loop.no_remask(state.masked) if remaskers else None
        loop.write(state, sel, new, _remasked(remaskers, rows, state, nothing))
        still = has_mask = (rows_of(loop.tokens, rows) == loop.mask_id).any(1)
        for hook in hooks:
            keep = hook.keep_rows(state)
            still = still if keep is None else still | keep
        handed = sel.next_output if reuse_next else None
        stale = None if handed is None or sel.stale is None else sel.stale & still
        # the one host read: any row stale, any complete, every block still pending
        all_go_on, any_stale, some_complete, blocks_stand, kept = _stop_if_broken(
            broken, still, sampler, None if stale is None else stale.any(),
            (still > has_mask).any() if may_be_complete else None,
            (eligible > sel.reveal).any(1).all() if loop.track_blocks else None,
            rows_kept=still if loop.rows_host is not None else None)
        loop.same_blocks = all_go_on and blocks_stand
        if any_stale:
            handed = loop.refresh(handed, rows, stale, sampler.needs_hidden_layers)
        cached = None if handed is None else handed if all_go_on else handed.rows(still)
        rows = rows if all_go_on else loop.follow_rows(rows[still], kept)
        if progress is not None:
            progress(loop.tokens.shape[0] - len(rows))
    return {k: v for part in (sampler, *hooks) for k, v in part.stats().items()}


def _released(res: DecodeResult, device: torch.device) -> DecodeResult:
    """``res`` on ``device``, its tensors usable anywhere: not made in inference mode (which
    outside it cannot be written in place nor saved for backward), copied where they were."""
    def own(t: torch.Tensor) -> torch.Tensor:
        t = t.to(device)  # a copy made here where the devices differ
        return t.clone() if t.is_inference() else t

    return DecodeResult(
        tokens=own(res.tokens), nfe=own(res.nfe), sequences=own(res.sequences),
        steps=own(res.steps), cumulative_entropy=own(res.cumulative_entropy),
        reveal_step=own(res.reveal_step), stats={k: own(v) for k, v in res.stats.items()},
        history=None if res.history is None else [own(h) for h in res.history])


def _remasked(remaskers: list[Hook], rows: torch.Tensor, state: StepState,
              nothing: torch.Tensor | None) -> torch.Tensor | None:
    """(B, N) bool: the positions the hooks that mask again (``after_write``) send back to
    MASK after the pass's write, in order; None where none is (no such hook, or each gave
    back the all-False ``nothing`` (B, N) it was handed: the write then skips them)."""
    if not remaskers:
        return None
    remask, version = nothing, nothing._version
    for hook in remaskers:
        given, remask = remask, hook.after_write(rows, state, remask)
        require(nothing._version == version,
                f"hook {type(hook).__name__}: wrote into the remask it was given; return a "
                "new tensor (remask | sent_back)")
        require(remask is given or hook.rewrites,
                f"hook {type(hook).__name__}: its after_write returned another remask than it "
                "was given, but its rewrites is False; set rewrites = True if it masks again")
    return None if remask is nothing else remask


def _overrides(hook: Hook, name: str) -> bool:
    return getattr(type(hook), name) is not getattr(Hook, name)


def _narrow(sampler: Sampler, hooks: tuple[Hook, ...]) -> bool:
    """Whether the pass may be computed at the current blocks only (:class:`StepState`
    ``columns``): the sampler and every hook read eligible positions only."""
    return sampler.reads_eligible_only and all(h.reads_eligible_only for h in hooks)


def _check_args(model, tokens, sampler, config, hooks):
    if config is None:
        config = DecodeConfig()
    require(isinstance(config, DecodeConfig),
            f"config: expected a DecodeConfig or None, got {type(config).__name__}")
    if isinstance(sampler, str):
        spec = parse_spec(sampler)
        require(not spec.corrected, f"sampler: {sampler!r}: decode with the corrector by "
                                    "passing hooks=corrector_hooks(corrector)")
        sampler = spec.build()
    require(isinstance(sampler, Sampler),
            f"sampler: expected a Sampler or a registered name, got {type(sampler).__name__}")
    hooks = tuple(hooks)
    for hook in hooks:
        require(isinstance(hook, Hook), f"hooks: expected Hook objects, got "
                                        f"{type(hook).__name__}")
    require(isinstance(tokens, torch.Tensor),
            f"tokens: expected a (B, N) tensor, got {type(tokens).__name__}")
    model.check_tokens(tokens)
    return config, sampler, hooks


def _row_seeds(seed, batch_size: int, device) -> torch.Tensor:
    if is_int(seed):
        seed = int(seed)
        require(0 <= seed and seed + batch_size <= 2**63,
                f"seed: must be in [0, 2**63 - {batch_size}] for {batch_size} rows (row r "
                f"gets seed + r), got {seed}")
        return torch.arange(batch_size, device=device, dtype=torch.long) + seed
    require(isinstance(seed, torch.Tensor),
            f"seed: expected an int or a tensor of per-row seeds, got {type(seed).__name__}")
    seeds = torch.as_tensor(seed, dtype=torch.long, device=device)
    require(seeds.shape == (batch_size,),
            f"seed: expected an int or {batch_size} per-row seeds, got shape {tuple(seeds.shape)}")
    return seeds


class _Loop:
    """The loop's per-decode state, on the model's device, indexed by original row."""

    def __init__(self, model: MaskedModel, tokens: torch.Tensor, config: DecodeConfig, seed,
                 output_attentions: bool = False):
        b, n = tokens.shape
        device = model.device
        self.config = config
        self.mask_id = model.mask_id
        self.real_mask = model.real_token_mask.to(device)
        self.tokens = tokens.to(device, copy=True)
        self.seeds = _row_seeds(seed, b, device)
        self.handle = ModelHandle(model, b, device, n, config.self_condition,
                                  output_attentions, tokens=self.tokens)
        zeros = torch.zeros(b, dtype=torch.long, device=device)
        self.steps, self.block_step, self.block_masked = zeros, zeros.clone(), zeros.clone()
        self.cur_block = torch.full((b,), -1, dtype=torch.long, device=device)
        self.cum_entropy = torch.zeros(b, dtype=torch.float64, device=device)
        self.reveal_step = torch.full((b, n), -1, dtype=torch.long, device=device)
        self.block = config.block_size or max(n, 1)
        #: positions the first block lacks: blocks are counted back from the row's end
        self.lead = -n % self.block
        self.block_id = (torch.arange(n, device=device) + self.lead) // self.block  # (N,)
        #: one block (N positions) that every row has entered: nothing more to track
        self.entered_one_block = False
        #: whether the pass's read says when a row's block changes (set by ``decode``), and
        #: whether it said the rows and their blocks are the last pass's: the blocks, their
        #: eligible positions (``in_block`` (B, N), by original row) and the columns stand
        self.track_blocks, self.same_blocks = False, False
        #: passes of one epoch have the same rows in the same blocks (the KV cache's groups)
        self.epoch = 0
        self.in_block: torch.Tensor | None = None
        self._cols: slice | None = None
        self._no_remask: torch.Tensor | None = None
        self.history: list[torch.Tensor] | None = [] if config.record_history else None
        self.kv = (BlockKVCache(model, config.cache_kv, b, n, self.block, self.lead)
                   if config.cache_kv else None)
        #: per-position work over the current blocks only (set once the sampler is prepared)
        self.narrow = False
        #: where some row holds padding, the pass's rows on the host and whether they hold
        #: padding (:meth:`follow_rows`; None: not followed)
        self.rows_host: list[int] | None = None
        self.rows_padded: bool | None = None
        causal = model.block_causal
        self.prefix_only = (causal is not None and self.block % causal == 0
                            and self.lead % causal == 0)

    def plan(self, sampler: Sampler, hooks: tuple[Hook, ...]):
        """What the passes need, by what the sampler and hooks do: (whether a sampler's
        output on the next state may serve as the next pass's, the hooks that mask again
        (``after_write``), whether a row may go on with no MASK)."""
        self.narrow = _narrow(sampler, hooks) and self.handle.prev_probs is None
        remaskers = [h for h in hooks if _overrides(h, "after_write")]
        # with no hook that masks again (an after_write that only reads has rewrites False)
        # or changes the reveal, a row's block changes only when its eligible positions are
        # all revealed: the pass's read says whether one was
        self.track_blocks = (self.block < self.tokens.shape[1]
                             and not any(h.rewrites for h in remaskers)
                             and not any(_overrides(h, "adjust_selection") for h in hooks))
        # without a hook that keeps complete rows, every row of a pass holds a MASK
        return (not any(hook.rewrites for hook in hooks), remaskers,
                any(_overrides(h, "keep_rows") for h in hooks))

    def no_remask(self, like: torch.Tensor) -> torch.Tensor:
        """An all-False bool tensor shaped as ``like`` (R, N): what the hooks that mask
        again are handed first (:func:`_remasked`); made once a shape, outside inference
        mode, so that its version counter shows a hook writing into it."""
        kept = self._no_remask
        if kept is None or kept.shape != like.shape:
            with torch.inference_mode(False):
                kept = torch.zeros(like.shape, dtype=torch.bool, device=like.device)
            self._no_remask = kept
        return kept

    def columns(self, rows: torch.Tensor) -> slice:
        """The positions the pass computes distributions for: the whole row, or (``narrow``)
        the blocks from the first to the last current block of ``rows``."""
        if not (self.same_blocks and self._cols is not None):  # else the last pass's
            self._cols = self._span(rows)
        return self._cols

    def _span(self, rows: torch.Tensor) -> slice:
        n = self.tokens.shape[1]
        if not self.narrow or self.block == n:
            return slice(0, n)
        # one read
        first, last = torch.stack(torch.aminmax(rows_of(self.cur_block, rows))).tolist()
        return slice(*block_span(first, last, self.block, self.lead))

    def forward(self, x: torch.Tensor, rows: torch.Tensor, hidden_layers: bool, cols: slice):
        """The loop's pass on ``x`` for ``rows`` at the positions ``cols``: the model on the
        whole rows (on the rows up to ``cols.stop`` for a block-causal model; its logits at
        ``cols`` only where it can), or through the KV cache; ``batch_invariant``: one row at
        a time."""
        if self.config.batch_invariant and len(rows) > 1:
            return self._forward_rows(x, rows, hidden_layers, cols)
        return self._forward(x, rows, hidden_layers, cols, self.epoch, self.rows_padded)

    def _forward_rows(self, x: torch.Tensor, rows: torch.Tensor, hidden_layers: bool,
                      cols: slice) -> ModelOutput:
        """:meth:`forward` one row at a time, each at the positions it computes alone, the
        outputs placed at ``cols`` (zeros where a row computed less)."""
        parts = []
        for i in range(len(rows)):  # the opt-in per-row pass: shapes of a row decoded alone
            own = self._span(rows[i:i + 1])
            padded = (None if self.rows_host is None
                      else self.handle.padded_rows[self.rows_host[i]])
            parts.append((own, self._forward(x[i:i + 1], rows[i:i + 1], hidden_layers, own,
                                             None, padded)))  # rows of their own: no KV epoch
        if all(own == cols for own, _ in parts):
            return ModelOutput.cat([out for _, out in parts])
        first = parts[0][1]
        width = cols.stop - cols.start
        logits = first.logits.new_zeros(len(rows), width, first.logits.shape[-1])
        hidden = first.hidden.new_zeros(len(rows), width, first.hidden.shape[-1])
        for i, (own, out) in enumerate(parts):
            logits[i, own.start - cols.start:own.stop - cols.start] = out.logits[0]
            hidden[i, own.start - cols.start:own.stop - cols.start] = out.hidden[0]
        rest = ModelOutput.cat([dataclasses.replace(out, logits=out.logits[:, :0],
                                                    hidden=out.hidden[:, :0])
                                for _, out in parts])
        return dataclasses.replace(rest, logits=logits, hidden=hidden)

    def _forward(self, x: torch.Tensor, rows: torch.Tensor, hidden_layers: bool, cols: slice,
                 epoch: int | None, padded: bool | None = None):
        if self.kv is not None:
            require(not hidden_layers, "cache_kv: the sampler reads every layer's hidden "
                                       "states, which a cached pass does not compute; drop "
                                       "cache_kv")
            return self.kv(self.handle, x, rows, rows_of(self.cur_block, rows), cols,
                           keep_outputs=not self.narrow, epoch=epoch)
        if cols.stop - cols.start == x.shape[1]:
            return self.handle(x, rows, output_hidden_layers=hidden_layers, distinct=True,
                               padded=padded)
        end = cols.stop if self.prefix_only else x.shape[1]
        if self.handle.model.supports_logits_positions:
            return self.handle(x[:, :end], rows, output_hidden_layers=hidden_layers,
                               logits_positions=cols, distinct=True, padded=padded)
        out = self.handle(x[:, :end], rows, output_hidden_layers=hidden_layers, distinct=True,
                          padded=padded)
        return out.positions(cols.start, cols.stop)

    def refresh(self, handed: ModelOutput, rows: torch.Tensor, stale: torch.Tensor,
                hidden_layers: bool) -> ModelOutput:
        """``handed`` (the pass's output on ``rows``' next state, from the sampler) with its
        ``stale`` (B,) bool rows replaced by the model on their next state, whole rows."""
        redo = stale.nonzero().squeeze(1)
        own = self.handle(self.tokens[rows[redo]], rows[redo], output_hidden_layers=hidden_layers)
        order = torch.arange(len(rows), device=redo.device)
        order[redo] = len(rows) + torch.arange(len(redo), device=redo.device)
        return ModelOutput.cat([handed, own]).rows(order)

    def unfinished(self) -> torch.Tensor:
        return (self.tokens == self.mask_id).any(1).nonzero().squeeze(1)

    def follow_rows(self, rows: torch.Tensor, kept: list[bool] | None = None
                    ) -> torch.Tensor:
        """``rows``, the pass's (those with a MASK, first). Where some row holds padding and
        the model's calls are the loop's own (no KV cache), they are kept on the host too
        (``rows_host``, read once a decode, then cut by ``kept``, which of the last ones go
        on, from the pass's one read) with whether they hold padding (``rows_padded``), so
        the model does not read it each call."""
        if self.handle.any_padded and self.kv is None:
            self.rows_host = (rows.tolist() if kept is None  # one read, per decode
                              else [r for r, k in zip(self.rows_host, kept, strict=True) if k])
            self.rows_padded = any(self.handle.padded_rows[r] for r in self.rows_host)
        return rows

    def enter_blocks(self, rows: torch.Tensor):
        """(x, masked, eligible) of ``rows``: eligible = masked positions of the first block
        that still holds a MASK; a row entering a block restarts its block step. Where the
        last pass's read said no row left its block (``same_blocks``), the blocks stand."""
        x = copy_rows(self.tokens, rows)
        masked = x == self.mask_id
        if not self.same_blocks:
            self.epoch += 1
        if self.entered_one_block:  # one block, entered by every row on the first pass
            return x, masked, masked
        if self.same_blocks:
            return x, masked, masked & rows_of(self.in_block, rows)
        self.entered_one_block = self.block == x.shape[1]
        whole = torch.nn.functional.pad(masked, (self.lead, 0)) if self.lead else masked
        first = whole.view(len(rows), -1, self.block).any(-1).long().argmax(1)
        in_block = self.block_id[None, :] == first[:, None]
        eligible = masked & in_block
        if self.track_blocks:
            if self.in_block is None:
                self.in_block = torch.zeros_like(self.tokens, dtype=torch.bool)
            put_rows(self.in_block, rows, in_block)
        entered = first != rows_of(self.cur_block, rows)
        put_rows(self.cur_block, rows, first)
        self._set_rows("block_step", rows,
                       torch.where(entered, 0, rows_of(self.block_step, rows)))
        self._set_rows("block_masked", rows,
                       torch.where(entered, eligible.sum(1), rows_of(self.block_masked, rows)))
        return x, masked, eligible

    def step_state(self, rows, x, masked, eligible, out, hooks, cols: slice) -> StepState:
        """The state of ``rows``, whose distributions at the positions ``cols`` ``out``
        holds (B, W, V)."""
        log_probs = (real_log_probs(out.logits, self.real_mask) if out.log_probs is None
                     else out.log_probs)
        for hook in hooks:
            log_probs = hook.adjust_log_probs(rows, log_probs, cols)
        probs = log_probs.exp()
        entropy = torch.where(masked[:, cols], torch.special.entr(probs).sum(-1), 0.0)
        temperature = self.config.temperature
        # stream 0 is the loop's token draw; samplers use streams >= 1
        v = log_probs.shape[-1]
        noise = (row_gumbel(rows_of(self.seeds, rows), rows_of(self.steps, rows), 0,
                            tuple(log_probs.shape[1:]),
                            start=cols.start * v) if temperature > 0 else None)
        x0 = propose(log_probs, temperature, noise)
        x0_prob = (probs.amax(-1) if self.config.confidence == "max"
                   else probs.gather(-1, x0[..., None]).squeeze(-1))
        n = x.shape[1]
        entropy, x0_prob = widen_columns(entropy, cols, n), widen_columns(x0_prob, cols, n)
        x0 = widen_columns(x0, cols, n, x)
        return StepState(
            tokens=x, masked=masked, eligible=eligible, output=out, log_probs=log_probs,
            probs=probs, entropy=entropy, x0=x0, x0_prob=x0_prob,
            # the per-row counters are never written in place while every row decodes
            step=rows_of(self.block_step, rows), global_step=rows_of(self.steps, rows),
            block_masked=rows_of(self.block_masked, rows), row_ids=rows,
            seeds=rows_of(self.seeds, rows),  # never written
            temperature=temperature, model=self.handle, mask_id=self.mask_id,
            real_mask=self.real_mask, columns=cols)

    def write(self, state: StepState, sel: Selection, new: torch.Tensor,
              remask: torch.Tensor | None):
        """Write the pass: revealed tokens, masks again (``remask``; None: none), counters,
        self-conditioning."""
        rows, x, reveal = state.row_ids, state.tokens, sel.reveal
        written = torch.where(reveal, new, x)
        put_rows(self.tokens, rows,
                 written if remask is None else torch.where(remask, self.mask_id, written))
        if self.handle.prev_probs is not None:  # a self-conditioning model
            self.handle.remember(rows, state.probs, state.masked > reveal)
        paid = state.entropy if sel.entropy is None else sel.entropy
        add_rows(self.cum_entropy, rows, torch.where(reveal, paid.double(), 0.0).sum(1))
        before = rows_of(self.reveal_step, rows)
        put_rows(self.reveal_step, rows, torch.where(
            reveal, rows_of(self.steps, rows)[:, None],
            before if remask is None else torch.where(remask, -1, before)))
        self._set_rows("steps", rows, rows_of(self.steps, rows) + 1)
        self._set_rows("block_step", rows, rows_of(self.block_step, rows) + 1)
        if self.history is not None:
            with torch.inference_mode(False):  # an ordinary copy, not copied out again
                self.history.append(self.tokens.clone())

    def _set_rows(self, name: str, rows: torch.Tensor, value: torch.Tensor) -> None:
        """The per-row counter ``name`` at ``rows`` becomes ``value``: a new tensor where
        ``rows`` are every row (a pass's :class:`StepState` holds the one before), else
        written in place (a pass over fewer rows holds a copy)."""
        t = getattr(self, name)
        if rows.shape[0] == t.shape[0]:
            setattr(self, name, value)
        else:
            t[rows] = value

    def result(self, stats: dict[str, torch.Tensor]) -> DecodeResult:
        """The decode's result, on the model's device."""
        return DecodeResult(
            tokens=self.tokens, nfe=self.handle.calls, sequences=self.handle.sequences,
            steps=self.steps, cumulative_entropy=self.cum_entropy,
            reveal_step=self.reveal_step, stats=stats, history=self.history)


def copy_rows(t: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """A copy of ``t[rows]`` (``rows`` as :func:`~unmask.samplers.base.rows_of`'s): a clone
    where they are all of ``t``'s rows."""
    return t.clone() if rows.shape[0] == t.shape[0] else t[rows]


def _select(sampler: Sampler, state: StepState, real_mask: torch.Tensor,
            some_complete: bool = True) -> tuple[Selection, torch.Tensor, torch.Tensor]:
    """The sampler's selection for the rows that still hold a MASK (rows kept complete by a
    hook reveal nothing; ``some_complete`` False: there are none), the tokens to write
    where it reveals, and its contract checks (:func:`_contract_flags`), on the device."""
    if not some_complete:
        sel = sampler.select(state)
        return (sel, *_contract_flags(sel, state, real_mask, sampler))
    decoding = state.masked.any(1)
    sub = decoding.nonzero().squeeze(1)
    reveal, new = torch.zeros_like(state.masked), state.tokens.clone()
    entropy, broken = None, torch.tensor(KEPT, device=state.tokens.device)
    if sub.numel():
        sub_state = state.rows(sub)
        sel = sampler.select(sub_state)
        new[sub], broken = _contract_flags(sel, sub_state, real_mask, sampler)
        reveal[sub] = sel.reveal
        if sel.entropy is not None:
            entropy = torch.zeros_like(state.entropy, dtype=sel.entropy.dtype)
            entropy[sub] = sel.entropy
    return Selection(reveal, entropy=entropy), new, broken


#: what a sampler's selection must not do, in the order :func:`_contract_flags` checks it,
#: each with the value of its flag that says the selection does it
CONTRACT = (("revealed a position that is not eligible", True),
            ("revealed nothing in some row (no progress)", False),
            ("emitted a token that is not a real token", True))
#: the flags of a selection that keeps the contract
KEPT = tuple(not broken for _, broken in CONTRACT)


def _contract_flags(sel: Selection, state: StepState, real_mask: torch.Tensor,
                    sampler: Sampler) -> tuple[torch.Tensor, torch.Tensor]:
    """The tokens to write where ``sel.reveal``, and (len(CONTRACT),) bool on the device:
    the flags of :data:`CONTRACT`, which say which part of the contract the selection
    breaks (read with the pass's stopping check, :func:`_stop_if_broken`). RuntimeError at
    once on a reveal of the wrong shape or type."""
    reveal, name = sel.reveal, sampler.label
    if reveal.shape != state.eligible.shape or reveal.dtype != torch.bool:
        raise RuntimeError(f"sampler {name!r}: reveal must be a bool tensor of shape "
                           f"{tuple(state.eligible.shape)}")
    if sel.stale is not None and (sel.next_output is None or sel.stale.dtype != torch.bool
                                  or sel.stale.shape != reveal.shape[:1]):
        raise RuntimeError(f"sampler {name!r}: stale must be a bool tensor of shape "
                           f"{tuple(reveal.shape[:1])}, with next_output")
    if sel.tokens is None:  # the loop's proposals: ids of the vocabulary by construction
        new = state.x0
        real = real_mask[new]
    else:
        new = sel.tokens
        real = real_mask[new.clamp(0, len(real_mask) - 1)] & (new >= 0) & (new < len(real_mask))
    # on bools a > b is a & ~b
    broken = torch.stack([(reveal > state.eligible).any(), reveal.any(1).all(),
                          (reveal > real).any()])
    return new, broken


def _stop_if_broken(broken: torch.Tensor, still: torch.Tensor, sampler: Sampler,
                    *flags: torch.Tensor | None, rows_kept: torch.Tensor | None = None
                    ) -> tuple:
    """Read the pass's contract flags together with whether every row goes on (``still``
    (B,) bool), the 0-dim bool ``flags`` (None: not read) and ``rows_kept`` (B,) bool (None:
    not read), in one host read: (every row goes on, each flag; False for None, then
    ``rows_kept`` as a list, or None). RuntimeError naming the first broken part of the
    contract (:func:`_contract_flags`)."""
    parts = [broken, still.all()[None]]
    for f in flags:
        if f is not None:
            parts.append(f[None])
    if rows_kept is not None:
        parts.append(rows_kept)
    read = torch.cat(parts).tolist()
    for (problem, broken_when), flag in zip(CONTRACT, read, strict=False):
        if flag == broken_when:
            raise RuntimeError(f"sampler {sampler.label!r} {problem}")
    out, at = [read[len(CONTRACT)]], len(CONTRACT) + 1
    for f in flags:
        out.append(f is not None and read[at])
        at += f is not None
    return (*out, None if rows_kept is None else read[at:])
