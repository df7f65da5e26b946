from __future__ import annotations

import numba
import numpy as np
import pytest

from unmask.sudoku import (
    count_solutions,
    is_valid_solution,
    make_puzzles,
    parse_puzzle,
    random_full_grids,
    rate,
    rounds_of_singles,
    singles_schedule,
    solve,
    solve_batch,
)

NO_SOLUTION = "12345678." + "........9" + "." * 63  # r1c9 must be 9, but column 9 has a 9


def test_known_puzzles_have_one_valid_solution(known):
    for name, puzzle in known.items():
        assert count_solutions(puzzle, limit=5) == 1, name
        solution = solve(puzzle)
        assert solution is not None and solution.dtype == np.int8
        assert is_valid_solution(solution, puzzle).all(), name


def sixteen_clues(known) -> np.ndarray:
    """A 17-clue puzzle less one clue: no 16-clue puzzle has a unique solution."""
    multi = known["seventeen"].copy()
    multi[np.flatnonzero(multi)[0]] = 0
    return multi


def test_counting_stops_at_limit(known):
    multi = sixteen_clues(known)
    assert count_solutions(multi, limit=2) == 2
    assert count_solutions(multi, limit=7) == 7
    assert count_solutions(np.zeros(81, dtype=np.int8), limit=3) == 3
    solution = solve(multi)
    assert is_valid_solution(solution, multi).all()


def test_unsolvable_and_contradictory_puzzles():
    no_solution = parse_puzzle(NO_SOLUTION, check=False)
    assert count_solutions(no_solution) == 0
    assert solve(no_solution) is None
    contradictory = np.zeros(81, dtype=np.int8)
    contradictory[[0, 40]] = 5  # same box? no: same digit on the main diagonal is legal
    assert count_solutions(contradictory, limit=1) == 1
    contradictory[1] = 5  # now twice in row 1
    assert count_solutions(contradictory) == 0
    solutions, solved = solve_batch(np.stack([no_solution, contradictory]))
    assert not solved.any() and (solutions == 0).all()


def test_batched_counts_match_single(known):
    batch = np.stack([*known.values(), sixteen_clues(known)])
    counts = count_solutions(batch, limit=2)
    assert counts.tolist() == [count_solutions(p, limit=2) for p in batch]
    assert counts.tolist() == [1] * len(known) + [2]


def test_bad_input_shapes_and_values():
    with pytest.raises(ValueError, match="shape"):
        count_solutions(np.zeros(80, dtype=np.int8))
    with pytest.raises(ValueError, match="digits"):
        count_solutions(np.full(81, 10))
    with pytest.raises(ValueError, match="solve_batch"):
        solve(np.zeros((2, 81), dtype=np.int8))


def test_is_valid_solution_rejects_broken_grids(generated):
    puzzles, solutions = generated
    assert is_valid_solution(solutions, puzzles).all()
    swapped = solutions.copy()
    swapped[:, [0, 1]] = swapped[:, [1, 0]]  # breaks the columns
    assert not is_valid_solution(swapped).any()
    blank = solutions.copy()
    blank[:, 5] = 0
    assert not is_valid_solution(blank).any()
    other = np.roll(solutions, 1, axis=0)  # valid grids, but not these puzzles' solutions
    assert is_valid_solution(other).all()
    assert not is_valid_solution(other, puzzles).any()


def test_full_grids_are_valid_and_deterministic():
    grids = random_full_grids(200, seed=3)
    assert grids.shape == (200, 81) and grids.dtype == np.int8
    assert is_valid_solution(grids).all()
    assert len({g.tobytes() for g in grids}) == 200
    assert (random_full_grids(200, seed=3) == grids).all()
    assert (random_full_grids(150, seed=3, offset=50) == grids[50:]).all()
    assert not (random_full_grids(200, seed=4) == grids).all(axis=1).any()


def test_puzzles_are_unique_and_minimal(generated):
    puzzles, solutions = generated
    assert is_valid_solution(solutions, puzzles).all()
    assert (count_solutions(puzzles, limit=2) == 1).all()
    clues = (puzzles > 0).sum(axis=1)
    assert 17 <= clues.min() and clues.max() <= 35
    # Minimal: blanking any single clue admits a second solution.
    for puzzle in puzzles[:16]:
        cells = np.flatnonzero(puzzle)
        reduced = np.repeat(puzzle[None], len(cells), axis=0)
        reduced[np.arange(len(cells)), cells] = 0
        assert (count_solutions(reduced, limit=2) == 2).all()


def test_puzzles_stop_at_target_clue_count(generated):
    _, solutions = generated
    puzzles = make_puzzles(solutions, seed=1, min_clues=32)
    clues = (puzzles > 0).sum(axis=1)
    assert (clues == 32).all()
    assert (count_solutions(puzzles, limit=2) == 1).all()
    assert is_valid_solution(solutions, puzzles).all()


def test_puzzle_generation_is_deterministic_and_offset_consistent(generated):
    _, solutions = generated
    a = make_puzzles(solutions, seed=11)
    assert (make_puzzles(solutions, seed=11) == a).all()
    assert (make_puzzles(solutions[10:], seed=11, offset=10) == a[10:]).all()
    assert (make_puzzles(solutions[5], seed=11, offset=5) == a[5]).all()
    assert not (make_puzzles(solutions, seed=12) == a).all()


def test_results_do_not_depend_on_thread_count(generated):
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has a single thread")
    puzzles, solutions = generated
    before = numba.get_num_threads()
    outputs = []
    try:
        for threads in (1, 2):
            numba.set_num_threads(threads)
            r = rate(puzzles)
            outputs.append((
                random_full_grids(64, seed=5),
                make_puzzles(solutions[:32], seed=6),
                r.guesses, r.backtracks,
                rounds_of_singles(puzzles),
            ))
    finally:
        numba.set_num_threads(before)
    for one, two in zip(*outputs, strict=True):
        assert (one == two).all()


def test_rating_of_known_puzzles(known):
    r = rate(np.stack(list(known.values())))
    by_name = dict(zip(known, zip(r.singles, r.guesses, r.backtracks, strict=True), strict=True))
    assert by_name["easy"] == (True, 0, 0)
    assert by_name["seventeen"] == (True, 0, 0)
    for name in ("seventeen_search", "escargot", "inkala"):
        singles, guesses, backtracks = by_name[name]
        assert not singles and guesses >= 1 and backtracks >= 1, name
    assert r.solved.all()
    # Deterministic: the same puzzle always gets the same rating.
    again = rate(np.stack(list(known.values())))
    assert (again.guesses == r.guesses).all() and (again.backtracks == r.backtracks).all()


def test_rating_agrees_with_rounds_of_singles(generated, known):
    puzzles = np.concatenate([generated[0], np.stack(list(known.values()))])
    r = rate(puzzles)
    rounds = rounds_of_singles(puzzles)
    assert ((r.guesses == 0) == r.singles).all()
    assert ((rounds >= 0) == r.singles).all()
    assert (r.backtracks <= r.guesses).all()
    # Both outcomes occur among random minimal puzzles.
    assert r.singles.any() and not r.singles.all()


def test_full_grid_needs_nothing(generated):
    _, solutions = generated
    r = rate(solutions)
    assert r.singles.all() and (r.guesses == 0).all() and (r.backtracks == 0).all()
    assert (rounds_of_singles(solutions) == 0).all()


def test_more_clues_never_make_a_puzzle_harder_for_singles(generated):
    """Singles are monotone deductions: adding clues of the solution can only keep or reduce the
    rounds of parallel singles, and a puzzle solvable by singles stays so."""
    puzzles, solutions = generated
    rng = np.random.default_rng(0)
    for puzzle, solution in zip(puzzles[:24], solutions[:24], strict=True):
        blanks = rng.permutation(np.flatnonzero(puzzle == 0))
        chain = np.repeat(puzzle[None], len(blanks) + 1, axis=0)
        for k, cell in enumerate(blanks):
            chain[k + 1 :, cell] = solution[cell]  # chain[k] has k extra clues
        rounds = rounds_of_singles(chain)
        rounds[rounds < 0] = 1000  # stuck: worse than any number of rounds
        assert (np.diff(rounds) <= 0).all()
        singles = rate(chain).singles
        assert (np.diff(singles.astype(int)) >= 0).all()
        assert rounds[-1] == 0 and singles[-1]


def test_singles_schedule_fills_cells_round_by_round(known):
    puzzle = known["easy"]
    schedule, rounds = singles_schedule(puzzle)
    assert rounds[0] == schedule.max() == rounds_of_singles(puzzle)
    assert ((schedule[0] == 0) == (puzzle > 0)).all()
    assert (schedule[0] >= 0).all()
    stuck_schedule, stuck_rounds = singles_schedule(known["inkala"])
    assert stuck_rounds[0] == -1 and (stuck_schedule[0] == -1).any()
    # Replaying the schedule: each round's cells are forced by the earlier rounds.
    solution = solve(puzzle)
    for r in range(1, rounds[0] + 1):
        partial = np.where(schedule[0] < r, solution, 0)
        partial_schedule, _ = singles_schedule(partial)
        assert ((partial_schedule[0] == 1) == (schedule[0] == r)).all()
