"""Text generation with a masked diffusion LM: a prompt, then ``gen_length`` masked positions
filled by any sampler in semi-autoregressive blocks (LLaDA, arXiv:2502.09992).

A row is the prompt, then the masks, as in LLaDA's ``generate``: the decode loop counts its
blocks back from the row's end, so the blocks start where the prompt ends. Prompts of
different lengths run in one batch left-padded to the longest with the model's pad id (left
out of attention, positions counted from the first real token).
``steps`` is the total over the generation (``steps / number of blocks`` per block), for the
samplers that reveal a count per step. A row whose last finished block holds only EOS has
ended: every later block is filled with EOS in one pass. ``min_new_tokens`` keeps EOS out of
the first generated positions (as LLaDA's generate can), so a row cannot end before them.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import dataclass
from typing import ClassVar, Protocol

import torch

from unmask.compiled import compiled
from unmask.decode import DecodeConfig, DecodeResult, decode
from unmask.errors import UnmaskError, require
from unmask.hooks import Hook
from unmask.host_reads import runs_on_host
from unmask.models.auto import load_model
from unmask.models.base import MaskedModel
from unmask.request import DecodeRequest, sampler_spec
from unmask.samplers.base import (
    Sampler,
    Selection,
    StepState,
)
from unmask.samplers.wrapper import SamplerWrapper
from unmask.validation import is_int, text_problem


@dataclass
class Generation:
    """One prompt's result.

    text: the generated text up to (not including) the first EOS, special tokens dropped.
    token_ids: the gen_length generated ids (EOS included).
    nfe: forward passes that included the row; sequences: sequences evaluated for it.
    tokens_per_forward: gen_length / nfe.
    cumulative_entropy: nats summed over the revealed positions' marginals (each at the
        pass that revealed it).
    wall_s: wall time of the batch the prompt ran in.
    constraint: for a constrained decode, its ``kind`` and ``hash`` and the row's
        ``cut_passes`` (passes whose parallel commit was cut to a feasible part); else None.
    """

    prompt: str
    text: str
    token_ids: list[int]
    nfe: int
    sequences: int
    tokens_per_forward: float
    wall_s: float
    cumulative_entropy: float = 0.0
    constraint: dict | None = None

    def to_json(self) -> dict:
        out = {"prompt": self.prompt, "text": self.text, "nfe": self.nfe,
               "sequences": self.sequences,
               "tokens_per_forward": round(self.tokens_per_forward, 4),
               "cumulative_entropy": round(self.cumulative_entropy, 4),
               "wall_s": round(self.wall_s, 4)}
        if self.constraint is not None:
            out["constraint"] = self.constraint
        return out


def parse_sampler(spec: str | Sampler) -> Sampler:
    """A sampler from a spec (:func:`unmask.request.sampler_spec`; ``+verify[=T]`` allowed,
    ``+corrector`` not); LLaDA's names such as ``low_confidence`` are accepted for NAME."""
    if isinstance(spec, Sampler):
        return spec
    parsed = sampler_spec(spec)
    require(not parsed.corrected, f"sampler: {spec!r}: {NO_CORRECTOR}")
    return parsed.build()


#: why text decoding refuses ``+corrector``
NO_CORRECTOR = "text decoding (generate, infill) takes no corrector; drop '+corrector'"


def text_request(request: DecodeRequest | None, settings: dict) -> DecodeRequest:
    """The request of :func:`generate` / :func:`~unmask.infill.infill`: ``request`` or one
    built from keyword ``settings`` (not both); a text decode takes no corrector."""
    request = DecodeRequest.from_settings(request, **settings)
    require(not request.corrected, f"sampler: {request.sampler!r}: {NO_CORRECTOR}")
    return request


@dataclass
class StopAtEOS(SamplerWrapper):
    """Wraps a sampler: a row whose last finished generated block is all ``eos_id`` fills its
    current block with ``eos_id`` at once; other rows are the inner sampler's (the rest of
    the protocol is the inner sampler's, :class:`~unmask.samplers.wrapper.SamplerWrapper`).
    When the inner sampler hands over its next output (lookahead, verified passes), the rows
    ended here are marked ``stale`` in it: the loop runs the model on their own next state.
    No host read (on the CPU, where a read stalls nothing, the check is one compiled loop,
    :mod:`unmask.loop_kernels`, that also says whether any row ended)."""

    eos_id: int
    block: int
    gen_start: int

    def select(self, state: StepState) -> Selection:
        sel = self.inner.select(state)
        if runs_on_host(state.tokens.device):  # one compiled loop, and nothing to do
            from unmask.loop_kernels import eos_ended_host  # where no row ended

            ended = eos_ended_host(state.eligible, state.tokens, self.eos_id, self.block,
                                   self.gen_start)
            return sel if ended is None else self._end(state, sel, ended)
        return self._end(state, sel, self.ended(state))

    def ended(self, state: StepState) -> torch.Tensor:
        """(B,) bool: rows whose block before the first eligible position is all EOS."""
        first = state.eligible.long().argmax(1)  # first eligible position
        # the previous block's start (generated blocks start at gen_start); a row in the
        # first generated block has none
        prev_start = first - (first - self.gen_start) % self.block - self.block
        prev = prev_start[:, None] + torch.arange(self.block, device=first.device)
        prev_tok = state.tokens.gather(1, prev.clamp(min=0))
        return (prev_start >= self.gen_start) & (prev_tok == self.eos_id).all(1)

    def _end(self, state: StepState, sel: Selection, ended: torch.Tensor) -> Selection:
        """``sel`` with the ``ended`` (B,) rows' eligible positions filled with EOS."""
        tokens = state.x0 if sel.tokens is None else sel.tokens
        reveal = torch.where(ended[:, None], state.eligible, sel.reveal)
        tokens = tokens.masked_fill(ended[:, None], self.eos_id)
        entropy = (None if sel.entropy is None
                   else torch.where(ended[:, None], state.entropy.to(sel.entropy.dtype),
                                    sel.entropy))
        stale = (None if sel.next_output is None
                 else ended if sel.stale is None else ended | sel.stale)
        return Selection(reveal, tokens, next_output=sel.next_output, entropy=entropy,
                         stale=stale)


class NoEOSIn(Hook):
    """Keeps EOS out of the positions [lo, hi): there the EOS ids' log-probabilities
    are -inf and the rest renormalised before the sampler sees them (so the loop's proposal,
    its confidence and entropy are those of the model with EOS banned). Samplers that run the
    model on states of their own (lookahead, verified passes) judge those with the model as it
    is, so they may take more passes there; what they write is still the loop's proposal.
    It reads nothing but the log-probabilities at the positions the loop computes, so the loop
    may compute the current blocks only (``reads_eligible_only``)."""

    reads_eligible_only: ClassVar[bool] = True

    def __init__(self, eos_ids: tuple[int, ...], lo: int, hi: int):
        self.eos_ids, self.lo, self.hi = tuple(eos_ids), lo, hi

    def prepare(self, model, sampler, tokens):
        real = model.real_token_mask.to(tokens.device)
        self.ban = torch.zeros_like(real)
        self.ban[list(self.eos_ids)] = True
        if not bool((real & ~self.ban).any()):
            raise UnmaskError("no EOS in positions "
                              f"{self.lo}..{self.hi - 1}: every real token of the model is an "
                              "EOS id")

    def adjust_log_probs(self, rows, log_probs, columns=slice(0, None)):
        first = columns.start or 0  # the absolute position of log_probs[:, 0]
        lo = min(max(self.lo - first, 0), log_probs.shape[1])
        hi = min(max(self.hi - first, lo), log_probs.shape[1])
        part = log_probs[:, lo:hi].masked_fill(self.ban, -torch.inf)
        part = part - part.logsumexp(-1, keepdim=True)
        return torch.cat([log_probs[:, :lo], part, log_probs[:, hi:]], 1)


def encode_prompt(tokenizer, prompt: str, chat_template: bool = False) -> list[int]:
    """The token ids of ``prompt`` (as a user message of the chat template with
    ``chat_template``)."""
    if chat_template:
        require(getattr(tokenizer, "chat_template", None),
                "chat_template: the tokenizer has no chat template")
        out = tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                            add_generation_prompt=True, tokenize=True)
        ids = out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out
        return [int(i) for i in ids]
    return [int(i) for i in tokenizer(prompt)["input_ids"]]


def _prompt_batch(model: MaskedModel, chunk: list[list[int]], gen_length: int,
                  pad: int | None, multiple: int = 1) -> tuple[torch.Tensor, int]:
    """The decode input for prompts ``chunk`` (token ids each, MASK ids only where
    :func:`infill` put them): every prompt right-aligned in ``width`` slots (the longest
    prompt, rounded up to a multiple of ``multiple``; PAD before shorter ones), then
    ``gen_length`` MASKs. The loop counts blocks back from the row's end, so the generated
    blocks start where the prompts end. Returns (x (len(chunk), width + gen_length) long,
    width)."""
    width = math.ceil(max(len(c) for c in chunk) / multiple) * multiple
    if any(len(c) != width for c in chunk):
        require(pad is not None, "model: it has no pad token to put prompts of different "
                                 "lengths in one batch; give batch_size=1 or prompts of one "
                                 "length")
    require(width + gen_length <= model.max_length,
            f"prompts: {width} prompt slots + gen_length {gen_length} exceed the model's "
            f"max_length {model.max_length}")
    x = torch.full((len(chunk), width + gen_length), model.mask_id, dtype=torch.long)
    for r, ids in enumerate(chunk):
        x[r, :width - len(ids)] = pad if pad is not None else model.mask_id
        x[r, width - len(ids):width] = torch.tensor(ids, dtype=torch.long)
    return x, width


def generate(model: MaskedModel | str, tokenizer=None, prompts: str | list[str] = (),
             request: DecodeRequest | None = None, **settings) -> list[Generation]:
    """Generate a continuation of each prompt.

    Args:
        model: a text :class:`MaskedModel` (e.g. :class:`~unmask.models.hf.HFMaskedModel`)
            or a folder to load one from.
        tokenizer: the model's tokenizer (default: ``model.tokenizer``).
        prompts: one prompt or a list.
        request: the :class:`~unmask.request.DecodeRequest` (sampler, lengths, temperature,
            seed, batching, cache, constraint); prompt i (in the order given) decodes with
            seed ``request.seed + i``.
        **settings: instead of ``request``, its settings by name
            (``generate(model, None, "Hi", sampler="eb:gamma=0.1", gen_length=64)``;
            ``gen_length`` None: the folder's ``generation_config.json`` max_new_tokens, else
            128); LLaDA
            names map to ours (``low_confidence`` -> confidence, ``random`` -> uniform,
            ``topk_margin`` -> margin).
    Returns:
        one :class:`Generation` per prompt, in order.
    """
    request = text_request(request, settings)
    if isinstance(model, (str, os.PathLike)):
        model = load_model(model, task="text")
    require(isinstance(model, MaskedModel), f"model: expected a MaskedModel or a folder, got "
                                            f"{type(model).__name__}")
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    require(tokenizer is not None, "tokenizer: none given and the model folder has none")
    require(callable(tokenizer) and hasattr(tokenizer, "decode"),
            f"tokenizer: expected a transformers tokenizer, got {type(tokenizer).__name__}")
    require(isinstance(prompts, (str, list, tuple)),
            f"prompts: expected a string or a list of strings, got {type(prompts).__name__}")
    prompts = [prompts] if isinstance(prompts, str) else list(prompts)
    check_prompt_texts(prompts)
    gen_length, block = _lengths(request, model)
    sampler = request.build_sampler(gen_length // block)
    encoded = [encode_prompt(tokenizer, p, request.chat_template) for p in prompts]
    check_prompts(model, tokenizer, encoded, gen_length)
    layout = PromptLayout(model, tokenizer, prompts, encoded, block, gen_length,
                          request.stop_at_eos, request.min_new_tokens,
                          request.pad_to_multiple_of)
    require(request.constraint is None or request.min_new_tokens == 0,
            "min_new_tokens: not with a constraint (its language decides where a text ends)")
    return decode_batches(layout, sampler, request.decode_config(block), seed=request.seed,
                          batch_size=request.batch_size, compile=request.compile,
                          constraint=request.constraint)


#: generated positions when a request names none
DEFAULT_GEN_LENGTH = 128


def _lengths(request: DecodeRequest, model: MaskedModel) -> tuple[int, int]:
    """(gen_length, block length) of ``request`` for ``model``: the request checked its
    own lengths; only a length it leaves to the model (the folder's max_new_tokens, else
    :data:`DEFAULT_GEN_LENGTH`) is checked here, against the block and min_new_tokens."""
    if request.gen_length is not None:
        return request.gen_length, request.block_length or request.gen_length
    gen_length = getattr(model, "default_gen_length", None) or DEFAULT_GEN_LENGTH
    return gen_length, check_gen_lengths(gen_length, request.block_length,
                                         request.min_new_tokens)


class Layout(Protocol):
    """How rows of token ids sit in a decode input and come back as :class:`Generation` s:
    what :func:`decode_batches` decodes. :class:`PromptLayout` (a prompt, then masked
    positions to generate) and :class:`unmask.infill.InfillPlan` (templates with masked
    positions inside) are its two kinds."""

    #: the model the rows are encoded for
    model: MaskedModel
    #: the rows, token ids each (MASK where to fill, for templates)
    encoded: list[list[int]]

    def batch(self, chunk: list[list[int]]) -> tuple[torch.Tensor, TextEnds | None]:
        """A chunk's decode input: x (R, W) long with MASK where to fill, and how its rows
        end (:class:`TextEnds`; None: nothing ends early, no EOS ban)."""

    def read(self, res: DecodeResult, lo: int, ends: TextEnds | None, wall: float
             ) -> list[Generation]:
        """The :class:`Generation` s of the decoded chunk that starts at row ``lo`` (``wall``
        its seconds)."""


@dataclass
class PromptLayout:
    """Prompts continued by ``gen_length`` masked positions (:func:`generate`'s
    :class:`Layout`): prompts right-aligned, PAD before shorter ones (:func:`prompt_batch`);
    a row may end at a block of EOS (``stop_at_eos``) but not in its first ``min_new_tokens``
    generated positions."""

    model: MaskedModel
    tokenizer: object
    prompts: list[str]
    encoded: list[list[int]]
    block: int
    gen_length: int
    stop_at_eos: bool = True
    min_new_tokens: int = 0
    pad_to_multiple_of: int | None = None

    def batch(self, chunk: list[list[int]]) -> tuple[torch.Tensor, TextEnds]:
        return prompt_batch(self.model, chunk, self.block, self.gen_length,
                            stop_at_eos=self.stop_at_eos, min_new_tokens=self.min_new_tokens,
                            pad_to_multiple_of=self.pad_to_multiple_of)

    def read(self, res: DecodeResult, lo: int, ends: TextEnds, wall: float
             ) -> list[Generation]:
        return generations(res, self.tokenizer, self.prompts[lo:lo + len(res.tokens)], ends,
                           wall)


def decode_batches(layout: Layout, sampler: Sampler, config: DecodeConfig, *, seed: int,
                   batch_size: int | None, compile: bool = False, constraint=None
                   ) -> list[Generation]:
    """The one path of :func:`generate` and :func:`unmask.infill.infill`: the rows of
    ``layout`` decoded ``batch_size`` at a time (default: all at once; with
    ``config.batch_invariant``, rows of one input width at a time), row i of the whole list
    with seed ``seed + i``. ``compile``: the model's forward under ``torch.compile``
    meanwhile (:func:`unmask.compiled.compiled`). ``constraint``: a
    :class:`~unmask.constraints.ConstraintSpec` (or one per row, None for a row without)
    each row's text must match, checked for every chunk before any pass
    (:func:`text_constraint`)."""
    require(isinstance(compile, bool), f"compile: must be True or False, got {compile!r}")
    ranges = _row_ranges(layout, batch_size, config.batch_invariant)
    cons = [None] * len(ranges)
    if constraint is not None:
        cons = [text_constraint(layout.model, *layout.batch(layout.encoded[lo:hi]),
                                _rows_of(constraint, lo, hi)) for lo, hi in ranges]
    with compiled(layout.model) if compile else contextlib.nullcontext():
        return _decode_chunks(layout, sampler, config, seed, ranges, cons)


def _rows_of(constraint, lo: int, hi: int):
    return constraint[lo:hi] if isinstance(constraint, (list, tuple)) else constraint


def text_constraint(model: MaskedModel, x: torch.Tensor, ends: TextEnds | None, constraint):
    """The :class:`~unmask.constraints.dfa.DFAConstraint` of a batch's rows ``x`` (a
    layout's batch, ``ends`` its :class:`TextEnds`) for ``model``: over the
    generated positions, padded by EOS (a prompt continued), or over the template's text
    positions, filling them exactly (a template fixes its length); prepared (compiled and
    checked: UnmaskError before any pass)."""
    from unmask.constraints.dfa import DFAConstraint

    require(ends is not None and getattr(model, "tokenizer", None) is not None,
            "constraint: constrains text; this model reads residues (no tokenizer)")
    pads = ends.no_eos[1] - ends.no_eos[0] < x.shape[1]  # infill bans EOS everywhere
    if pads:
        span = (torch.arange(x.shape[1]) >= ends.gen_start).expand_as(x)
    else:
        real = model.real_token_mask.clone()  # the template's text: not EOS, PAD, specials
        real[[*ends.eos_ids, *([model.pad_id] if model.pad_id is not None else [])]] = False
        span = (x == model.mask_id) | real[x]
    con = DFAConstraint(constraint, span, pad=pads)
    con.prepare(model, x.to(model.device))
    return con


def _decode_chunks(layout: Layout, sampler: Sampler, config: DecodeConfig, seed: int,
                   ranges: list[tuple[int, int]], cons: list) -> list[Generation]:
    encoded, model = layout.encoded, layout.model
    results: list[Generation] = []
    for (lo, hi), con in zip(ranges, cons, strict=True):
        x, ends = layout.batch(encoded[lo:hi])
        run = sampler if ends is None else ends.sampler(sampler)
        t0 = time.perf_counter()
        res = decode(model, x.to(model.device), run, config, seed=seed + lo,
                     hooks=[] if ends is None else ends.hooks(), constraint=con)
        out = layout.read(res, lo, ends, time.perf_counter() - t0)
        if con is not None:
            for r, gen in enumerate(out):
                gen.constraint = con.record(r, res.stats)
        results += out
    return results


def _row_ranges(layout: Layout, batch_size: int | None, batch_invariant: bool
                ) -> list[tuple[int, int]]:
    """(lo, hi) of the rows decoded together: ``batch_size`` at a time (default: all); with
    ``batch_invariant``, also cut where a row's input alone has another width, so that every
    row sits in its batch exactly as it sits alone (padded to a longer row, its pass would
    run other shapes: other roundings in bf16)."""
    n = len(layout.encoded)
    cuts = set(range(0, n, batch_size or max(n, 1)))
    if batch_invariant:
        widths = [layout.batch([ids])[0].shape[1] for ids in layout.encoded]
        cuts.update(i for i in range(1, n) if widths[i] != widths[i - 1])
    bounds = sorted(cuts | {n})
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def check_prompts(model: MaskedModel, tokenizer, encoded: list[list[int]], gen_length: int
                   ) -> None:
    """Refuse a prompt (token ids) that holds the mask token (generate never fills inside a
    prompt: that is :func:`unmask.infill.infill`) or leaves no room for ``gen_length``."""
    for i, ids in enumerate(encoded):
        require(model.mask_id not in ids,
                f"prompt {i}: holds the model's mask token "
                f"{_token_text(tokenizer, model.mask_id)!r}; generate only continues a "
                "prompt: fill masks inside a text with infill (unmask infill)")
        require(len(ids) + gen_length <= model.max_length,
                f"prompt {i}: {len(ids)} tokens + gen_length {gen_length} exceed the model's "
                f"max_length {model.max_length}")


def check_prompt_texts(prompts: list) -> None:
    """Refuse no prompt, a prompt that is not a string, or one that is not plain text."""
    require(len(prompts) > 0, "prompts: none given")
    require(all(isinstance(p, str) for p in prompts), "prompts: expected strings")
    for i, p in enumerate(prompts):
        problem = text_problem(p)
        require(problem is None, f"prompt {i}: holds {problem}")


def check_lengths(prompts: list, gen_length, block_length, batch_size, min_new_tokens
                   ) -> int:
    """Check :func:`generate`'s prompts and lengths (one line naming what is wrong); returns
    the block length."""
    check_prompt_texts(prompts)
    block = check_gen_lengths(gen_length, block_length, min_new_tokens)
    require(batch_size is None or (is_int(batch_size) and batch_size >= 1),
            f"batch_size: must be an integer >= 1, got {batch_size!r}")
    return block


def check_gen_lengths(gen_length, block_length, min_new_tokens) -> int:
    """Check the generated length, its blocks and ``min_new_tokens``; returns the block
    length."""
    require(is_int(gen_length) and gen_length >= 1,
            f"gen_length: must be an integer >= 1, got {gen_length!r}")
    block = gen_length if block_length is None else block_length
    require(is_int(block) and block >= 1,
            f"block_length: must be an integer >= 1, got {block!r}")
    require(gen_length % block == 0,
            f"block_length: {block} does not divide gen_length {gen_length}")
    require(is_int(min_new_tokens)
            and 0 <= min_new_tokens <= gen_length,
            f"min_new_tokens: must be an integer in [0, gen_length {gen_length}], got "
            f"{min_new_tokens!r}")
    return block


@dataclass(frozen=True)
class TextEnds:
    """How the rows of one batch of prompts end (plain data: it travels with a sweep's shards,
    :class:`unmask.bench.sweep.Run`). With ``stop_at_eos`` a row whose last finished block is
    all EOS fills the rest with EOS (:class:`StopAtEOS`); no position in ``no_eos`` can take
    an EOS id (:class:`NoEOSIn`).

    eos_ids: the model's EOS ids (none: neither applies); block: the block length;
    gen_start: the first generated position (the batch's prompt width);
    no_eos: (lo, hi), the row positions [lo, hi) where no EOS may be drawn (generate: its
    first ``min_new_tokens``; infill: every position, a template fixing its length).
    """

    eos_ids: tuple[int, ...]
    block: int
    gen_start: int
    no_eos: tuple[int, int] = (0, 0)
    stop_at_eos: bool = True

    def sampler(self, sampler: Sampler) -> Sampler:
        """``sampler``, wrapped to end rows at EOS where that applies."""
        if self.stop_at_eos and self.eos_ids and not sampler.evaluates_next_state:
            return StopAtEOS(sampler, self.eos_ids[0], self.block, self.gen_start)
        return sampler

    def hooks(self) -> list[Hook]:
        """The decode hooks of the batch."""
        lo, hi = self.no_eos
        return [NoEOSIn(self.eos_ids, lo, hi)] if self.eos_ids and hi > lo else []


def prompt_batch(model: MaskedModel, encoded: list[list[int]], block: int, gen_length: int, *,
                 stop_at_eos: bool = True, min_new_tokens: int = 0,
                 pad_to_multiple_of: int | None = None) -> tuple[torch.Tensor, TextEnds]:
    """The decode input of prompts ``encoded`` (token ids each; see :func:`_prompt_batch`)
    and how its rows end: (x (B, width + gen_length) long, :class:`TextEnds`). The prompt
    slots are the longest prompt, rounded up to a multiple of ``pad_to_multiple_of`` and of
    a block-causal model's block (which keeps its passes on the rows' prefixes)."""
    multiple = math.lcm(pad_to_multiple_of or 1, model.block_causal or 1)
    x, width = _prompt_batch(model, encoded, gen_length, getattr(model, "pad_id", None),
                             multiple)
    ends = TextEnds(tuple(getattr(model, "eos_ids", ())), block, width,
                    (width, width + min_new_tokens), stop_at_eos)
    return x, ends


def generations(res: DecodeResult, tokenizer, prompts: list[str], ends: TextEnds,
                wall: float) -> list[Generation]:
    """The :class:`Generation` s of one decoded batch of ``prompts`` (rows of ``res``);
    wall_s is the batch's ``wall``."""
    out = []
    gen_length = res.tokens.shape[1] - ends.gen_start
    # one read each, for every row
    gens, nfes, seqs = (t.tolist() for t in (res.tokens[:, ends.gen_start:], res.nfe,
                                             res.sequences))
    entropies = res.cumulative_entropy.tolist()
    for prompt, gen, nfe, seq, entropy in zip(prompts, gens, nfes, seqs, entropies,
                                              strict=True):
        cut = next((i for i, t in enumerate(gen) if t in ends.eos_ids), len(gen))
        out.append(Generation(
            prompt=prompt, text=tokenizer.decode(gen[:cut], skip_special_tokens=True,
                                                       clean_up_tokenization_spaces=False),
            token_ids=gen, nfe=nfe, sequences=seq,
            tokens_per_forward=gen_length / max(nfe, 1), wall_s=wall,
            cumulative_entropy=entropy))
    return out


def _token_text(tokenizer, token_id: int) -> str:
    """How ``tokenizer`` writes the id ``token_id`` (its id in brackets when it has none)."""
    try:
        text = tokenizer.convert_ids_to_tokens(int(token_id))
    except (AttributeError, IndexError, TypeError, ValueError):
        text = None
    return text if isinstance(text, str) else f"<id {token_id}>"
