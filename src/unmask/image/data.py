"""The UCI 8x8 digits as token sequences for a class-conditional MDM.

A sequence is ``[class] + 64 pixels`` (row-major): the class token comes first and is always
given; pixels are grey levels quantised to ``levels`` values (tokens ``0 .. levels-1``). Class
tokens are ``levels .. levels+9`` and MASK is ``levels+10``. Only pixel tokens are *real*
tokens (``TransformerConfig.real_token_ids``), so the model never proposes a class token at a
pixel position.

The 1,797 images (scikit-learn's copy, 17 grey levels 0..16) are split by image into a
training and a held-out part with a fixed permutation.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from unmask.errors import UnmaskError, require
from unmask.models.transformer import MDMTransformer, TransformerConfig
from unmask.training.mdm import mask_batch
from unmask.validation import is_int

SIDE = 8
N_PIXELS = SIDE * SIDE
N_CLASSES = 10
SEQ_LEN = 1 + N_PIXELS
SOURCE_LEVELS = 17  # scikit-learn's digits take the values 0..16
DEFAULT_LEVELS = 9
TASK_PREFIX = "digits-"


def vocab(levels: int) -> tuple[int, int]:
    """(vocab_size, mask_id) for ``levels`` grey levels."""
    check_levels(levels)
    return levels + N_CLASSES + 1, levels + N_CLASSES


def check_levels(levels: int) -> None:
    require(is_int(levels) and 2 <= levels <= SOURCE_LEVELS,
            f"levels: must be an integer in [2, {SOURCE_LEVELS}], got {levels!r}")


def quantise(raw: np.ndarray | torch.Tensor, levels: int) -> torch.Tensor:
    """Grey values 0..16 (any shape) -> levels 0..levels-1 (long), rounding to the nearest."""
    check_levels(levels)
    raw = torch.tensor(np.asarray(raw), dtype=torch.float64)
    return torch.round(raw * (levels - 1) / (SOURCE_LEVELS - 1)).long()


def to_unit(pixels: torch.Tensor, levels: int) -> torch.Tensor:
    """Pixel levels (B, 64) -> float images (B, 8, 8) in [0, 1]."""
    return (pixels.float() / (levels - 1)).reshape(-1, SIDE, SIDE)


def encode(pixels: torch.Tensor, labels: torch.Tensor, levels: int) -> torch.Tensor:
    """(B, 64) pixel levels and (B,) classes -> (B, 65) tokens ``[class] + pixels``."""
    require(pixels.dim() == 2 and pixels.shape[1] == N_PIXELS,
            f"pixels: expected shape (B, {N_PIXELS}), got {tuple(pixels.shape)}")
    require(labels.shape == pixels.shape[:1], "labels: expected shape (B,)")
    require(bool(((pixels >= 0) & (pixels < levels)).all()),
            f"pixels: levels must lie in [0, {levels})")
    require(bool(((labels >= 0) & (labels < N_CLASSES)).all()),
            f"labels: classes must lie in [0, {N_CLASSES})")
    return torch.cat([(labels.long() + levels)[:, None], pixels.long()], dim=1)


def decode_tokens(tokens: torch.Tensor, levels: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, 65) tokens without MASK -> ((B, 64) pixel levels, (B,) classes)."""
    require(tokens.dim() == 2 and tokens.shape[1] == SEQ_LEN,
            f"tokens: expected shape (B, {SEQ_LEN}), got {tuple(tokens.shape)}")
    labels, pixels = tokens[:, 0] - levels, tokens[:, 1:]
    require(bool(((labels >= 0) & (labels < N_CLASSES)).all()),
            "tokens: position 0 must hold a class token")
    require(bool(((pixels >= 0) & (pixels < levels)).all()),
            f"tokens: pixels must be levels in [0, {levels}) (no MASK left)")
    return pixels, labels


def prompts(labels: torch.Tensor, levels: int) -> torch.Tensor:
    """(B, 65) decoding inputs: the class token given, every pixel MASK."""
    _, mask_id = vocab(levels)
    out = torch.full((len(labels), SEQ_LEN), mask_id, dtype=torch.long)
    out[:, 0] = labels.long() + levels
    return out


@dataclass
class DigitSplit:
    """One part of the digits: pixel levels (M, 64) long, classes (M,) long."""

    pixels: torch.Tensor
    labels: torch.Tensor
    levels: int

    def __len__(self) -> int:
        return len(self.labels)

    def tokens(self) -> torch.Tensor:
        return encode(self.pixels, self.labels, self.levels)

    def images(self) -> torch.Tensor:
        return to_unit(self.pixels, self.levels)


@functools.lru_cache(maxsize=1)
def read_digits() -> np.ndarray:
    """(1797, 65) int: 64 grey values 0..16 and the class, scikit-learn's copy of the UCI
    digits read from its data folder (importing scikit-learn itself takes seconds)."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise UnmaskError("digits: scikit-learn is not installed (it ships the data)")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets/data/digits.csv.gz"
    if not path.is_file():
        raise UnmaskError(f"digits: {path} is missing from the scikit-learn install")
    data = np.loadtxt(path, delimiter=",", dtype=np.int64)
    data.setflags(write=False)
    return data


def load_digits_split(levels: int = DEFAULT_LEVELS, heldout_fraction: float = 0.2,
                      seed: int = 0) -> tuple[DigitSplit, DigitSplit]:
    """(train, held-out) parts of the 1,797 digits, split by image with a permutation drawn
    from ``seed`` (the same split for every caller that passes the same seed)."""
    check_levels(levels)
    require(0.0 < heldout_fraction < 1.0,
            f"heldout_fraction: must be in (0, 1), got {heldout_fraction}")
    raw = read_digits()
    pixels = quantise(raw[:, :N_PIXELS], levels)
    labels = torch.tensor(raw[:, N_PIXELS], dtype=torch.long)
    order = torch.from_numpy(np.random.default_rng([seed, 8]).permutation(len(labels)))
    n_held = int(round(heldout_fraction * len(labels)))
    held, train = order[:n_held], order[n_held:]
    return (DigitSplit(pixels[train], labels[train], levels),
            DigitSplit(pixels[held], labels[held], levels))


def training_batch(train_tokens: torch.Tensor, step: int, batch_size: int, mask_id: int,
                   seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(inputs, targets, loss_mask), each (B, 65), a pure function of (seed, step): random
    training images, each pixel masked with a probability drawn uniformly in (0, 1] per
    image (at least one pixel masked); the class token is never masked."""
    rng = np.random.default_rng([seed, step])
    rows = torch.from_numpy(rng.integers(0, len(train_tokens), batch_size))
    targets = train_tokens[rows]
    ratio = 1.0 - rng.uniform(0.0, 1.0, (batch_size, 1))
    draw = np.pad(rng.uniform(0.0, 1.0, (batch_size, N_PIXELS)), ((0, 0), (1, 0)))
    pixels = np.arange(N_PIXELS + 1)[None, :] >= 1  # the class token (position 0) stays
    inputs, loss_mask = mask_batch(targets, ratio, draw, mask_id, np.broadcast_to(
        pixels, draw.shape))
    return inputs, targets, loss_mask


def image_model_config(levels: int = DEFAULT_LEVELS, **overrides) -> TransformerConfig:
    """The shipped digits architecture: 4 layers, d=96, learned positions over the 65 tokens
    (about 0.35M parameters)."""
    vocab_size, mask_id = vocab(levels)
    base = dict(vocab_size=vocab_size, mask_id=mask_id, max_length=SEQ_LEN,
                real_token_ids=list(range(levels)), d_model=96, n_layers=4, n_heads=4,
                d_ff=256, dropout=0.1, position="learned", task=f"{TASK_PREFIX}{levels}")
    base.update(overrides)
    return TransformerConfig(**base)


def levels_of(model: MDMTransformer) -> int:
    """The grey levels a digits model was trained on (from its config.task)."""
    task = getattr(getattr(model, "config", None), "task", "")
    if not task.startswith(TASK_PREFIX):
        raise UnmaskError(f"model: expected a digits image model, got task {task!r}")
    levels = int(task.removeprefix(TASK_PREFIX))
    check_levels(levels)
    return levels
