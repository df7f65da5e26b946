"""Sudoku solver: solving, solution counting, generation and difficulty rating.

Grids are numpy int8 arrays of shape (81,) or (B, 81), row-major, 0 = blank, 1..9 = digits.

Inside the compiled kernels a cell's candidates are a 9-bit mask (bit d-1 set = digit d still
possible). The solver alternates two deductions to a fixed point -- naked singles (a solved
cell removes its digit from its 20 peers) and hidden singles (a digit with one place left in a
row, column or box goes there) -- and branches on the first cell with the fewest candidates.

Batched kernels run items in parallel (numba ``prange``). Every random choice for item ``i``
comes from its own counter-based generator keyed by ``(seed, i)``, so results for a seed do not
depend on the number of threads or on how the batch is split.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from unmask.sudoku.grids import as_grids

ALL_CANDIDATES = 0x1FF  # digits 1..9 as bits 0..8
MAX_DEPTH = 82  # each branch level fixes at least one more cell

# ---------------------------------------------------------------------------------------------
# Static tables


def _build_units() -> np.ndarray:
    """(27, 9) cell indices: rows 0-8, columns 9-17, boxes 18-26."""
    units = np.zeros((27, 9), dtype=np.int64)
    for i in range(9):
        units[i] = np.arange(9) + 9 * i
        units[9 + i] = np.arange(9) * 9 + i
        box_row, box_col = divmod(i, 3)
        units[18 + i] = [
            (3 * box_row + r) * 9 + 3 * box_col + c for r in range(3) for c in range(3)
        ]
    return units


def _build_peers(units: np.ndarray) -> np.ndarray:
    """(81, 20) for each cell the other cells sharing its row, column or box."""
    peers = np.zeros((81, 20), dtype=np.int64)
    for cell in range(81):
        others = sorted({int(c) for u in units if cell in u for c in u} - {cell})
        peers[cell] = others
    return peers


UNITS = _build_units()
PEERS = _build_peers(UNITS)
# Number of set bits of every 9-bit mask, and the digit of every one-bit mask (0 otherwise).
POPCOUNT = np.array([bin(m).count("1") for m in range(512)], dtype=np.int64)
BIT_DIGIT = np.zeros(512, dtype=np.int8)
for _d in range(1, 10):
    BIT_DIGIT[1 << (_d - 1)] = _d
del _d

# ---------------------------------------------------------------------------------------------
# Counter-based random numbers (splitmix64)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_MASK64 = (1 << 64) - 1

# Streams keep the generators of different uses of one seed independent.
STREAM_FULL_GRID = 1
STREAM_DIG = 2


@njit(cache=True)
def _mix64(z):
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def _item_state(seed, index, stream):
    """Generator state for item ``index`` of stream ``stream`` under ``seed`` (all uint64)."""
    z = _mix64(seed + _GOLDEN)
    z = _mix64(z ^ (stream * _MIX1))
    return _mix64(z ^ (index * _MIX2 + _GOLDEN))


@njit(cache=True)
def _next_u64(state):
    """Advance ``state`` ((1,) uint64) and return 64 random bits."""
    state[0] += _GOLDEN
    return _mix64(state[0])


@njit(cache=True)
def _below(state, n):
    """A random int in [0, n); the modulo bias (< 2**-55) is irrelevant here."""
    return np.int64(_next_u64(state) % np.uint64(n))


# ---------------------------------------------------------------------------------------------
# Propagation and search kernels


@njit(cache=True)
def _init_state(grid, masks, done):
    """Candidate masks (81,) from a grid: a clue is a one-bit mask, a blank allows all."""
    for c in range(81):
        d = grid[c]
        masks[c] = (1 << (d - 1)) if d > 0 else ALL_CANDIDATES
        done[c] = False


@njit(cache=True)
def _unit_singles(masks, u):
    """Digits (a bitmask) that have exactly one place left in unit u, given the candidate
    masks of the 81 cells; -1 when some digit has no place left (a contradiction)."""
    once = 0
    twice = 0
    for k in range(9):
        m = masks[UNITS[u, k]]
        twice |= once & m
        once |= m
    if once != ALL_CANDIDATES:
        return -1
    return once & ~twice


@njit(cache=True)
def _propagate(masks, done):
    """Apply naked and hidden singles to a fixed point; False on a contradiction.

    masks: (81,) int32 candidate masks, modified in place. done: (81,) bool, True for solved
    cells whose digit was already removed from their peers (so each is processed once).
    """
    while True:
        changed = False
        for c in range(81):
            m = masks[c]
            if m == 0:
                return False
            if not done[c] and POPCOUNT[m] == 1:
                done[c] = True
                for k in range(20):
                    p = PEERS[c, k]
                    if masks[p] & m:
                        masks[p] &= ~m
                        if masks[p] == 0:
                            return False
                        changed = True
        for u in range(27):
            single = _unit_singles(masks, u)
            if single < 0:
                return False  # some digit has no place left in this unit
            while single:
                bit = single & -single
                single ^= bit
                found = -1
                for k in range(9):
                    if masks[UNITS[u, k]] & bit:
                        found = UNITS[u, k]
                        break
                if found < 0:
                    # An earlier hidden single of this unit took the only cell for this digit.
                    return False
                if masks[found] != bit:
                    masks[found] = bit
                    changed = True
        if not changed:
            return True


@njit(cache=True)
def _pick_cell(masks):
    """First unsolved cell with the fewest candidates, or -1 if every cell is solved."""
    best = -1
    best_count = 10
    for c in range(81):
        n = POPCOUNT[masks[c]]
        if 1 < n < best_count:
            best = c
            best_count = n
            if n == 2:
                break
    return best


@njit(cache=True)
def _pick_bit(rem, randomize, rng):
    """Lowest candidate bit of ``rem``, or a uniformly random one if ``randomize``."""
    if not randomize:
        return rem & -rem
    k = _below(rng, POPCOUNT[rem])
    while True:
        bit = rem & -rem
        if k == 0:
            return bit
        rem ^= bit
        k -= 1


@njit(cache=True)
def _search(ws_masks, ws_done, ws_cell, ws_rem, limit, randomize, rng, stats, solution):
    """Depth-first search with propagation; returns the number of solutions found (<= limit).

    The initial state is in ws_masks[0] / ws_done[0] (not yet propagated). Workspace shapes:
    ws_masks (MAX_DEPTH, 81) int32, ws_done (MAX_DEPTH, 81) bool, ws_cell and ws_rem
    (MAX_DEPTH,) int64. stats (2,) int64 accumulates [guesses, dead ends]: a guess is one digit
    tried at a branch cell, a dead end a guess that propagation refutes at once. solution (81,)
    int8 receives the first solution found.
    """
    if not _propagate(ws_masks[0], ws_done[0]):
        return 0
    count = 0
    depth = 0
    while True:
        cell = _pick_cell(ws_masks[depth])
        if cell < 0:
            count += 1
            if count == 1:
                for c in range(81):
                    solution[c] = BIT_DIGIT[ws_masks[depth, c]]
            if count >= limit:
                return count
            ws_rem[depth] = 0
        else:
            ws_cell[depth] = cell
            ws_rem[depth] = ws_masks[depth, cell]
        # Find the deepest level with an untried digit and descend into it.
        descended = False
        while depth >= 0 and not descended:
            rem = ws_rem[depth]
            if rem == 0:
                depth -= 1
                continue
            bit = _pick_bit(rem, randomize, rng)
            ws_rem[depth] = rem & ~bit
            child = depth + 1
            ws_masks[child, :] = ws_masks[depth, :]
            ws_done[child, :] = ws_done[depth, :]
            ws_masks[child, ws_cell[depth]] = bit
            stats[0] += 1
            if _propagate(ws_masks[child], ws_done[child]):
                depth = child
                descended = True
            else:
                stats[1] += 1
        if not descended:
            return count


@njit(cache=True)
def _workspace():
    return (
        np.empty((MAX_DEPTH, 81), dtype=np.int32),
        np.empty((MAX_DEPTH, 81), dtype=np.bool_),
        np.empty(MAX_DEPTH, dtype=np.int64),
        np.empty(MAX_DEPTH, dtype=np.int64),
    )


@njit(cache=True, parallel=True)
def _count_batch(grids, limit, solutions, counts, stats):
    """counts[i] = solutions of grids[i] up to ``limit``; first solution and fixed-order
    search statistics (digits ascending) into solutions[i] and stats[i]."""
    for i in prange(grids.shape[0]):
        ws_masks, ws_done, ws_cell, ws_rem = _workspace()
        rng = np.zeros(1, dtype=np.uint64)
        _init_state(grids[i], ws_masks[0], ws_done[0])
        counts[i] = _search(
            ws_masks, ws_done, ws_cell, ws_rem, limit, False, rng, stats[i], solutions[i]
        )


@njit(cache=True, parallel=True)
def _full_grids_batch(seed, offset, out):
    """out[i] = a random full grid: search from the empty grid trying digits in random order."""
    empty = np.zeros(81, dtype=np.int8)
    for i in prange(out.shape[0]):
        ws_masks, ws_done, ws_cell, ws_rem = _workspace()
        rng = np.zeros(1, dtype=np.uint64)
        rng[0] = _item_state(seed, np.uint64(offset + i), np.uint64(STREAM_FULL_GRID))
        stats = np.zeros(2, dtype=np.int64)
        _init_state(empty, ws_masks[0], ws_done[0])
        _search(ws_masks, ws_done, ws_cell, ws_rem, 1, True, rng, stats, out[i])


@njit(cache=True, parallel=True)
def _dig_batch(solutions, seed, offset, min_clues, out):
    """out[i] = a puzzle for solutions[i]: visit cells in random order and blank each one whose
    removal keeps the solution unique, until ``min_clues`` clues remain.

    Removing the clue d at cell c keeps the solution unique exactly when the puzzle with c
    restricted to "anything but d" has no solution, so one existence check suffices. A clue
    that was needed when visited stays needed after later removals, so with min_clues = 0 the
    result is minimal.
    """
    for i in prange(solutions.shape[0]):
        ws_masks, ws_done, ws_cell, ws_rem = _workspace()
        rng = np.zeros(1, dtype=np.uint64)
        rng[0] = _item_state(seed, np.uint64(offset + i), np.uint64(STREAM_DIG))
        stats = np.zeros(2, dtype=np.int64)
        scratch = np.zeros(81, dtype=np.int8)
        puzzle = out[i]
        puzzle[:] = solutions[i]
        order = np.arange(81)
        for k in range(80, 0, -1):  # Fisher-Yates
            j = _below(rng, k + 1)
            order[k], order[j] = order[j], order[k]
        clues = 81
        for k in range(81):
            if clues <= min_clues:
                break
            c = order[k]
            d = puzzle[c]
            _init_state(puzzle, ws_masks[0], ws_done[0])
            ws_masks[0, c] = ALL_CANDIDATES & ~(1 << (d - 1))
            if _search(ws_masks, ws_done, ws_cell, ws_rem, 1, False, rng, stats, scratch) == 0:
                puzzle[c] = 0
                clues -= 1


@njit(cache=True)
def _singles_schedule_one(puzzle, schedule):
    """Fill ``puzzle`` by rounds of parallel singles; schedule[c] = round that fills c.

    Each round computes every blank's candidates from the digits placed so far, then places all
    naked singles (one candidate) and hidden singles (a digit with one place in a unit) at once.
    Clues get round 0; cells never filled get -1. Returns the number of rounds, or -1 if the
    singles get stuck or the puzzle contradicts itself.
    """
    grid = puzzle.copy()
    cand = np.zeros(81, dtype=np.int64)
    place = np.zeros(81, dtype=np.int8)
    for c in range(81):
        schedule[c] = 0 if grid[c] > 0 else -1
    rounds = 0
    while True:
        blanks = 0
        for c in range(81):
            if grid[c] == 0:
                blanks += 1
                m = ALL_CANDIDATES
                for k in range(20):
                    d = grid[PEERS[c, k]]
                    if d > 0:
                        m &= ~(1 << (d - 1))
                if m == 0:
                    return -1
                cand[c] = m
            else:
                cand[c] = 1 << (grid[c] - 1)
        if blanks == 0:
            return rounds
        place[:] = 0
        for c in range(81):
            if grid[c] == 0 and POPCOUNT[cand[c]] == 1:
                place[c] = BIT_DIGIT[cand[c]]
        for u in range(27):
            single = _unit_singles(cand, u)
            if single < 0:
                return -1
            for k in range(9):
                c = UNITS[u, k]
                bit = cand[c] & single
                if grid[c] == 0 and bit:
                    if POPCOUNT[bit] > 1:
                        return -1  # two digits each need this cell
                    d = BIT_DIGIT[bit]
                    if place[c] != 0 and place[c] != d:
                        return -1
                    place[c] = d
        rounds += 1
        placed = 0
        for c in range(81):
            if place[c] > 0:
                grid[c] = place[c]
                schedule[c] = rounds
                placed += 1
        if placed == 0:
            for c in range(81):
                if grid[c] == 0:
                    schedule[c] = -1
            return -1


@njit(cache=True, parallel=True)
def _singles_schedule_batch(puzzles, schedules, rounds):
    for i in prange(puzzles.shape[0]):
        rounds[i] = _singles_schedule_one(puzzles[i], schedules[i])


# ---------------------------------------------------------------------------------------------
# Public API


def _as_grids(grids, name: str = "grids") -> tuple[np.ndarray, bool]:
    """(B, 81) int8 C-contiguous grids and whether one was given
    (:func:`unmask.sudoku.grids.as_grids`: puzzle strings or integer arrays)."""
    return as_grids(grids, name)


def _seed_u64(seed: int) -> np.uint64:
    return np.uint64(int(seed) & _MASK64)


def count_solutions(grids, limit: int = 2):
    """Number of solutions of each puzzle, counting stops at ``limit``.

    grids: (81,) or (B, 81). Returns an int for one grid, a (B,) int64 array for a batch.
    Contradictory clues give 0.
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    arr, single = _as_grids(grids)
    solutions = np.zeros_like(arr)
    counts = np.zeros(len(arr), dtype=np.int64)
    stats = np.zeros((len(arr), 2), dtype=np.int64)
    _count_batch(arr, int(limit), solutions, counts, stats)
    return int(counts[0]) if single else counts


def solve_batch(grids) -> tuple[np.ndarray, np.ndarray]:
    """Solve a batch: (solutions (B, 81) int8, solved (B,) bool).

    A puzzle with several solutions gets the first one in the fixed search order (digits
    ascending); an unsolvable one gets a row of zeros and solved = False.
    """
    arr, _ = _as_grids(grids)
    solutions = np.zeros_like(arr)
    counts = np.zeros(len(arr), dtype=np.int64)
    stats = np.zeros((len(arr), 2), dtype=np.int64)
    _count_batch(arr, 1, solutions, counts, stats)
    solved = counts > 0
    solutions[~solved] = 0
    return solutions, solved


def solve(grid) -> np.ndarray | None:
    """Solve one puzzle (81,) (or its 81-character string): its (81,) int8 solution, or None
    if it has none."""
    arr, single = _as_grids(grid, "grid")
    if not single:
        raise ValueError(f"solve takes one grid of shape (81,), got {arr.shape}; "
                         "use solve_batch for (B, 81)")
    solutions, solved = solve_batch(arr)
    return solutions[0] if solved[0] else None


def random_full_grids(n: int, seed: int, offset: int = 0) -> np.ndarray:
    """(n, 81) int8 random complete grids.

    Row i depends only on (seed, offset + i): ``random_full_grids(n, s)[k:]`` equals
    ``random_full_grids(n - k, s, offset=k)``, whatever the thread count.
    """
    out = np.zeros((int(n), 81), dtype=np.int8)
    if n:
        _full_grids_batch(_seed_u64(seed), int(offset), out)
    return out


def make_puzzles(solutions, seed: int, min_clues: int | None = None,
                 offset: int = 0) -> np.ndarray:
    """Puzzles (n, 81) int8 with unique solutions ``solutions`` (n, 81).

    Clues are removed in a random order whenever the solution stays unique. With
    ``min_clues=None`` the result is minimal (no clue can be removed); otherwise removal stops
    once ``min_clues`` clues remain (the puzzle is then not necessarily minimal). Row i depends
    only on (seed, offset + i) and solutions[i].
    """
    arr, single = _as_grids(solutions, "solutions")
    if not is_valid_solution(arr).all():
        raise ValueError("make_puzzles needs complete valid grids as solutions")
    out = np.zeros_like(arr)
    if len(arr):
        _dig_batch(arr, _seed_u64(seed), int(offset), int(min_clues or 0), out)
    return out[0] if single else out


@dataclass(frozen=True)
class Rating:
    """Difficulty of a batch of B puzzles.

    singles: (B,) bool, naked and hidden singles alone fill the grid.
    guesses: (B,) int64, digits tried at branch cells by the fixed-order solver (first cell
        with the fewest candidates, digits ascending, propagating singles after each guess)
        until it reaches the first solution; 0 exactly when ``singles``.
    backtracks: (B,) int64, those guesses that propagation refuted (dead ends).
    solved: (B,) bool, the puzzle has a solution.
    """

    singles: np.ndarray
    guesses: np.ndarray
    backtracks: np.ndarray
    solved: np.ndarray


def rate(puzzles) -> Rating:
    """Rate puzzles (81,) or (B, 81) with the deterministic fixed-order solver."""
    arr, _ = _as_grids(puzzles, "puzzles")
    solutions = np.zeros_like(arr)
    counts = np.zeros(len(arr), dtype=np.int64)
    stats = np.zeros((len(arr), 2), dtype=np.int64)
    _count_batch(arr, 1, solutions, counts, stats)
    solved = counts > 0
    return Rating(
        singles=solved & (stats[:, 0] == 0),
        guesses=stats[:, 0].copy(),
        backtracks=stats[:, 1].copy(),
        solved=solved,
    )


def singles_schedule(puzzles) -> tuple[np.ndarray, np.ndarray]:
    """Rounds of parallel singles: (schedule (B, 81) int8, rounds (B,) int64).

    Each round places, all at once, every naked and hidden single implied by the digits placed
    so far. schedule[b, c] is the round that fills cell c (0 for clues, -1 if never filled);
    rounds[b] the number of rounds to fill the grid, -1 if singles get stuck.
    """
    arr, _ = _as_grids(puzzles, "puzzles")
    schedules = np.zeros_like(arr)
    rounds = np.zeros(len(arr), dtype=np.int64)
    _singles_schedule_batch(arr, schedules, rounds)
    return schedules, rounds


def rounds_of_singles(puzzles):
    """Rounds of parallel naked/hidden singles to fill each puzzle, -1 if they get stuck.

    An int for one (81,) puzzle, a (B,) int64 array for (B, 81): a reference for how few
    parallel steps a decoder needs when it commits only to forced cells.
    """
    arr, single = _as_grids(puzzles, "puzzles")
    rounds = singles_schedule(arr)[1]
    return int(rounds[0]) if single else rounds


_DIGITS = np.arange(1, 10, dtype=np.int8)


def is_valid_solution(grids, puzzles=None) -> np.ndarray:
    """(B,) bool: each grid is complete, every row, column and box holds 1..9 once, and (if
    ``puzzles`` (B, 81) is given) every clue of the puzzle is kept. Accepts (81,) inputs and
    puzzle strings too (:func:`unmask.sudoku.grids.as_grids`).
    """
    g, _ = _as_grids(grids)
    units = np.sort(g[:, UNITS], axis=-1)  # (B, 27, 9)
    ok = (units == _DIGITS).all(axis=(1, 2))
    if puzzles is not None:
        p, _ = _as_grids(puzzles, "puzzles")
        if p.shape != g.shape:
            raise ValueError(f"puzzles shape {p.shape} does not match grids shape {g.shape}")
        ok &= ((p == 0) | (p == g)).all(axis=1)
    return ok
