from __future__ import annotations

import numpy as np
import pytest

from unmask.sudoku import (
    count_solutions,
    datasets,
    generate_test_set,
    is_valid_solution,
    load_set,
    rate,
    solve_batch,
    training_grids,
    training_puzzle_masks,
)
from unmask.sudoku.datasets import (
    HARD_CLUES,
    TEST_SET_KINDS,
    TEST_SET_SEEDS,
    TEST_SET_SIZE,
    format_set_lines,
    set_header,
    set_path,
)


@pytest.fixture(scope="module")
def test_sets():
    return {kind: load_set(kind) for kind in TEST_SET_KINDS}


def test_packaged_sets_load(test_sets):
    for kind, (puzzles, solutions) in test_sets.items():
        assert puzzles.shape == solutions.shape == (TEST_SET_SIZE, 81), kind
        assert puzzles.dtype == solutions.dtype == np.int8


def test_every_line_is_a_proper_puzzle(test_sets):
    for kind, (puzzles, solutions) in test_sets.items():
        assert is_valid_solution(solutions, puzzles).all(), kind
        assert (count_solutions(puzzles, limit=2) == 1).all(), kind
        assert len({p.tobytes() for p in puzzles}) == TEST_SET_SIZE, kind


def test_sets_follow_their_rules(test_sets):
    hard, _ = test_sets["hard"]
    r = rate(hard)
    clues = (hard > 0).sum(axis=1)
    assert not r.singles.any() and (r.guesses >= 1).all()
    assert ((clues >= HARD_CLUES[0]) & (clues <= HARD_CLUES[1])).all()
    medium, _ = test_sets["medium"]
    assert rate(medium).singles.all()


def test_sets_are_minimal(test_sets):
    """Spot check: blanking any clue of the first puzzles admits a second solution."""
    for kind, (puzzles, _) in test_sets.items():
        for puzzle in puzzles[:5]:
            cells = np.flatnonzero(puzzle)
            reduced = np.repeat(puzzle[None], len(cells), axis=0)
            reduced[np.arange(len(cells)), cells] = 0
            assert (count_solutions(reduced, limit=2) == 2).all(), kind


@pytest.mark.parametrize("kind", TEST_SET_KINDS)
def test_files_regenerate_byte_identically(kind):
    n = 20
    lines = set_path(kind).read_text(encoding="ascii").splitlines(keepends=True)
    header = set_header(kind, TEST_SET_SIZE, TEST_SET_SEEDS[kind])
    n_header = header.count("\n")
    assert "".join(lines[:n_header]) == header
    assert len(lines) == n_header + TEST_SET_SIZE
    puzzles, solutions = generate_test_set(kind, n, TEST_SET_SEEDS[kind])
    expected = [line + "\n" for line in format_set_lines(puzzles, solutions)]
    assert lines[n_header : n_header + n] == expected


def test_shorter_set_is_a_prefix():
    p10, s10 = generate_test_set("hard", 10, seed=3)
    p4, s4 = generate_test_set("hard", 4, seed=3)
    assert (p10[:4] == p4).all() and (s10[:4] == s4).all()
    with pytest.raises(ValueError, match="unknown test set kind"):
        generate_test_set("easy", 1, seed=0)


def test_load_set_from_path_solves_missing_solutions(tmp_path, test_sets):
    puzzles, solutions = test_sets["hard"]
    path = tmp_path / "mine.txt"
    rows = format_set_lines(puzzles[:3], solutions[:3])
    path.write_text("# mine\n\n" + rows[0] + "\n" + rows[1].split()[0] + "\n" + rows[2] + "\n")
    p, s = load_set(path)
    assert (p == puzzles[:3]).all() and (s == solutions[:3]).all()
    path.write_text("1" * 81 + "\n")
    with pytest.raises(ValueError, match="no solution"):
        load_set(path)
    # a given solution is checked as parse_puzzles checks it
    wrong = list(rows[0].split()[1])
    i = rows[0].index(".")
    wrong[i] = str(int(wrong[i]) % 9 + 1)
    path.write_text(rows[0].split()[0] + " " + "".join(wrong) + "\n")
    with pytest.raises(ValueError, match=r"mine.txt: line 1: solution breaks the rules"):
        load_set(path)


def test_set_puzzles_reads_packaged_names_and_files(tmp_path, test_sets):
    puzzles, solutions = test_sets["medium"]
    assert (datasets.set_puzzles("medium") == puzzles).all()
    path = tmp_path / "two.txt"
    path.write_text("\n".join(format_set_lines(puzzles[:2], solutions[:2])) + "\n")
    assert (datasets.set_puzzles(path) == puzzles[:2]).all()


def test_training_grids_are_valid_fresh_and_deterministic(test_sets):
    grids = training_grids(512, seed=0)
    assert grids.shape == (512, 81) and grids.dtype == np.int8
    assert is_valid_solution(grids).all()
    assert (training_grids(512, seed=0) == grids).all()
    assert (training_grids(256, seed=0, offset=256) == grids[256:]).all()
    test_solutions = np.concatenate([s for _, s in test_sets.values()])
    assert not (grids[:, None, :] == test_solutions[None, :, :]).all(axis=2).any()


def test_training_grids_replace_test_solutions(monkeypatch):
    """A drawn grid equal to a test solution is replaced by another fresh grid."""
    drawn = training_grids(8, seed=1)
    fake_tests = drawn[[2, 5]]
    monkeypatch.setattr(
        datasets, "_test_solutions", lambda: (fake_tests, datasets._grid_hashes(fake_tests))
    )
    grids = training_grids(8, seed=1)
    keep = [0, 1, 3, 4, 6, 7]
    assert (grids[keep] == drawn[keep]).all()
    assert not (grids[:, None, :] == fake_tests[None]).all(axis=2).any()
    assert is_valid_solution(grids).all()


def test_training_puzzle_masks_give_unique_puzzles():
    grids = training_grids(32, seed=2)
    masks = training_puzzle_masks(grids, seed=3)
    assert masks.shape == (32, 81) and masks.dtype == bool
    puzzles = np.where(masks, grids, 0).astype(np.int8)
    assert (count_solutions(puzzles, limit=2) == 1).all()
    solved, ok = solve_batch(puzzles)
    assert ok.all() and (solved == grids).all()
    capped = training_puzzle_masks(grids, seed=3, min_clues=40)
    assert (capped.sum(axis=1) == 40).all()
