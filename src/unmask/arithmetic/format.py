"""Fixed-width multiplication sequences ``a*b=c`` and their tokens.

Every field is zero-padded to a fixed width, so each position always means the same thing:
with a 2-digit and a 1-digit factor, ``07*8=056`` is 8 tokens. Digits d are tokens d (0-9),
``*`` is 10, ``=`` is 11, MASK is 12.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from unmask.errors import require
from unmask.validation import is_int

STAR_ID = 10
EQUALS_ID = 11
MASK_ID = 12
VOCAB_SIZE = 13
_CHARS = "0123456789*=?"


@dataclass(frozen=True)
class EquationFormat:
    """Layout of ``a*b=c``: ``a_digits`` and ``b_digits`` wide factors, an
    ``a_digits + b_digits`` wide product (wide enough for any product)."""

    a_digits: int = 2
    b_digits: int = 1

    def __post_init__(self):
        for name in ("a_digits", "b_digits"):
            value = getattr(self, name)
            require(is_int(value) and 1 <= value <= 6,
                    f"{name}: must be an integer in [1, 6], got {value}")

    @property
    def c_digits(self) -> int:
        return self.a_digits + self.b_digits

    @property
    def length(self) -> int:
        return self.a_digits + self.b_digits + self.c_digits + 2

    @property
    def star(self) -> int:
        """Position of ``*``."""
        return self.a_digits

    @property
    def equals(self) -> int:
        """Position of ``=``."""
        return self.a_digits + 1 + self.b_digits

    def field(self, name: str) -> slice:
        """Positions of field 'a', 'b' or 'c'."""
        start = {"a": 0, "b": self.star + 1, "c": self.equals + 1}[name]
        width = {"a": self.a_digits, "b": self.b_digits, "c": self.c_digits}[name]
        return slice(start, start + width)

    def field_mask(self, *names: str) -> torch.Tensor:
        """(L,) bool: True on the positions of the named fields ('a', 'b', 'c', '*', '=')."""
        mask = torch.zeros(self.length, dtype=torch.bool)
        for name in names:
            if name == "*":
                mask[self.star] = True
            elif name == "=":
                mask[self.equals] = True
            else:
                mask[self.field(name)] = True
        return mask

    def encode(self, a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> torch.Tensor:
        """(M, L) tokens of the true equations a*b=c for factor arrays a, b (M,)."""
        a = torch.as_tensor(np.asarray(a), dtype=torch.long)
        b = torch.as_tensor(np.asarray(b), dtype=torch.long)
        require(bool((a >= 0).all() and (a < 10**self.a_digits).all()),
                f"a: factors must lie in [0, {10**self.a_digits})")
        require(bool((b >= 0).all() and (b < 10**self.b_digits).all()),
                f"b: factors must lie in [0, {10**self.b_digits})")
        out = torch.empty(len(a), self.length, dtype=torch.long)
        out[:, self.field("a")] = _digits(a, self.a_digits)
        out[:, self.star] = STAR_ID
        out[:, self.field("b")] = _digits(b, self.b_digits)
        out[:, self.equals] = EQUALS_ID
        out[:, self.field("c")] = _digits(a * b, self.c_digits)
        return out

    def well_formed(self, tokens: torch.Tensor) -> torch.Tensor:
        """(M,) bool: digits in the three fields, ``*`` and ``=`` in place."""
        digit = tokens <= 9
        ops = self.field_mask("*", "=")
        return (digit[:, ~ops].all(1) & (tokens[:, self.star] == STAR_ID)
                & (tokens[:, self.equals] == EQUALS_ID))

    def values(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(a, b, c), each (M,) long, read from the digit fields (meaningful if well formed)."""
        return tuple(_number(tokens[:, self.field(f)]) for f in ("a", "b", "c"))

    def correct(self, tokens: torch.Tensor) -> torch.Tensor:
        """(M,) bool: well formed and a * b == c."""
        a, b, c = self.values(tokens)
        return self.well_formed(tokens) & (a * b == c)

    def to_text(self, tokens: torch.Tensor) -> list[str]:
        """Render (M, L) tokens as strings; MASK shows as '?'."""
        return ["".join(_CHARS[int(t)] for t in row) for row in tokens]


def _digits(x: torch.Tensor, width: int) -> torch.Tensor:
    """(M, width) most-significant-first decimal digits of x (M,)."""
    powers = 10 ** torch.arange(width - 1, -1, -1)
    return (x[:, None] // powers) % 10


def _number(digits: torch.Tensor) -> torch.Tensor:
    """(M,) value of (M, width) digit tokens (non-digit tokens read as garbage, check first)."""
    powers = 10 ** torch.arange(digits.shape[1] - 1, -1, -1)
    return (digits.clamp(max=9) * powers).sum(1)
