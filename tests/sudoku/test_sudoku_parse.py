from __future__ import annotations

import numpy as np
import pytest
from sudoku_examples import KNOWN

from unmask.sudoku import (
    SudokuParseError,
    format_grid,
    parse_puzzle,
    parse_puzzles,
    read_puzzles,
    to_string,
)

EASY = KNOWN["easy"]


def test_line_forms_agree():
    zeros = parse_puzzle(EASY)
    dots = parse_puzzle(EASY.replace("0", "."))
    assert zeros.shape == (81,) and zeros.dtype == np.int8
    assert (zeros == dots).all()
    assert to_string(zeros, blank="0") == EASY
    assert to_string(zeros) == EASY.replace("0", ".")
    assert parse_puzzle(f"  {EASY}\n") .tolist() == zeros.tolist()


def test_grid_form_round_trips_through_format_grid():
    puzzle = parse_puzzle(KNOWN["inkala"])
    picture = format_grid(puzzle)
    lines = picture.splitlines()
    assert len(lines) == 11 and lines[3] == "------+-------+------"
    assert lines[0] == "8 . . | . . . | . . ."
    assert (parse_puzzle(picture) == puzzle).all()
    plain = "\n".join(to_string(puzzle)[9 * r : 9 * r + 9] for r in range(9))
    assert (parse_puzzle(plain) == puzzle).all()


def test_many_puzzles_with_comments_blank_lines_and_both_forms(tmp_path):
    a, b = parse_puzzle(KNOWN["easy"]), parse_puzzle(KNOWN["escargot"])
    text = f"# a comment\n\n{to_string(a)}\n\n# grid next\n{format_grid(b)}\n{to_string(b, '0')}\n"
    grids = parse_puzzles(text)
    assert grids.shape == (3, 81)
    assert (grids[0] == a).all() and (grids[1] == b).all() and (grids[2] == b).all()
    path = tmp_path / "puzzles.txt"
    path.write_text(text)
    assert (read_puzzles(path) == grids).all()
    assert parse_puzzles("# nothing\n").shape == (0, 81)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1" * 80, r"^expected 81 cells, got 80$"),
        ("." * 82, r"^expected 81 cells, got 82$"),
        ("." * 12 + "x" + "." * 68, r"^bad character 'x' at position 13 \(row 2, column 4\)"),
        ("." * 80 + "é", r"^bad character 'é' at position 81 \(row 9, column 9\)"),
        ("55" + "." * 79,
         r"^clues contradict: digit 5 appears twice in row 1 \(at row 1, column 1 and row 1, "
         r"column 2\)$"),
        ("7" + "." * 8 + "7" + "." * 71,
         r"^clues contradict: digit 7 appears twice in column 1 \(at row 1, column 1 and "
         r"row 2, column 1\)$"),
        ("3" + "." * 9 + "3" + "." * 70,
         r"^clues contradict: digit 3 appears twice in box 1 \(at row 1, column 1 and row 2, "
         r"column 2\)$"),
        ("12345678." + "........9" + "." * 63, r"^puzzle has no solution$"),
    ],
)
def test_errors_name_the_problem(text, message):
    with pytest.raises(SudokuParseError, match=message) as info:
        parse_puzzle(text)
    assert isinstance(info.value, ValueError)
    assert "\n" not in str(info.value)


def test_errors_in_multi_puzzle_texts_name_the_line(tmp_path):
    good = KNOWN["easy"]
    with pytest.raises(SudokuParseError, match=r"^line 3: expected 81 cells, got 5$"):
        parse_puzzles(f"# c\n{good}\n12345\n")
    with pytest.raises(SudokuParseError, match=r"^line 2: grid has 4 rows, expected 9$"):
        parse_puzzles("\n" + "\n".join(["123456789"] * 4) + f"\n{good}\n")
    grid_rows = [good[9 * r : 9 * r + 9] for r in range(9)]
    grid_rows[4] = "1234 5678"  # 8 cells
    with pytest.raises(SudokuParseError, match=r"^line 5: expected 9 cells in a grid row, got 8"):
        parse_puzzles("\n".join(grid_rows))
    path = tmp_path / "bad.txt"
    path.write_text(f"{good}\n{'1' * 81}\n")
    with pytest.raises(SudokuParseError, match=r"bad.txt: line 2: clues contradict: digit 1"):
        read_puzzles(path)
    assert read_puzzles(path, check=False).shape == (2, 81)


def test_test_set_lines_read_as_their_puzzles():
    from unmask.sudoku.datasets import load_set, set_path

    puzzles, solutions = load_set("hard")
    assert (read_puzzles(set_path("hard"), check=False) == puzzles).all()
    line = f"{to_string(puzzles[0])} {to_string(solutions[0])}"
    assert (parse_puzzles(f"# c\n{line}\n") == puzzles[0]).all()


@pytest.mark.parametrize(("edit", "message"), [
    ("blank", r"^line 1: solution: blank at row 1, column 1$"),
    ("clue", r"^line 1: solution has \d at row \d, column \d, where the puzzle's clue is \d$"),
    ("short", r"^line 1: solution: expected 81 cells, got 80$"),
    ("swap", r"^line 1: solution breaks the rules: digit \d appears twice in (row|column|box) "),
])
def test_test_set_lines_with_a_bad_solution_name_it(edit, message):
    from unmask.sudoku.datasets import load_set

    puzzles, solutions = load_set("hard")
    puzzle, solution = to_string(puzzles[0]), list(to_string(solutions[0]))
    if edit == "blank":
        solution[0] = "."
    elif edit == "clue":
        i = next(k for k, ch in enumerate(puzzle) if ch != ".")
        solution[i] = str(int(solution[i]) % 9 + 1)
    elif edit == "swap":  # a blank cell's digit changed: the grid breaks a unit
        i = puzzle.index(".")
        solution[i] = str(int(solution[i]) % 9 + 1)
    else:
        solution = solution[:80]
    with pytest.raises(SudokuParseError, match=message):
        parse_puzzles(f"{puzzle} {''.join(solution)}")


def test_missing_or_unreadable_file_is_a_parse_error(tmp_path):
    with pytest.raises(SudokuParseError, match=r"nope.txt: cannot read: No such file"):
        read_puzzles(tmp_path / "nope.txt")
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"\xff\xfe" * 50)
    with pytest.raises(SudokuParseError, match=r"bin.txt: line 1: not UTF-8 text"):
        read_puzzles(binary)


def test_check_off_skips_solvability():
    broken = "55" + "." * 79
    assert parse_puzzle(broken, check=False)[:2].tolist() == [5, 5]


def test_to_string_rejects_bad_blank_and_shape():
    grid = parse_puzzle(EASY)
    with pytest.raises(ValueError, match="blank"):
        to_string(grid, blank="-")
    with pytest.raises(ValueError, match="81 cells"):
        to_string(grid[:80])
