"""Infilling: fill the masked positions inside templates with any model and any sampler.

A template is a text (for a text model) or a residue string (for a protein model: the shipped
protein MDM, ESM folders, AntiBERTy) in which a masked position is written ``<mask>``, or the
model's own mask token (``[MASK]``, ``<|mdm_mask|>``, ...), and ``<mask:N>`` stands for N of
them. Everything else is given context and never changes. ``"EVQLV<mask:5>GGLVQPGG"`` asks for
five residues between two given stretches; ``"The <mask> sat on the mat."`` for one token.
A template fixes its length: a text model never fills a masked position with an end-of-sequence
token there (open-ended continuation, which may stop early, is
:func:`~unmask.generate.generate`).

Templates decode through the path of :func:`unmask.generate.generate`
(:func:`~unmask.generate.decode_batches`): text templates are tokenised whole (with the
tokenizer's special tokens, e.g. BERT's ``[CLS] ... [SEP]``) and right-aligned in rows of whole
blocks, PAD before shorter ones, so blocks are counted back from each template's end; protein
templates are left-aligned with PAD after them (the protein models' layout), so blocks count
from the first residue. Blocks that hold no mask cost nothing.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable

import torch

from unmask.decode import DecodeConfig, DecodeResult
from unmask.errors import UnmaskError, require
from unmask.generate import (
    Generation,
    TextEnds,
    _with_steps,
    decode_batches,
    parse_sampler,
    prompt_batch,
)
from unmask.models.auto import load_model
from unmask.models.base import MaskedModel
from unmask.models.transformer import MDMTransformer
from unmask.protein.model import check_protein_model
from unmask.protein.tokens import AMINO_ACIDS, MASK_ID, PAD_ID
from unmask.samplers.base import Sampler
from unmask.validation import is_int, text_problem

#: ``<mask>`` or ``<mask:N>`` (what follows the colon is checked to be an integer >= 1)
MASK_MARK = re.compile(r"<mask(?::([^>]*))?>")
#: the count of ``<mask:N>``: ASCII digits only (``²`` and ``①`` are digits to Python)
_COUNT = re.compile(r"[0-9]+")
_RESIDUE = {a: i for i, a in enumerate(AMINO_ACIDS)}


def split_template(template: str, index: int = 0, limit: int | None = None
                   ) -> list[str | int]:
    """The pieces of ``template``: given text (str) and runs of masked positions (int, their
    count), in order; ``index`` names the template in errors, ``limit`` (the model's
    max_length) bounds the masked positions before anything is built."""
    require(isinstance(template, str), f"template {index}: expected a string, got "
                                       f"{type(template).__name__}")
    problem = text_problem(template)
    require(problem is None, f"template {index}: holds {problem}")
    pieces: list[str | int] = []
    at, total = 0, 0
    for m in MASK_MARK.finditer(template):
        count = m.group(1)
        n = 1 if count is None else int(count) if _COUNT.fullmatch(count.strip()) else 0
        require(n >= 1, f"template {index}: {m.group()!r}: the count after 'mask:' must be an "
                        "integer >= 1 (digits 0-9)")
        total += n
        require(limit is None or total <= limit,
                f"template {index}: {total} masked positions exceed the model's max_length "
                f"{limit}")
        pieces += [template[at:m.start()], n]
        at = m.end()
    pieces.append(template[at:])
    return [p for p in pieces if p != ""]


def is_protein_model(model: MaskedModel) -> bool:
    """True for a model over the protein vocabulary (20 residues, MASK 20, PAD 21)."""
    try:
        check_protein_model(model)
    except UnmaskError:
        return False
    return True


def encode_residues(template: str, index: int = 0, limit: int | None = None) -> list[int]:
    """The protein ids of a residue template (MASK where masked; ``limit``: as
    :func:`split_template`)."""
    ids: list[int] = []
    for piece in split_template(template, index, limit):
        if isinstance(piece, int):
            ids += [MASK_ID] * piece
            continue
        for ch in piece:
            require(ch in _RESIDUE, f"template {index}: {ch!r} at position {len(ids)} is not "
                                    "one of the 20 standard amino acids (upper case) or <mask>")
            ids.append(_RESIDUE[ch])
    return ids


def encode_text(tokenizer, template: str, index: int = 0, limit: int | None = None
                ) -> list[int]:
    """The token ids of a text template: each ``<mask>`` / ``<mask:N>`` written as the
    tokenizer's mask token, the whole tokenised once (special tokens added; ``limit``: as
    :func:`split_template`)."""
    mask = getattr(tokenizer, "mask_token", None)
    require(isinstance(mask, str), "tokenizer: it has no mask token")
    pieces = split_template(template, index, limit)
    text = "".join(p if isinstance(p, str) else mask * p for p in pieces)
    ids = [int(i) for i in tokenizer(text)["input_ids"]]
    unk = tokenizer.unk_token_id
    if unk is not None and unk in ids and tokenizer.unk_token not in text:
        raise UnmaskError(f"template {index}: the tokenizer reads part of it as "
                          f"{tokenizer.unk_token} (outside the model's vocabulary): "
                          f"{_unknown_part(tokenizer, text)!r}")
    return ids


def _unknown_part(tokenizer, text: str) -> str:
    """The first stretch of ``text`` that ``tokenizer`` reads as its unknown token."""
    try:
        enc = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    except (NotImplementedError, TypeError, ValueError):
        return text[:40]
    for tid, (a, b) in zip(enc["input_ids"], enc["offset_mapping"], strict=True):
        if tid == tokenizer.unk_token_id:
            return text[a:b]
    return text[:40]


def infill(model: MaskedModel | str, templates: str | list[str], *, tokenizer=None,
           sampler: str | Sampler = "confidence", block_length: int | None = None,
           steps: int | None = None, temperature: float = 0.0, seed: int = 0,
           batch_size: int | None = None, confidence: str = "draw") -> list[Generation]:
    """Fill the masked positions of each template (see the module docstring for the syntax).

    Args:
        model: a :class:`MaskedModel` or a name/folder for :func:`~unmask.models.auto.load_model`
            (``antiberty``, ``protein``, ``text``, a transformers or ESM folder).
        templates: one template or a list.
        tokenizer: a text model's tokenizer (default: ``model.tokenizer``); protein models
            read residue strings and need none.
        sampler: a :class:`Sampler` or a spec (as :func:`~unmask.generate.generate`).
        block_length: decode in blocks of this many row positions, left to right (protein
            templates: from the first residue; text: counted back from the template's end).
        steps: steps per block that holds masks (count samplers only).
        temperature, seed, batch_size, confidence: as :func:`~unmask.generate.generate`
            (template i decodes with seed ``seed + i``).
    Returns:
        one :class:`~unmask.generate.Generation` per template: ``prompt`` the template,
        ``text`` the whole filled sequence (special tokens dropped), ``token_ids`` its ids,
        ``tokens_per_forward`` the masked positions over the passes.
    """
    plan = plan_infill(model, templates, tokenizer=tokenizer, block_length=block_length,
                       batch_size=batch_size)
    require(is_int(seed), f"seed: must be an integer, got {seed!r}")
    sampler = _with_steps(parse_sampler(sampler), steps, 1)
    config = DecodeConfig(temperature=temperature, block_size=block_length,
                          confidence=confidence)
    return decode_batches(plan.model, plan.encoded, sampler, config, seed=seed,
                          batch_size=batch_size, batch=plan.batch, read=plan.read)


@dataclasses.dataclass
class InfillPlan:
    """Templates ready to decode, for callers that run the decodes themselves (a bench on an
    engine, :mod:`unmask.bench.sweep`); :func:`infill` is ``decode_batches`` over it.

    Attributes:
        model: the model the templates were encoded for.
        templates: the templates, in order.
        encoded: each template's token ids (MASK where to fill).
        batch: chunk of ``encoded`` -> its decode input: x (R, W) long and how its rows end
            (:class:`~unmask.generate.TextEnds` for text models: pass it as a sweep run's
            ``extras``; None for residue templates).
        batch_size: templates per chunk (None: all at once).
    """

    model: MaskedModel
    templates: list[str]
    encoded: list[list[int]]
    batch: Callable[[list[list[int]]], tuple[torch.Tensor, TextEnds | None]]
    batch_size: int | None
    to_text: Callable[[list[int]], str]
    protein: bool

    def chunks(self) -> list[tuple[int, torch.Tensor, TextEnds | None]]:
        """(index of the chunk's first template, x (R, W), ends) per chunk, in order: the
        decode inputs :func:`infill` decodes, template ``lo + r`` with seed ``seed + lo + r``."""
        size = self.batch_size or len(self.encoded)
        return [(lo, *self.batch(self.encoded[lo:lo + size]))
                for lo in range(0, len(self.encoded), size)]

    def read(self, res: DecodeResult, lo: int, ends: TextEnds | None, wall: float
             ) -> list[Generation]:
        """The :class:`~unmask.generate.Generation` s of the decoded chunk that starts at
        template ``lo`` (``wall``: its seconds)."""
        hi = lo + len(res.tokens)
        return _filled(res, self.templates[lo:hi], self.encoded[lo:hi], self.to_text,
                       self.protein, self.model.mask_id, wall)


def plan_infill(model: MaskedModel | str, templates: str | list[str], *, tokenizer=None,
                block_length: int | None = None, batch_size: int | None = None
                ) -> InfillPlan:
    """The :class:`InfillPlan` of ``templates`` for ``model`` (arguments as :func:`infill`);
    one line naming what is wrong with a template or an argument."""
    if isinstance(model, (str, os.PathLike)):
        model = load_model(model)
    require(isinstance(model, MaskedModel), f"model: expected a MaskedModel or a name, got "
                                            f"{type(model).__name__}")
    templates = [templates] if isinstance(templates, str) else templates
    require(isinstance(templates, (list, tuple)) and len(templates) > 0,
            "templates: expected a template string or a non-empty list of them")
    encoded, to_text = _encoder(model, tokenizer)(list(templates))
    require(block_length is None or (is_int(block_length) and block_length >= 1),
            f"block_length: must be an integer >= 1, got {block_length!r}")
    require(batch_size is None or (is_int(batch_size) and batch_size >= 1),
            f"batch_size: must be an integer >= 1, got {batch_size!r}")
    protein = _reads_residues(model, tokenizer)
    batch = (_protein_batch if protein else _text_batch)(model, block_length)
    return InfillPlan(model, list(templates), encoded, batch, batch_size, to_text, protein)


def _reads_residues(model: MaskedModel, tokenizer) -> bool:
    """True when templates are residue strings in our protein ids (a protein model without a
    tokenizer of its own)."""
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    return tokenizer is None and is_protein_model(model)


def _encoder(model: MaskedModel, tokenizer):
    """templates -> (their ids, ids -> text) for ``model``: residue strings for a protein
    model without a tokenizer, else the text tokenizer's."""
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if _reads_residues(model, tokenizer):
        def encode(i, t):
            return encode_residues(t, i, model.max_length)

        def to_text(ids):
            return "".join(AMINO_ACIDS[i] for i in ids)
    else:
        require(tokenizer is not None, "model: infill reads templates through the model's "
                                       "tokenizer or as residues of a protein model; this "
                                       "model has neither")

        def encode(i, t):
            return encode_text(tokenizer, t, i, model.max_length)

        def to_text(ids):
            return tokenizer.decode(ids, skip_special_tokens=True,
                                    clean_up_tokenization_spaces=False)

    def encode_all(templates: list[str]) -> tuple[list[list[int]], object]:
        encoded = [encode(i, t) for i, t in enumerate(templates)]
        for i, ids in enumerate(encoded):
            require(model.mask_id in ids, f"template {i}: holds no <mask>; nothing to fill")
            require(len(ids) <= model.max_length,
                    f"template {i}: {len(ids)} tokens exceed the model's max_length "
                    f"{model.max_length}")
        return encoded, to_text

    return encode_all


def _text_batch(model: MaskedModel, block: int | None):
    """chunk -> the decode input of text templates: right-aligned in whole blocks (one block
    of the longest template by default), PAD before shorter ones; no row ends early and no
    masked position takes an EOS id (a template fixes its length)."""
    def batch(chunk: list[list[int]]) -> tuple[torch.Tensor, TextEnds]:
        x, ends = prompt_batch(model, chunk, block or max(map(len, chunk)), 0,
                               stop_at_eos=False)
        return x, dataclasses.replace(ends, gen_start=0, min_new_tokens=x.shape[1])

    return batch


def _protein_batch(model: MaskedModel, block: int | None):
    """chunk -> the decode input of residue templates: left-aligned, PAD after them, in rows
    of the model's max_length for our transformer (the layout it is trained on), else of the
    longest template rounded up to whole blocks."""
    def batch(chunk: list[list[int]]) -> tuple[torch.Tensor, None]:
        longest = max(map(len, chunk))
        width = (model.max_length if isinstance(model, MDMTransformer)
                 else math.ceil(longest / (block or longest)) * (block or longest))
        require(width <= model.max_length and width % (block or width) == 0,
                f"block_length: {block} does not fit the model's rows ({width} positions, "
                f"max_length {model.max_length}); give one that divides {width}")
        x = torch.full((len(chunk), width), PAD_ID, dtype=torch.long)
        for r, ids in enumerate(chunk):
            x[r, :len(ids)] = torch.tensor(ids, dtype=torch.long)
        return x, None

    return batch


def _filled(res: DecodeResult, templates: list[str], encoded: list[list[int]], to_text,
            protein: bool, mask_id: int, wall: float) -> list[Generation]:
    """The :class:`Generation` s of one decoded chunk of templates."""
    out = []
    width = res.tokens.shape[1]
    for r, (template, ids) in enumerate(zip(templates, encoded, strict=True)):
        span = res.tokens[r, :len(ids)] if protein else res.tokens[r, width - len(ids):]
        span = span.tolist()
        nfe = int(res.nfe[r])
        out.append(Generation(
            prompt=template, text=to_text(span), token_ids=span, nfe=nfe,
            sequences=int(res.sequences[r]), tokens_per_forward=ids.count(mask_id) / max(nfe, 1),
            wall_s=wall, cumulative_entropy=float(res.cumulative_entropy[r])))
    return out


__all__ = ["MASK_MARK", "InfillPlan", "encode_residues", "encode_text", "infill",
           "is_protein_model", "plan_infill", "split_template"]
