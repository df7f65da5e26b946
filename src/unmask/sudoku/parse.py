"""Reading and writing Sudoku puzzles as text.

Accepted forms:

* one line of 81 cells: digits 1-9, ``0`` or ``.`` for a blank;
* one line ``<puzzle> <solution>`` of two such fields (the test-set files' form): the puzzle
  is read, and the solution must be a complete valid grid that keeps its clues;
* a grid of 9 lines of 9 cells, optionally separated by spaces or ``|``, with separator lines
  made of ``-``, ``+``, ``=``, ``|`` and spaces skipped;
* files or texts with several puzzles, either form, where blank lines and lines starting with
  ``#`` are skipped.

Files are UTF-8 text (a leading byte-order mark is dropped; CRLF or LF line ends); the path
``-`` reads standard input. Errors in a file name the file and the line.

Errors raise :class:`SudokuParseError` (a ``ValueError``) with a one-line message.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from unmask.errors import UnmaskError
from unmask.sudoku.grids import SudokuParseError, as_grids, cell_name, grid_from_cells
from unmask.sudoku.solver import UNITS, count_solutions

_ROW_SEPARATORS = str.maketrans("", "", " \t|")
_SEPARATOR_LINE_CHARS = set("-+=| \t")


def _where(index: int) -> str:
    return cell_name(index)


def _is_separator_line(line: str) -> bool:
    return bool(line) and set(line) <= _SEPARATOR_LINE_CHARS


def _unit_name(u: int) -> str:
    kind = ("row", "column", "box")[u // 9]
    return f"{kind} {u % 9 + 1}"


def check_clues(grid, context: str = "", what: str = "clues contradict") -> None:
    """Raise SudokuParseError if two equal digits share a row, column or box of grid (81,)
    (:func:`unmask.sudoku.grids.as_grids`: a puzzle string too); ``what`` opens the message
    after ``context``."""
    g = as_grids(grid, "grid")[0][0]
    for u, cells in enumerate(UNITS):
        values = g[cells]
        for d in range(1, 10):
            where = np.flatnonzero(values == d)
            if len(where) > 1:
                a, b = (int(cells[k]) for k in where[:2])
                raise SudokuParseError(
                    f"{context}{what}: digit {d} appears twice in {_unit_name(u)} "
                    f"(at {_where(a)} and {_where(b)})"
                )


def _check_solvable(grids: np.ndarray, contexts: list[str]) -> None:
    for i, g in enumerate(grids):
        check_clues(g, contexts[i])
    counts = count_solutions(grids, limit=1)
    for i in np.flatnonzero(counts == 0):
        raise SudokuParseError(f"{contexts[i]}puzzle has no solution")


def _grid_rows(lines: list[tuple[int, str]]) -> np.ndarray:
    """(81,) from 9 (line number, text) rows; separators already skipped."""
    cells = []
    for lineno, line in lines:
        row = line.translate(_ROW_SEPARATORS)
        if len(row) != 9:
            raise SudokuParseError(f"line {lineno}: expected 9 cells in a grid row, got {len(row)}")
        cells.append(row)
    return grid_from_cells("".join(cells), f"line {lines[0][0]}: ")


def puzzle_and_solution(fields: list[str], context: str = "") -> tuple[np.ndarray, np.ndarray]:
    """(puzzle, solution), each (81,), of the two fields of a ``<puzzle> <solution>`` line,
    after checking that the solution is complete, follows the rules and keeps every clue."""
    puzzle = grid_from_cells(fields[0], context)
    solution = grid_from_cells(fields[1], f"{context}solution: ")
    if (solution == 0).any():
        i = int(np.flatnonzero(solution == 0)[0])
        raise SudokuParseError(f"{context}solution: blank at {_where(i)}")
    clash = np.flatnonzero((puzzle > 0) & (puzzle != solution))
    if len(clash):
        i = int(clash[0])
        raise SudokuParseError(f"{context}solution has {solution[i]} at {_where(i)}, where the "
                               f"puzzle's clue is {puzzle[i]}")
    check_clues(solution, context, "solution breaks the rules")
    return puzzle, solution


def _require_text(text) -> None:
    if not isinstance(text, str):
        raise SudokuParseError("text: expected a puzzle string (81 cells: 1-9, with 0 or . for "
                               f"blanks, or 9 lines of 9), got {type(text).__name__}")


def parse_puzzles(text: str, check: bool = True) -> np.ndarray:
    """All puzzles in a text, (n, 81) int8 with 0 for blanks.

    Each non-comment line holds one 81-cell puzzle, one ``<puzzle> <solution>`` pair (the
    test-set files' form; the solution is checked against the clues, then dropped) or one
    9-cell row of a grid (9 such rows in a row make a puzzle). With ``check``, clues that
    contradict each other and puzzles without a solution raise SudokuParseError; several
    solutions are allowed.
    """
    _require_text(text)
    puzzles: list[np.ndarray] = []
    contexts: list[str] = []
    pending: list[tuple[int, str]] = []
    text = text.removeprefix(BOM)
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#") or _is_separator_line(line):
            continue
        fields = line.split()
        if len(fields) == 2 and len(fields[0]) == 81 and not pending:
            puzzles.append(puzzle_and_solution(fields, f"line {lineno}: ")[0])
            contexts.append(f"line {lineno}: ")
            continue
        n_cells = len(line.translate(_ROW_SEPARATORS))
        if n_cells == 9 and len(line) < 81:
            pending.append((lineno, line))
            if len(pending) == 9:
                puzzles.append(_grid_rows(pending))
                contexts.append(f"line {pending[0][0]}: ")
                pending = []
            continue
        if pending and n_cells != 81:
            raise SudokuParseError(
                f"line {lineno}: expected 9 cells in a grid row, got {n_cells}"
            )
        if pending:
            raise SudokuParseError(
                f"line {pending[0][0]}: grid has {len(pending)} rows, expected 9"
            )
        puzzles.append(grid_from_cells(line, f"line {lineno}: "))
        contexts.append(f"line {lineno}: ")
    if pending:
        raise SudokuParseError(f"line {pending[0][0]}: grid has {len(pending)} rows, expected 9")
    grids = np.stack(puzzles) if puzzles else np.zeros((0, 81), dtype=np.int8)
    if check and len(grids):
        _check_solvable(grids, contexts)
    return grids


def parse_puzzle(text: str, check: bool = True) -> np.ndarray:
    """One puzzle (81,) int8 from an 81-cell line or a 9-line grid."""
    _require_text(text)
    stripped = text.removeprefix(BOM).strip()
    if not stripped:
        raise SudokuParseError("empty puzzle: expected 81 cells")
    if "\n" not in stripped:
        grid = grid_from_cells(stripped)
        if check:
            _check_solvable(grid[None], [""])
        return grid
    grids = parse_puzzles(stripped, check=check)
    if len(grids) != 1:
        raise SudokuParseError(f"expected one puzzle, got {len(grids)}")
    return grids[0]


#: the UTF-8 byte-order mark some editors put at the start of a text file
BOM = "\ufeff"

#: the path that names standard input
STDIN = "-"


def read_text(path: str | Path) -> str:
    """The text of a puzzle file (``-``: standard input), UTF-8 with an optional byte-order
    mark dropped; a missing, unreadable, binary or non-UTF-8 file raises SudokuParseError."""
    if not isinstance(path, (str, os.PathLike)):
        raise SudokuParseError(f"path: expected a puzzle file path (or '-'), got "
                               f"{type(path).__name__}")
    try:
        if str(path) == STDIN:
            stream = sys.stdin
            raw = stream.buffer.read() if hasattr(stream, "buffer") else \
                stream.read().encode("utf-8", errors="surrogateescape")
            path = "<stdin>"
        else:
            raw = Path(path).read_bytes()
    except OSError as err:
        raise SudokuParseError(f"{path}: cannot read: {err.strerror or err}") from None
    if b"\0" in raw:
        raise SudokuParseError(f"{path}: binary file (NUL bytes), not a text of puzzles")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise SudokuParseError(f"{path}: line {line}: not UTF-8 text (byte "
                               f"0x{raw[err.start]:02x})") from None


def read_puzzles(path: str | Path, check: bool = True) -> np.ndarray:
    """All puzzles in a file (``-``: standard input), (n, 81) int8; see
    :func:`parse_puzzles`. A file without a puzzle raises SudokuParseError."""
    text = read_text(path)
    shown = "<stdin>" if str(path) == STDIN else path
    try:
        grids = parse_puzzles(text, check=check)
    except SudokuParseError as err:
        raise SudokuParseError(f"{shown}: {err}") from None
    if not len(grids):
        raise SudokuParseError(f"{shown}: no puzzle in file")
    return grids


def to_string(grid, blank: str = ".") -> str:
    """81 characters for grid (81,) (:func:`unmask.sudoku.grids.as_grids`: a puzzle string
    too), ``blank`` ('.' or '0') for empty cells."""
    if blank not in (".", "0"):
        raise ValueError(f"blank must be '.' or '0', got {blank!r}")
    g, single = as_grids(grid, "grid")
    if not single:
        raise UnmaskError(f"grid: expected one grid (81,), got shape {g.shape}")
    g = g[0]
    return "".join(blank if d == 0 else str(int(d)) for d in g)


def format_grid(grid, blank: str = ".") -> str:
    """A readable 9x9 picture of grid (81,) with box separators, no trailing newline."""
    s = to_string(grid, blank)
    lines = []
    for r in range(9):
        row = s[9 * r : 9 * r + 9]
        lines.append(" | ".join(" ".join(row[3 * b : 3 * b + 3]) for b in range(3)))
        if r in (2, 5):
            lines.append("------+-------+------")
    return "\n".join(lines)
