"""The model contract every decoder, MI prober and estimator relies on."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
from torch import nn

from unmask.errors import UnmaskError


def ordered_masked_pairs(masked: torch.Tensor) -> torch.Tensor:
    """(B, N, N) bool: the ordered pairs i != j of masked positions of ``masked`` (B, N), the
    pairs a conditional MI matrix is defined on."""
    n = masked.shape[1]
    return masked[:, :, None] & masked[:, None, :] & ~torch.eye(n, dtype=torch.bool,
                                                                 device=masked.device)


@dataclass
class ModelOutput:
    """One forward pass.

    logits: (B, N, V) over the whole vocabulary (MASK and special ids included); N counts the
        positions computed (every position of the rows, unless the model was asked for
        ``logits_positions``).
    hidden: (B, N, D) final hidden states (what the MI estimator reads).
    hidden_layers: optional tuple of (B, N, D), one per layer (index 0 = embeddings).
    attentions: optional tuple of (B, H, N, N) attention weights, one per applied attention
        layer (row i: how position i reads every j), for a model asked ``output_attentions``.
    log_probs: optional (B, N, V) ``real_log_probs`` of ``logits`` (:mod:`unmask.probs`),
        set by whoever ran the pass and computed them already (a verifier handing its pass
        to the loop), so the loop does not compute them again; None elsewhere.
    """

    logits: torch.Tensor
    hidden: torch.Tensor
    hidden_layers: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    log_probs: torch.Tensor | None = None

    def rows(self, index: torch.Tensor) -> ModelOutput:
        """The pass restricted to the rows ``index`` (a (R,) long index or (B,) bool mask)."""
        layers, att, lp = self.hidden_layers, self.attentions, self.log_probs
        return ModelOutput(logits=self.logits[index], hidden=self.hidden[index],
                           hidden_layers=None if layers is None else
                           tuple(h[index] for h in layers),
                           attentions=None if att is None else tuple(a[index] for a in att),
                           log_probs=None if lp is None else lp[index])

    def positions(self, lo: int, hi: int) -> ModelOutput:
        """The pass's logits and hidden states at the positions ``lo:hi`` of the rows only
        (the per-layer tensors are left as they are)."""
        if lo == 0 and hi == self.logits.shape[1]:
            return self
        lp = self.log_probs
        return ModelOutput(logits=self.logits[:, lo:hi], hidden=self.hidden[:, lo:hi],
                           hidden_layers=self.hidden_layers, attentions=self.attentions,
                           log_probs=None if lp is None else lp[:, lo:hi])

    def pick(self, evaluated: torch.Tensor, choice: torch.Tensor, *,
             all_chosen_evaluated: bool = False) -> ModelOutput:
        """One candidate's pass per row, from a batched call over candidates.

        ``self`` holds one sequence per True entry of ``evaluated`` (B, C), in row-major
        order; row b gets candidate ``choice[b]``'s sequence ((B,) long), and zeros where that
        candidate was not evaluated (a finished state: the row leaves the loop).
        ``all_chosen_evaluated``: the caller knows every chosen candidate was evaluated, so
        no row is zeroed (one pass over the outputs less).
        """
        b, c = evaluated.shape
        index = evaluated.flatten().long().cumsum(0).view(b, c) - 1
        pick = index.gather(1, choice[:, None]).squeeze(1).clamp(min=0)
        lacks = ~evaluated.gather(1, choice[:, None]).squeeze(1)  # (B,)

        def take(t: torch.Tensor) -> torch.Tensor:
            picked = t.index_select(0, pick)
            if all_chosen_evaluated:
                return picked
            return picked.masked_fill_(lacks.view(-1, *[1] * (t.dim() - 1)), 0.0)

        layers, att, lp = self.hidden_layers, self.attentions, self.log_probs
        return ModelOutput(logits=take(self.logits), hidden=take(self.hidden),
                           hidden_layers=None if layers is None else tuple(map(take, layers)),
                           attentions=None if att is None else tuple(map(take, att)),
                           log_probs=None if lp is None else take(lp))

    @staticmethod
    def cat(parts: list[ModelOutput]) -> ModelOutput:
        """The passes ``parts`` of consecutive rows, as one (with ``log_probs`` only where
        every part has them)."""
        if len(parts) == 1:
            return parts[0]
        layers, att = parts[0].hidden_layers, parts[0].attentions
        lps = [o.log_probs for o in parts]
        return ModelOutput(logits=torch.cat([o.logits for o in parts]),
                           hidden=torch.cat([o.hidden for o in parts]),
                           hidden_layers=None if layers is None else tuple(
                               torch.cat(h) for h in zip(*(o.hidden_layers for o in parts),
                                                         strict=True)),
                           attentions=None if att is None else tuple(
                               torch.cat(a) for a in zip(*(o.attentions for o in parts),
                                                         strict=True)),
                           log_probs=None if any(lp is None for lp in lps) else torch.cat(lps))


def weights_fingerprint(module: nn.Module, prefix: str = "") -> str:
    """A short hash (16 hex digits) of ``prefix`` and every tensor of ``module.state_dict()``
    (names and float64 values), so that a result can say which weights produced it."""
    h = hashlib.sha256()
    h.update(prefix.encode())
    for name, t in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().to("cpu", torch.float64).contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class ResidueAlphabet:
    """The one-letter residues a model reads as token ids ``0 .. len(letters) - 1``: its
    templates and outputs are residue strings (proteins), not text through a tokenizer.

    letters: the residues in id order; mask_id, pad_id: its MASK and PAD ids; what: what
    the letters are, in refusals ("the 20 standard amino acids ...").
    """

    letters: str
    mask_id: int
    pad_id: int
    what: str = "residues"


def check_padded_tokens(tokens, check_rest, residues: ResidueAlphabet) -> None:
    """Validate (B, N) residue tokens: ``residues``' PAD only as a suffix of each row,
    everything else checked by ``check_rest`` (the model's own check) with PAD read as MASK."""
    if isinstance(tokens, torch.Tensor) and tokens.dim() == 2 and tokens.numel():
        pad = tokens == residues.pad_id
        # a PAD followed by a non-PAD would put a residue after the sequence's end
        if bool((pad[:, :-1] & ~pad[:, 1:]).any()):
            raise UnmaskError("tokens: PAD must only follow the residues (a suffix of each row)")
        tokens = tokens.masked_fill(pad, residues.mask_id)
    check_rest(tokens)


class MaskedModel(nn.Module):
    """A masked diffusion model: tokens (B, N) long -> :class:`ModelOutput`.

    Subclasses set ``vocab_size``, ``mask_id``, ``max_length``, ``hidden_size`` and
    ``real_token_ids`` (the ids a sampler may ever emit) and implement ``forward``; the other
    attributes below have defaults a subclass overrides where they apply.
    """

    vocab_size: int
    mask_id: int
    max_length: int
    hidden_size: int
    real_token_ids: tuple[int, ...]
    #: the task the model reads (``"sudoku"``, ``"protein"``, ``"text"``, ...; None: not
    #: recorded)
    task: str | None = None
    #: the tokenizer of a text model (None elsewhere)
    tokenizer: object | None = None
    #: the residues of a model over residue strings (proteins; None elsewhere)
    residues: ResidueAlphabet | None = None
    #: the model reads rows of ``max_length`` positions only (the layout it was trained on:
    #: residue templates are padded to it), not rows of any length
    full_rows: bool = False
    #: the id that pads prompts to a batch, left out of attention (None: the model has none)
    pad_id: int | None = None
    #: the ids that end a text (none: the model has none)
    eos_ids: tuple[int, ...] = ()
    #: the model's precision: forward passes on the CPU run under bfloat16 autocast
    autocast_bf16: bool = False
    #: None: a position may read every position of the row. b: a position reads only the
    #: positions before the end of its block of b (blocks of b from position 0; 1: a causal
    #: model), so the outputs before a multiple of b do not depend on the tokens after it: the
    #: decode loop runs such a model on the rows up to the end of their current blocks only
    #: (for samplers that read eligible positions only, with blocks a multiple of b).
    block_causal: int | None = None

    def forward(  # pragma: no cover - abstract
        self, tokens: torch.Tensor, output_hidden_layers: bool = False
    ) -> ModelOutput:
        raise NotImplementedError

    @property
    def self_conditioning(self) -> bool:
        """True for a model whose ``forward`` also takes ``prev_probs`` (B, N, V), the
        distributions the previous pass predicted (the decode loop then passes them)."""
        return False

    @property
    def supports_attentions(self) -> bool:
        """True for a model whose ``forward`` also takes ``output_attentions`` and then fills
        :attr:`ModelOutput.attentions` (samplers that read attention weights need one)."""
        return False

    @property
    def supports_logits_positions(self) -> bool:
        """True for a model whose ``forward`` also takes ``logits_positions`` (a slice lo:hi)
        and then returns the logits and final hidden states of those positions only
        (:attr:`ModelOutput.logits` (B, hi - lo, V)); the decode loop asks for those of the
        current blocks when its sampler reads nothing else."""
        return False

    @property
    def supports_padded(self) -> bool:
        """True for a model with a :attr:`pad_id` whose ``forward`` also takes ``padded``:
        whether some row of the call's tokens holds ``pad_id``, when the caller knows it
        (None: the model reads it from the tokens, a host read)."""
        return False

    @property
    def real_token_mask(self) -> torch.Tensor:
        """(V,) bool on the CPU: True for ids a sampler may emit. Built once per
        ``real_token_ids`` and shared: do not modify it in place."""
        ids, cached = self.real_token_ids, self.__dict__.get("_real_token_mask")
        if cached is None or cached[0] is not ids or len(cached[1]) != self.vocab_size:
            mask = torch.zeros(self.vocab_size, dtype=torch.bool)
            mask[list(ids)] = True
            cached = self.__dict__["_real_token_mask"] = (ids, mask)
        return cached[1]

    @property
    def device(self) -> torch.device:
        for p in self.parameters():
            return p.device
        for b in self.buffers():
            return b.device
        return torch.device("cpu")

    def fingerprint(self) -> str:
        """A short hash of the weights and vocabulary, to tie labels/estimators to a model."""
        return weights_fingerprint(self, repr((self.vocab_size, self.mask_id,
                                               self.real_token_ids)))

    def check_tokens(self, tokens: torch.Tensor) -> None:
        """Raise :class:`UnmaskError` naming what is wrong with ``tokens`` (B, N)."""
        if not isinstance(tokens, torch.Tensor):
            raise UnmaskError(f"tokens: expected a torch.Tensor, got {type(tokens).__name__}")
        if tokens.dim() != 2:
            raise UnmaskError(f"tokens: expected shape (B, N), got {tuple(tokens.shape)}")
        if tokens.dtype != torch.long:
            raise UnmaskError(f"tokens: expected dtype torch.long, got {tokens.dtype}")
        if tokens.shape[1] > self.max_length:
            raise UnmaskError(
                f"tokens: length {tokens.shape[1]} exceeds the model's max_length {self.max_length}"
            )
        if tokens.numel():
            lo, hi = int(tokens.min()), int(tokens.max())
            if lo < 0 or hi >= self.vocab_size:
                bad = lo if lo < 0 else hi
                raise UnmaskError(
                    f"tokens: id {bad} is outside the vocabulary [0, {self.vocab_size})"
                )
            allowed = self.real_token_mask.clone()
            allowed[self.mask_id] = True
            if not bool(allowed.to(tokens.device)[tokens].all()):
                bad = int(tokens[~allowed.to(tokens.device)[tokens]][0])
                raise UnmaskError(f"tokens: id {bad} is neither a real token nor MASK")
