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
tokenizer's special tokens, e.g. BERT's ``[CLS] ... [SEP]``) and right-aligned, PAD before
shorter ones, and the loop counts blocks back from each row's end (the template's); protein
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

from unmask.decode import DecodeResult
from unmask.errors import UnmaskError, require
from unmask.generate import Generation, TextEnds, decode_batches, prompt_batch, text_request
from unmask.models.auto import load_model
from unmask.models.base import MaskedModel, ResidueAlphabet
from unmask.request import DecodeRequest
from unmask.validation import is_int, text_problem

#: ``<mask>`` or ``<mask:N>`` (what follows the colon is checked to be an integer >= 1)
MASK_MARK = re.compile(r"<mask(?::([^>]*))?>")
#: the count of ``<mask:N>``: ASCII digits only (``²`` and ``①`` are digits to Python), with
#: spaces or tabs around them (not other characters Python calls whitespace, such as \x1f)
_COUNT = re.compile(r"[ \t]*[0-9]+[ \t]*")


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
        n = 1 if count is None else int(count) if _COUNT.fullmatch(count) else 0
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


def reads_residues(model: MaskedModel, tokenizer=None) -> bool:
    """True when ``model``'s templates are residue strings (:attr:`MaskedModel.residues`: a
    protein model) rather than text through a tokenizer (``tokenizer`` or its own)."""
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    return tokenizer is None and getattr(model, "residues", None) is not None


def encode_residues(template: str, residues: ResidueAlphabet, index: int = 0,
                    limit: int | None = None) -> list[int]:
    """The ids of a residue template in ``residues`` (its MASK where masked; ``limit``: as
    :func:`split_template`)."""
    ids: list[int] = []
    for piece in split_template(template, index, limit):
        if isinstance(piece, int):
            ids += [residues.mask_id] * piece
            continue
        for ch in piece:
            k = residues.letters.find(ch) if len(ch) == 1 else -1
            require(k >= 0, f"template {index}: {ch!r} at position {len(ids)} is not one of "
                            f"the {len(residues.letters)} {residues.what} or <mask>")
            ids.append(k)
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
    written = text.count(tokenizer.unk_token) if tokenizer.unk_token else 0
    if unk is not None and ids.count(unk) > written:  # more than the template writes
        raise UnmaskError(f"template {index}: the tokenizer reads part of it as "
                          f"{tokenizer.unk_token} (outside the model's vocabulary): "
                          f"{_unknown_part(tokenizer, text)!r}")
    return ids


def context_change(tokenizer, template: str) -> tuple[str, str] | None:
    """(a word of ``template``'s given text, the word the tokenizer reads instead), or None
    when its normaliser keeps every word (an uncased tokenizer lower-cases and drops accents:
    ``'Sät'`` is read as ``'sat'``, and the filled text shows the context so)."""
    normalizer = getattr(getattr(tokenizer, "backend_tokenizer", None), "normalizer", None)
    if normalizer is None:
        return None
    for piece in split_template(template):
        if isinstance(piece, int):
            continue
        for word, read in zip(piece.split(), normalizer.normalize_str(piece).split(),
                              strict=False):
            if word != read:
                return word, read
    return None


def _unknown_part(tokenizer, text: str) -> str:
    """The first stretch of ``text`` that ``tokenizer`` reads as its unknown token."""
    try:
        enc = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    except (NotImplementedError, TypeError, ValueError):
        return text[:40]
    for tid, (a, b) in zip(enc["input_ids"], enc["offset_mapping"], strict=True):
        if tid == tokenizer.unk_token_id and text[a:b] != tokenizer.unk_token:
            return text[a:b]
    return text[:40]


def infill(model: MaskedModel | str, templates: str | list[str], *, tokenizer=None,
           request: DecodeRequest | None = None, **settings) -> list[Generation]:
    """Fill the masked positions of each template (see the module docstring for the syntax).

    Args:
        model: a :class:`MaskedModel` or a name/folder for :func:`~unmask.models.auto.load_model`
            (``antiberty``, ``protein``, ``text``, a transformers or ESM folder).
        templates: one template or a list.
        tokenizer: a text model's tokenizer (default: ``model.tokenizer``); protein models
            read residue strings and need none.
        request: the :class:`~unmask.request.DecodeRequest` (template i decodes with seed
            ``request.seed + i``). Its ``block_length`` decodes in blocks of this many row
            positions, left to right (protein templates: from the first residue; text:
            counted back from the template's end); ``steps`` is per block that holds masks.
            A template fixes its length: the settings of a continuation (``gen_length``,
            ``min_new_tokens``, ``chat_template``, ``cache_kv``, ``pad_to_multiple_of``) are
            refused.
        **settings: instead of ``request``, its settings by name.
    Returns:
        one :class:`~unmask.generate.Generation` per template: ``prompt`` the template,
        ``text`` the whole filled sequence (special tokens dropped), ``token_ids`` its ids,
        ``tokens_per_forward`` the masked positions over the passes.
    """
    request = text_request(request, settings)
    for name in INFILL_REFUSES:
        value = getattr(request, name)
        require(value == getattr(DecodeRequest, name),
                f"{name}: infill fills a template's masks and takes no {name} (got {value!r})")
    plan = plan_infill(model, templates, tokenizer=tokenizer,
                       block_length=request.block_length, batch_size=request.batch_size)
    return decode_batches(plan, request.build_sampler(1),
                          request.decode_config(request.block_length), seed=request.seed,
                          batch_size=request.batch_size, compile=request.compile,
                          constraint=request.constraint)


#: the request settings of a continuation, which a template (fixing its length) leaves unset
INFILL_REFUSES = ("gen_length", "min_new_tokens", "chat_template", "cache_kv",
                  "pad_to_multiple_of")


@dataclasses.dataclass
class InfillPlan:
    """Templates ready to decode (:func:`infill`'s :class:`~unmask.generate.Layout`), also for
    callers that run the decodes themselves (a bench on an engine, :mod:`unmask.bench.sweep`);
    :func:`infill` is :func:`~unmask.generate.decode_batches` over it.

    Text templates are right-aligned, PAD before shorter ones (blocks count back from their
    end), and no position of a row may take an EOS id (a template fixes its length); residue
    templates are left-aligned, the model's PAD after them.

    Attributes:
        model: the model the templates were encoded for.
        templates: the templates, in order.
        encoded: each template's token ids (MASK where to fill).
        block_length: decode in blocks of this many positions (None: one block).
        batch_size: templates per chunk (None: all at once).
        to_text: token ids -> text (residues, or the tokenizer's decoding).
        protein: the templates are residue strings (:func:`reads_residues`).
    """

    model: MaskedModel
    templates: list[str]
    encoded: list[list[int]]
    block_length: int | None
    batch_size: int | None
    to_text: Callable[[list[int]], str]
    protein: bool

    def batch(self, chunk: list[list[int]]) -> tuple[torch.Tensor, TextEnds | None]:
        """A chunk's decode input: x (R, W) long and how its rows end
        (:class:`~unmask.generate.TextEnds` for text templates: pass it as a sweep run's
        ``extras``; None for residue templates)."""
        fill = _residue_batch if self.protein else _text_batch
        return fill(self.model, self.block_length, chunk)

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
    return InfillPlan(model, list(templates), encoded, block_length, batch_size, to_text,
                      reads_residues(model, tokenizer))


def _encoder(model: MaskedModel, tokenizer):
    """templates -> (their ids, ids -> text) for ``model``: residue strings for a protein
    model without a tokenizer, else the text tokenizer's."""
    require(tokenizer is None or callable(tokenizer), f"tokenizer: expected a transformers "
                                                      f"tokenizer, got {type(tokenizer).__name__}")
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if reads_residues(model, tokenizer):
        residues = model.residues

        def encode(i, t):
            return encode_residues(t, residues, i, model.max_length)

        def to_text(ids):
            return "".join(residues.letters[i] for i in ids)
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


def _text_batch(model: MaskedModel, block: int | None, chunk: list[list[int]]
                ) -> tuple[torch.Tensor, TextEnds]:
    """The decode input of text templates: right-aligned, PAD before shorter ones (blocks
    count back from the end; one block of the longest template by default); no row ends early
    and no position takes an EOS id (a template fixes its length)."""
    x, ends = prompt_batch(model, chunk, block or max(map(len, chunk)), 0, stop_at_eos=False)
    return x, dataclasses.replace(ends, no_eos=(0, x.shape[1]))


def _residue_batch(model: MaskedModel, block: int | None, chunk: list[list[int]]
                   ) -> tuple[torch.Tensor, None]:
    """The decode input of residue templates: left-aligned, the model's PAD after them, in
    rows of the model's max_length for a model that reads only those
    (:attr:`~unmask.models.base.MaskedModel.full_rows`), else of the longest template rounded
    up to whole blocks."""
    longest = max(map(len, chunk))
    width = (model.max_length if model.full_rows
             else math.ceil(longest / (block or longest)) * (block or longest))
    require(width <= model.max_length and width % (block or width) == 0,
            f"block_length: {block} does not fit the model's rows ({width} positions, "
            f"max_length {model.max_length}); give one that divides {width}")
    x = torch.full((len(chunk), width), model.residues.pad_id, dtype=torch.long)
    for r, ids in enumerate(chunk):
        x[r, :len(ids)] = torch.tensor(ids, dtype=torch.long)
    return x, None


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


__all__ = ["MASK_MARK", "InfillPlan", "context_change", "encode_residues", "encode_text", "infill",
           "plan_infill", "reads_residues", "split_template"]
