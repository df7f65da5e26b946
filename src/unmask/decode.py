"""The decode loop: one loop for every sampler.

The loop owns the state (tokens, blocks, counters), calls the model once per step (unless the
sampler already computed the next state's output), asks the sampler which positions to
reveal, writes them, and drops finished rows from the batch so they stop costing passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from unmask.errors import UnmaskError, require
from unmask.models.base import MaskedModel, ModelOutput
from unmask.rng import row_gumbel
from unmask.samplers.base import Sampler, Selection, StepState, make_sampler


@dataclass
class DecodeConfig:
    """Loop settings shared by every sampler.

    temperature: token temperature; 0 takes the argmax, > 0 samples (Gumbel, float64).
    block_size: semi-autoregressive blocks of this many positions, decoded left to right
        (None = one block). Must divide the sequence length.
    record_history: keep the token state after every step.
    self_condition: give a self-conditioning model the previous pass's beliefs (False: zeros,
        every pass as if it were the first; for ablations). No effect on other models.
    remask_threshold: with a corrector (``decode(..., corrector=)``), a decoded token whose
        probability of being wrong exceeds this is masked again, to be decoded anew (0.3: the
        shipped Sudoku corrector is rarely sure of a wrong token; at 0.3 it finds 70% of them).
    max_remasks: with a corrector, how often one position may be masked again (bounds the
        passes: decoding always ends).
    ban_remasked: with a corrector, a token it sent back is not proposed at that position
        again (the model's distribution there is renormalised without it), so the position
        is decoded to something else.
    verify: check every pass's set against sequential decoding (:mod:`unmask.verify`): its
        confidence-ordered prefixes are evaluated in one batched call, and only the longest
        prefix whose tokens its own earlier members would not change is revealed; that call
        is the next pass's. One model call per pass as before; ``sequences`` counts the
        prefixes. Not with a corrector, nor with samplers that evaluate their next state
        themselves (lookahead).
    verify_max: with ``verify``, at most this many positions are verified (and revealed) per
        pass, the most confident of the set (None: the whole set); bounds sequences per pass.
    verify_tolerance: with ``verify``, in [0, 1]: a position is also accepted only if, given
        the pass's positions before it, its confidence is within this of the surest eligible
        position's (0: sequential confidence decoding's order, token for token; 1, the
        default: tokens only).
    """

    temperature: float = 0.0
    block_size: int | None = None
    record_history: bool = False
    self_condition: bool = True
    remask_threshold: float = 0.3
    max_remasks: int = 2
    ban_remasked: bool = False
    verify: bool = False
    verify_max: int | None = None
    verify_tolerance: float = 1.0

    def __post_init__(self):
        require(self.temperature >= 0, f"temperature: must be >= 0, got {self.temperature}")
        require(self.block_size is None or (isinstance(self.block_size, int)
                                            and self.block_size >= 1),
                f"block_size: must be None or an integer >= 1, got {self.block_size}")
        require(0.0 < self.remask_threshold < 1.0,
                f"remask_threshold: must be in (0, 1), got {self.remask_threshold}")
        require(isinstance(self.max_remasks, int) and self.max_remasks >= 0,
                f"max_remasks: must be an integer >= 0, got {self.max_remasks}")
        require(self.verify_max is None or (isinstance(self.verify_max, int)
                                            and not isinstance(self.verify_max, bool)
                                            and self.verify_max >= 1),
                f"verify_max: must be None or an integer >= 1, got {self.verify_max}")
        require(self.verify or self.verify_max is None,
                "verify_max: only has an effect with verify=True")
        require(isinstance(self.verify_tolerance, (int, float))
                and 0.0 <= self.verify_tolerance <= 1.0,
                f"verify_tolerance: must be in [0, 1], got {self.verify_tolerance}")
        require(self.verify or self.verify_tolerance == 1.0,
                "verify_tolerance: only has an effect with verify=True")


@dataclass
class DecodeResult:
    """What decoding produced, per row of the input batch.

    tokens: (B, N) decoded tokens (no MASK left).
    nfe: (B,) model calls that included the row (forward passes).
    sequences: (B,) sequences the model evaluated for the row (> nfe for lookahead samplers).
    steps: (B,) decoding steps taken.
    cumulative_entropy: (B,) sum over steps of the entropies (nats) of the revealed positions
        (with ``verify``, each one's entropy given the pass's positions revealed before it).
    reveal_step: (B, N) the step at which each position was (last) revealed (-1 if given).
    remasked: (B,) decoded tokens a corrector sent back to MASK (0 without a corrector).
    rejected: (B,) positions a sampler chose that verification held back for a later pass
        (0 without ``DecodeConfig.verify``).
    history: optional list of (B, N) token states after each step.
    """

    tokens: torch.Tensor
    nfe: torch.Tensor
    sequences: torch.Tensor
    steps: torch.Tensor
    cumulative_entropy: torch.Tensor
    reveal_step: torch.Tensor
    remasked: torch.Tensor
    rejected: torch.Tensor
    history: list[torch.Tensor] | None = field(default=None, repr=False)


class ModelHandle:
    """Runs the model for the loop and for lookahead samplers, counting per original row.

    calls: (B_total,) model calls that included the row; sequences: (B_total,) sequences
    evaluated for the row.
    prev_probs: (B_total, N, V) for a self-conditioning model (else None): each row's beliefs
    from the loop's last pass (zeros before the first and at revealed positions), given to
    every call for that row, lookahead candidates included.
    """

    def __init__(self, model: MaskedModel, batch_size: int, device: torch.device,
                 seq_len: int = 0, self_condition: bool = True):
        self.model = model
        self.calls = torch.zeros(batch_size, dtype=torch.long, device=device)
        self.sequences = torch.zeros(batch_size, dtype=torch.long, device=device)
        self.prev_probs = (torch.zeros(batch_size, seq_len, model.vocab_size, device=device)
                           if self_condition and model.self_conditioning else None)
        #: ask every call for attention weights (set by the loop for a sampler that reads them)
        self.extra = {}

    def __call__(self, tokens: torch.Tensor, rows: torch.Tensor,
                 output_hidden_layers: bool = False) -> ModelOutput:
        """Run the model on tokens (M, N); ``rows`` (M,) names the original row of each."""
        with torch.inference_mode():
            if self.prev_probs is None:
                out = self.model(tokens, output_hidden_layers=output_hidden_layers, **self.extra)
            else:
                out = self.model(tokens, output_hidden_layers=output_hidden_layers,
                                 prev_probs=self.prev_probs[rows], **self.extra)
        self.calls[torch.unique(rows)] += 1
        self.sequences.index_add_(0, rows, torch.ones_like(rows))
        return out


def real_log_probs(logits: torch.Tensor, real_mask: torch.Tensor) -> torch.Tensor:
    """(..., V) log-softmax over the real tokens only; -inf elsewhere. At least float32."""
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    x = logits.to(dtype).masked_fill(~real_mask, -torch.inf)
    return torch.log_softmax(x, dim=-1)


def previous_pass_probs(probs: torch.Tensor, still_masked: torch.Tensor) -> torch.Tensor:
    """(B, N, V) what a self-conditioning model reads of a pass whose distributions over the
    real tokens are ``probs`` (B, N, V): those at the positions ``still_masked`` (B, N), zeros
    elsewhere (revealed positions carry their token instead)."""
    return torch.where(still_masked[..., None], probs, 0.0)


def propose(log_probs: torch.Tensor, temperature: float, noise: torch.Tensor | None
            ) -> torch.Tensor:
    """(..., N) the loop's proposal on log-probabilities (..., N, V): the argmax, or at
    temperature > 0 the argmax of log_probs / temperature + noise (Gumbel, (..., N, V))."""
    if temperature > 0:
        return (log_probs.double() / temperature + noise).argmax(-1)
    return log_probs.argmax(-1)


def entropy_from_log_probs(log_probs: torch.Tensor) -> torch.Tensor:
    """(...,) entropy in nats of the distributions (..., V) given as log-probabilities."""
    return torch.special.entr(log_probs.exp()).sum(-1)


def _row_seeds(seed, batch_size: int, device) -> torch.Tensor:
    if isinstance(seed, int):
        return torch.arange(batch_size, device=device, dtype=torch.long) + seed
    seeds = torch.as_tensor(seed, dtype=torch.long, device=device)
    require(seeds.shape == (batch_size,),
            f"seed: expected an int or {batch_size} per-row seeds, got shape {tuple(seeds.shape)}")
    return seeds


def decode(
    model: MaskedModel,
    tokens: torch.Tensor,
    sampler: Sampler | str,
    config: DecodeConfig | None = None,
    *,
    seed: int | torch.Tensor = 0,
    progress=None,
    corrector=None,
) -> DecodeResult:
    """Fill every MASK of ``tokens`` (B, N) with ``sampler``.

    seed: an int s gives rows the seeds s, s+1, ..., s+B-1 (so row r decoded alone with seed
        s+r gives the same output), or a (B,) tensor of per-row seeds.
    progress: optional callable(n_finished_rows) for progress display.
    corrector: optional :class:`~unmask.corrector.Corrector` of ``model`` (anything with
        ``check_model(model)`` and ``wrong_probs(output, tokens) -> (B, N)``). Every pass it
        reads the same forward and masks again the decoded tokens it finds wrong (see
        ``DecodeConfig.remask_threshold`` / ``max_remasks``); a row whose last MASK was filled
        gets one more pass to be checked, and ends only when a check finds nothing to remask.
        A lookahead sampler's precomputed next pass is then not reused (the corrector may
        change the state after it).
    Decoding runs on the model's device; the result's tensors are on the device of ``tokens``.
    Given tokens never change; without a corrector, revealed tokens never change either.
    Rows with nothing masked cost 0 passes.
    """
    config = config or DecodeConfig()
    if isinstance(sampler, str):
        sampler = make_sampler(sampler)
    model.check_tokens(tokens)
    b, n = tokens.shape
    block = config.block_size or n
    if n % block:
        raise UnmaskError(f"block_size: {block} does not divide the sequence length {n}")
    # decoding runs where the model is; results come back where the tokens came from
    device, out_device = model.device, tokens.device
    mask_id = model.mask_id
    real_mask = model.real_token_mask.to(device)
    tokens = tokens.to(device, copy=True)
    seeds = _row_seeds(seed, b, device)
    handle = ModelHandle(model, b, device, n, config.self_condition)
    if getattr(sampler, "needs_attentions", False) and model.supports_attentions:
        handle.extra = {"output_attentions": True}
    steps = torch.zeros(b, dtype=torch.long, device=device)
    cum_entropy = torch.zeros(b, dtype=torch.float64, device=device)
    reveal_step = torch.full((b, n), -1, dtype=torch.long, device=device)
    block_id = torch.arange(n, device=device) // block  # (N,)
    n_blocks = n // block
    cur_block = torch.full((b,), -1, dtype=torch.long, device=device)
    block_step = torch.zeros(b, dtype=torch.long, device=device)
    block_masked = torch.zeros(b, dtype=torch.long, device=device)
    history: list[torch.Tensor] | None = [] if config.record_history else None
    given = tokens != mask_id
    remasks = torch.zeros(b, n, dtype=torch.long, device=device)
    banned = None
    if corrector is not None:
        corrector.check_model(model)
        if isinstance(corrector, torch.nn.Module):
            corrector.to(device)  # it reads the model's pass where the model runs
        if config.ban_remasked:
            if config.max_remasks >= len(model.real_token_ids):
                raise UnmaskError(f"max_remasks: {config.max_remasks} bans could leave a "
                                  f"position none of the model's {len(model.real_token_ids)} "
                                  "tokens; use fewer with ban_remasked")
            banned = torch.zeros(b, n, model.vocab_size, dtype=torch.bool, device=device)
    if config.verify:
        if corrector is not None:
            raise UnmaskError("verify: not with a corrector (it may change the state after the "
                              "verified pass); use one or the other")
        if sampler.evaluates_next_state:
            raise UnmaskError(f"verify: sampler {sampler.name!r} evaluates its next state in "
                              "its own lookahead call; verify the sets of samplers that do not")
    rejected = torch.zeros(b, dtype=torch.long, device=device)
    sampler.begin(b, n)

    rows = (tokens == mask_id).any(1).nonzero().squeeze(1)
    cached: ModelOutput | None = None
    while rows.numel():
        x = tokens[rows]
        masked = x == mask_id
        # current block = first block that still holds a MASK
        per_block = masked.view(len(rows), n_blocks, block).any(-1)  # (R, n_blocks)
        first = per_block.long().argmax(1)
        eligible = masked & (block_id[None, :] == first[:, None])
        entered = first != cur_block[rows]
        cur_block[rows] = first
        block_step[rows] = torch.where(entered, 0, block_step[rows])
        block_masked[rows] = torch.where(entered, eligible.sum(1), block_masked[rows])

        hidden_layers = getattr(sampler, "needs_hidden_layers", False)
        out = cached if cached is not None else handle(x, rows,
                                                       output_hidden_layers=hidden_layers)
        log_probs = real_log_probs(out.logits, real_mask)
        if banned is not None:
            log_probs = torch.log_softmax(log_probs.masked_fill(banned[rows], -torch.inf), -1)
        probs = log_probs.exp()
        entropy = torch.where(masked, torch.special.entr(probs).sum(-1), 0.0)
        # stream 0 is the loop's token draw; samplers use streams >= 1
        noise = (row_gumbel(seeds[rows], steps[rows], 0, tuple(log_probs.shape[1:]))
                 if config.temperature > 0 else None)
        x0 = propose(log_probs, config.temperature, noise)
        x0_prob = probs.gather(-1, x0[..., None]).squeeze(-1)
        state = StepState(
            tokens=x, masked=masked, eligible=eligible, output=out, log_probs=log_probs,
            probs=probs, entropy=entropy, x0=x0, x0_prob=x0_prob, step=block_step[rows],
            global_step=steps[rows], block_masked=block_masked[rows], row_ids=rows,
            seeds=seeds[rows], temperature=config.temperature, model=handle, mask_id=mask_id)
        # rows with a MASK left decode; full rows (only with a corrector) are being checked
        decoding = masked.any(1)
        if bool(decoding.all()):
            sel = sampler.select(state)
            reveal, new = _check_selection(sel, state, real_mask, sampler)
        else:
            sub = decoding.nonzero().squeeze(1)
            reveal, new = torch.zeros_like(masked), x.clone()
            if sub.numel():
                sub_state = state.rows(sub)
                sel = sampler.select(sub_state)
                reveal[sub], new[sub] = _check_selection(sel, sub_state, real_mask, sampler)
        # a lookahead sampler's pass on the next state; under a corrector the state may change
        # after it (remasks), and full rows being checked are not in it
        next_output = sel.next_output if corrector is None else None
        paid = entropy  # what each revealed position adds to the cumulative entropy
        if config.verify:
            if sel.tokens is not None:
                raise RuntimeError(f"sampler {sampler.name!r}: verify checks the loop's "
                                   "proposals; a sampler with its own tokens cannot be verified")
            from unmask.verify import verify_reveal  # unmask.verify reads unmask.decode

            checked = verify_reveal(state, reveal, max_draft=config.verify_max,
                                    tolerance=config.verify_tolerance,
                                    output_hidden_layers=hidden_layers)
            reveal, next_output = checked.reveal, checked.next_output
            paid = checked.entropy
            rejected[rows] += checked.rejected
        remask = torch.zeros_like(masked)
        if corrector is not None:
            with torch.inference_mode():
                wrong = corrector.wrong_probs(out, x)
            remask = (~masked & ~given[rows] & (remasks[rows] < config.max_remasks)
                      & (wrong > config.remask_threshold))
            remasks[rows] += remask.long()
            if banned is not None:
                banned[rows] |= remask[..., None] & (
                    torch.arange(model.vocab_size, device=device) == x[..., None])

        tokens[rows] = torch.where(remask, mask_id, torch.where(reveal, new, x))
        if handle.prev_probs is not None:
            handle.prev_probs[rows] = previous_pass_probs(probs, masked & ~reveal)
        cum_entropy[rows] += torch.where(reveal, paid.double(), 0.0).sum(1)
        reveal_step[rows] = torch.where(reveal, steps[rows, None],
                                        torch.where(remask, -1, reveal_step[rows]))
        steps[rows] += 1
        block_step[rows] += 1
        if history is not None:
            history.append(tokens.clone())
        still = (tokens[rows] == mask_id).any(1)
        if corrector is not None:
            # a row that has just been filled is checked by one more pass before it ends
            still = still | decoding
        cached = None if next_output is None else next_output.rows(still)
        rows = rows[still]
        if progress is not None:
            progress(b - len(rows))
    if history is not None:
        history = [h.to(out_device) for h in history]
    return DecodeResult(tokens=tokens.to(out_device), nfe=handle.calls.to(out_device),
                        sequences=handle.sequences.to(out_device), steps=steps.to(out_device),
                        cumulative_entropy=cum_entropy.to(out_device),
                        reveal_step=reveal_step.to(out_device),
                        remasked=remasks.sum(1).to(out_device),
                        rejected=rejected.to(out_device), history=history)


def _check_selection(sel: Selection, state: StepState, real_mask: torch.Tensor,
                     sampler: Sampler) -> tuple[torch.Tensor, torch.Tensor]:
    reveal = sel.reveal
    name = sampler.name or type(sampler).__name__
    if reveal.shape != state.eligible.shape or reveal.dtype != torch.bool:
        raise RuntimeError(f"sampler {name!r}: reveal must be a bool tensor of shape "
                           f"{tuple(state.eligible.shape)}")
    if bool((reveal & ~state.eligible).any()):
        raise RuntimeError(f"sampler {name!r} revealed a position that is not eligible")
    if not bool(reveal.any(1).all()):
        raise RuntimeError(f"sampler {name!r} revealed nothing in some row (no progress)")
    new = state.x0 if sel.tokens is None else sel.tokens
    if not bool(real_mask[new[reveal]].all()):
        raise RuntimeError(f"sampler {name!r} emitted a token that is not a real token")
    return reveal, new
