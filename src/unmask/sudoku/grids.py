"""What every Sudoku helper takes as puzzles and grids, read in one place (:func:`as_grids`):
puzzle strings as the command line reads them (81 characters, digits 1-9 with 0 or . for
blanks), a list of them, or integers 0..9 (numpy, torch or lists) of shape (81,) or (B, 81),
0 for a blank. Anything else is refused in one line saying what is expected."""

from __future__ import annotations

import numpy as np

from unmask.errors import UnmaskError

#: what :func:`as_grids` reads, for refusals
EXPECTED = ("puzzle strings (81 cells: 1-9, with 0 or . for blanks) or integers 0..9 "
            "of shape (81,) or (B, 81)")


class SudokuParseError(UnmaskError):
    """A puzzle text is malformed, its clues contradict each other, or it has no solution."""


_CELL_VALUE = np.full(256, -1, dtype=np.int8)
_CELL_VALUE[ord("0")] = 0
_CELL_VALUE[ord(".")] = 0
for _d in range(1, 10):
    _CELL_VALUE[ord(str(_d))] = _d
del _d


def cell_name(index: int) -> str:
    """``row r, column c`` of cell ``index`` (0..80), 1-based."""
    return f"row {index // 9 + 1}, column {index % 9 + 1}"


def grid_from_cells(cells: str, context: str = "") -> np.ndarray:
    """(81,) int8 from exactly 81 cell characters; ``context`` prefixes error messages."""
    if len(cells) != 81:
        raise SudokuParseError(f"{context}expected 81 cells, got {len(cells)}")
    raw = cells.encode("utf-8", errors="replace")
    if len(raw) == 81:
        values = _CELL_VALUE[np.frombuffer(raw, dtype=np.uint8)]
        if (values >= 0).all():
            return values.copy()
    for i, ch in enumerate(cells):
        if not (ch.isascii() and _CELL_VALUE[ord(ch)] >= 0):
            raise SudokuParseError(
                f"{context}bad character {ch!r} at position {i + 1} ({cell_name(i)}); "
                "expected 1-9, 0 or '.'"
            )
    raise AssertionError("unreachable")


def as_grids(grids, name: str = "grids") -> tuple[np.ndarray, bool]:
    """(B, 81) int8 C-contiguous grids from ``grids`` (:data:`EXPECTED`), and whether one
    grid was given (a string, or shape (81,)); :class:`UnmaskError` naming ``name`` says what
    is expected otherwise."""
    if isinstance(grids, str):
        return grid_from_cells(grids.strip(), f"{name}: ")[None], True
    if isinstance(grids, (list, tuple)) and grids and all(isinstance(g, str) for g in grids):
        return np.stack([grid_from_cells(g.strip(), f"{name} {k}: ")
                         for k, g in enumerate(grids)]), False
    if hasattr(grids, "detach"):  # a torch tensor
        grids = grids.detach().cpu().numpy()
    try:
        arr = np.asarray(grids)
    except (TypeError, ValueError):
        arr = np.asarray(None)
    if arr.dtype.kind in "US" and arr.ndim <= 1 and arr.size:  # numpy strings
        return (as_grids(str(arr), name) if arr.ndim == 0
                else as_grids([str(a) for a in arr], name))
    if arr.dtype.kind not in "iub" or arr.ndim not in (1, 2) or arr.shape[-1] != 81:
        got = (f"shape {arr.shape}" if arr.dtype.kind in "iub"
               else f"{type(grids).__name__} of {arr.dtype}" if arr.dtype != object
               else type(grids).__name__)
        raise UnmaskError(f"{name}: expected {EXPECTED}, got {got}")
    if arr.size and (arr.min() < 0 or arr.max() > 9):
        raise UnmaskError(f"{name}: values must be 0 (blank) or digits 1..9")
    single = arr.ndim == 1
    return np.ascontiguousarray(arr[None] if single else arr, dtype=np.int8), single
