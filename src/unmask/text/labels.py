"""The text context task of MI labels (:mod:`unmask.mi.labels`): windows of a UTF-8 corpus in a
masked LM's tokens, random real tokens masked."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import torch

from unmask.errors import UnmaskError, require
from unmask.mi.labels import ContextTask, register_task
from unmask.models.auto import load_model
from unmask.models.base import MaskedModel
from unmask.validation import is_int

_TEXT_MASK_KEY = 0x7E47_3A5C


def read_corpus(path: str | os.PathLike) -> tuple[str, str]:
    """(text, sha256 of its bytes) of a UTF-8 corpus file; one line naming the first byte
    that is not UTF-8 text (a binary file, say)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise UnmaskError(f"text: cannot read {path} ({e.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UnmaskError(f"text: {path} is not UTF-8 text (byte {e.start}: "
                          f"0x{data[e.start]:02x})") from None
    nul = text.find("\x00")
    require(nul < 0, f"text: {path} is not text (a NUL character at offset {nul})")
    return text, hashlib.sha256(data).hexdigest()


def text_options(path: str | os.PathLike, length: int) -> dict:
    """Options of the text task: the corpus file ``path`` (absolute; its sha256 pins the
    contents; UTF-8 text) and the context ``length`` N in tokens, special tokens included."""
    p = Path(path)
    require(p.is_file(), f"text: {path} is not a file")
    require(is_int(length) and length >= 2, f"length: must be >= 2, got {length}")
    _, sha = read_corpus(p)
    return {"text": str(p.resolve()), "text_sha256": sha, "length": int(length)}


def _corpus_ids(model: MaskedModel, path: str, sha256: str) -> np.ndarray:
    """The corpus at ``path`` as the model's token ids (no special tokens), cached on the
    model; refused if its bytes no longer hash to ``sha256``."""
    cache = model.__dict__.setdefault("_text_corpora", {})
    key = (path, sha256)
    if key not in cache:
        text, sha = read_corpus(path)
        require(sha == sha256, f"text: {path} changed since these labels were started (sha256 "
                               "differs); use another --out")
        ids = model.tokenizer(text, add_special_tokens=False)["input_ids"]
        cache[key] = np.asarray(ids, dtype=np.int64)
    return cache[key]


def _special_wrap(tokenizer) -> tuple[list[int], list[int]]:
    """(ids before, ids after) a text's tokens when the tokenizer adds its special tokens
    ([CLS] and [SEP] for BERT), read off how it wraps its own mask token."""
    mark = tokenizer.mask_token
    if mark is None:
        return [], []
    inner = tokenizer(mark, add_special_tokens=False)["input_ids"]
    outer = tokenizer(mark, add_special_tokens=True)["input_ids"]
    for at in range(len(outer) - len(inner) + 1):
        if outer[at:at + len(inner)] == inner:
            return list(outer[:at]), list(outer[at + len(inner):])
    return [], []


def text_contexts(seed: int, start: int, count: int, mask_ratio: tuple[float, float], *,
                  model: MaskedModel, text: str, text_sha256: str, length: int
                  ) -> torch.Tensor:
    """(count, length) token rows of a masked LM: each a window of the corpus ``text``, at a
    start drawn from a generator keyed by (seed, context), wrapped in the tokenizer's special
    tokens ([CLS] ... [SEP] for BERT), with round(r * K) of its K real tokens masked (at least
    1), r uniform in [lo, hi)."""
    ids = _corpus_ids(model, text, text_sha256)
    before, after = _special_wrap(model.tokenizer)
    body = length - len(before) - len(after)
    require(body >= 1, f"length: {length} leaves no room beside the special tokens")
    require(length <= model.max_length,
            f"length: {length} exceeds the model's max_length {model.max_length}")
    require(len(ids) >= body,
            f"text: {text} holds {len(ids)} tokens, fewer than the {body} a context needs")
    real = model.real_token_mask
    lo, hi = mask_ratio
    rows = []
    for k in range(count):  # one small generator per context: contexts independent of shards
        rng = np.random.default_rng([_TEXT_MASK_KEY, int(seed), start + k])
        at = int(rng.integers(0, len(ids) - body + 1))
        row = torch.tensor(before + ids[at:at + body].tolist() + after, dtype=torch.long)
        ratio = lo + (hi - lo) * rng.random()
        candidates = np.flatnonzero(real[row].numpy())
        n_masked = min(len(candidates), max(1, round(ratio * len(candidates))))
        order = np.argsort(rng.random(len(candidates)), kind="stable")
        row[torch.from_numpy(candidates[order[:n_masked]])] = model.mask_id
        rows.append(row)
    return torch.stack(rows) if rows else torch.zeros(0, length, dtype=torch.long)


def _check_text_model(model: MaskedModel) -> None:
    require(getattr(model, "tokenizer", None) is not None and model.task == "text",
            "model: the text task needs a Hugging Face masked LM folder with its tokenizer")


def _load_text_model(name_or_path: str | None, trust_remote_code: bool = False
                     ) -> MaskedModel:
    require(name_or_path is not None, "model: the text task has no shipped model; give "
                                      "--model DIR (a Hugging Face masked LM folder)")
    return load_model(name_or_path, task="text", trust_remote_code=trust_remote_code)


LABEL_TASK = register_task(ContextTask(
    "text", text_contexts, _check_text_model, _load_text_model,
    "windows of a text corpus (--text FILE) in the model's tokens, random real tokens masked",
    options=("text", "text_sha256", "length")))
