"""One error type for bad input, so the CLI can print it as one line and exit 2."""

import numbers

import numpy as np


class UnmaskError(ValueError):
    """Invalid input or configuration; the message names the offending field."""


def require(condition: bool, message: str) -> None:
    """Raise :class:`UnmaskError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise UnmaskError(message)


def is_int(value) -> bool:
    """An integer (numpy's too) that is not a bool (``True`` is an int to Python, never a
    count here)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
