"""Hostile puzzle input to ``unmask sudoku solve``: strings, files, standard input, many
puzzles. Each run exits 0 with a correct result or 2 with one line naming what was wrong."""

import io
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unmask.sudoku import is_valid_solution
from unmask.sudoku.parse import parse_puzzle, to_string

from .conftest import files_in

FAST = settings(max_examples=20, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def check_solved_lines(out: str, puzzles: list[str]) -> None:
    """The JSON lines of ``sudoku solve --json`` are one per puzzle, keep the clues and say
    truthfully whether the grid is a solution."""
    lines = out.strip().splitlines()
    assert len(lines) == len(puzzles)
    for line, puzzle in zip(lines, puzzles, strict=True):
        obj = json.loads(line)
        given_grid = parse_puzzle(puzzle)
        grid = np.array([int(c) for c in obj["grid"]], dtype=np.int8)
        assert obj["puzzle"] == to_string(given_grid)
        assert ((given_grid == 0) | (grid == given_grid)).all()
        assert obj["solved"] == bool(is_valid_solution(grid[None], given_grid[None])[0])


@FAST
@given(text=st.text(max_size=120))
def test_random_puzzle_strings(run, tiny_model, text):
    r = run("sudoku", "solve", text, "--model", tiny_model, "--json")
    if r.ok_or_refused():
        check_solved_lines(r.out, [text])


def _mutations(puzzle: str):
    cells = st.sampled_from(list("0123456789.x -|\t\n\r\ufeff\u0663\uff15\x00é"))
    at = st.integers(0, 80)
    return st.one_of(
        st.builds(lambda i, c: puzzle[:i] + c + puzzle[i + 1:], at, cells),  # replace
        st.builds(lambda i, c: puzzle[:i] + c + puzzle[i:], at, cells),      # insert
        st.builds(lambda i: puzzle[:i] + puzzle[i + 1:], at),                # delete
        st.builds(lambda pre, post: pre + puzzle + post,                     # wrap
                  st.sampled_from(["", " ", "\ufeff", "\n", "\r\n", "  \t"]),
                  st.sampled_from(["", " ", "\n", "\r\n", "#", " x"])),
    )


@FAST
@given(data=st.data())
def test_mutated_puzzle_strings(run, tiny_model, nearly_solved, data):
    text = data.draw(_mutations(nearly_solved[0]))
    r = run("sudoku", "solve", text, "--model", tiny_model, "--json")
    if r.ok_or_refused():
        check_solved_lines(r.out, [text])


@pytest.mark.parametrize("text, needle", [
    ("", "empty puzzle"),
    ("   ", "empty puzzle"),
    ("1" * 80, "expected 81 cells, got 80"),
    ("1" * 82, "expected 81 cells, got 82"),
    ("1" * 100_000, "expected 81 cells, got 100000"),
    ("\u0663" + "." * 80, "bad character"),           # an Arabic-Indic digit is not a digit here
    ("\x00" + "." * 80, "bad character"),
    ("11" + "." * 79, "contradict"),
    ("-" * 81, "bad character"),
])
def test_adversarial_puzzle_strings(run, tiny_model, text, needle):
    r = run("sudoku", "solve", "--model", tiny_model, "--", text)
    r.refused(needle)


def test_a_puzzle_string_with_a_bom_is_read(run, tiny_model, nearly_solved):
    r = run("sudoku", "solve", "\ufeff" + nearly_solved[0], "--model", tiny_model, "--json")
    assert r.code == 0, r.err
    check_solved_lines(r.out, [nearly_solved[0]])


def test_the_bad_puzzle_among_several_arguments_is_named(run, tiny_model, nearly_solved):
    r = run("sudoku", "solve", nearly_solved[0], "1" * 80, "--model", tiny_model)
    r.refused("PUZZLE 2: expected 81 cells")


# ---------------------------------------------------------------------------- files


@pytest.mark.parametrize("content, needle", [
    (b"", "no puzzle in file"),
    (b"# only a comment\n\n", "no puzzle in file"),
    (b"\xef\xbb\xbf", "no puzzle in file"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file"),
    ("é".encode("latin-1") + b"." * 80, "not UTF-8"),
    (("." * 81).encode("utf-16"), "binary file"),         # UTF-16 has NUL bytes
])
def test_bad_puzzle_files(run, tiny_model, tmp_path, content, needle):
    path = tmp_path / "p.txt"
    path.write_bytes(content)
    line = run("sudoku", "solve", "--file", path, "--model", tiny_model).refused(needle)
    assert str(path) in line


@pytest.mark.parametrize("encode", [
    lambda lines: "\n".join(lines).encode(),
    lambda lines: "\r\n".join(lines).encode() + b"\r\n",                  # CRLF
    lambda lines: b"\xef\xbb\xbf" + "\n".join(lines).encode(),            # BOM
    lambda lines: b"\xef\xbb\xbf" + "\r\n".join(lines).encode(),          # both
], ids=["lf", "crlf", "bom", "bom-crlf"])
def test_puzzle_files_in_common_encodings(run, tiny_model, tmp_path, nearly_solved, encode):
    path = tmp_path / "p.txt"
    path.write_bytes(encode(["# two puzzles", nearly_solved[0], nearly_solved[0]]))
    r = run("sudoku", "solve", "--file", path, "--model", tiny_model, "--json")
    assert r.code == 0, r.err
    check_solved_lines(r.out, [nearly_solved[0]] * 2)


def test_the_bad_line_of_a_file_is_named(run, tiny_model, tmp_path, nearly_solved):
    path = tmp_path / "p.txt"
    path.write_text(f"{nearly_solved[0]}\n{nearly_solved[0]}\n11{'.' * 79}\n")
    r = run("sudoku", "solve", "--file", path, "--model", tiny_model)
    r.refused(f"{path}: line 3: clues contradict")


@pytest.mark.parametrize("which", ["missing", "folder"])
def test_unreadable_puzzle_files(run, tiny_model, tmp_path, which):
    path = tmp_path / "nope.txt" if which == "missing" else tmp_path
    run("sudoku", "solve", "--file", path, "--model", tiny_model).refused("cannot read")


def test_a_huge_file_with_one_bad_line_is_refused_fast(run, tiny_model, tmp_path):
    path = tmp_path / "huge.txt"
    path.write_bytes(b"1" * 20_000_000)  # one 20 MB line
    run("sudoku", "solve", "--file", path, "--model", tiny_model).refused("expected 81 cells")


@FAST
@given(content=st.binary(max_size=300))
def test_random_file_bytes(run, tiny_model, tmp_path_factory, content):
    path = tmp_path_factory.mktemp("bytes") / "p.txt"
    path.write_bytes(content)
    r = run("sudoku", "solve", "--file", path, "--model", tiny_model, "--json")
    r.ok_or_refused()


def test_puzzles_from_standard_input(run, tiny_model, nearly_solved, monkeypatch):
    stdin = io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbf" + nearly_solved[0].encode() + b"\r\n"))
    monkeypatch.setattr("sys.stdin", stdin)
    r = run("sudoku", "solve", "--file", "-", "--model", tiny_model, "--json")
    assert r.code == 0, r.err
    check_solved_lines(r.out, [nearly_solved[0]])
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"")))
    run("sudoku", "solve", "--file", "-", "--model", tiny_model).refused(
        "<stdin>: no puzzle in file")


# ---------------------------------------------------------------- many puzzles, Ctrl-C


def test_results_stream_batch_by_batch_and_survive_an_interrupt(run, tiny_model, tmp_path,
                                                               nearly_solved, monkeypatch):
    import unmask.commands.sudoku as solve_cmd

    real = solve_cmd.solve_batches

    def interrupted_after_two(*args, **kwargs):
        for k, batch in enumerate(real(*args, **kwargs)):
            if k == 2:
                raise KeyboardInterrupt
            yield batch

    monkeypatch.setattr(solve_cmd, "solve_batches", interrupted_after_two)
    path = tmp_path / "p.txt"
    path.write_text((nearly_solved[0] + "\n") * 5)
    r = run("sudoku", "solve", "--file", path, "--model", tiny_model, "--json",
            "--batch-size", "2")
    assert r.code == 130
    assert "interrupted: 4 of 5 puzzles finished and written" in r.err
    check_solved_lines(r.out, [nearly_solved[0]] * 4)  # the two finished batches
    assert files_in(tmp_path) == {"p.txt"}
