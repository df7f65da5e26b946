"""Fine-tuning data from a decoder's own states: wrong tokens back at MASK, answers kept."""

import numpy as np
import torch

from unmask.sudoku.solver import is_valid_solution
from unmask.sudoku.tokens import MASK_ID, tokens_to_grid
from unmask.sudoku.train import DecoderStatePool, SudokuPool, mixed_batch


def _pool_and_states():
    pool = SudokuPool.generate(6, seed=8)
    sols = torch.from_numpy(pool.solutions.astype(np.int64)) - 1  # digits 1..9 -> tokens 0..8
    tokens = sols[[0, 2, 2, 5]].clone()
    tokens[:, :10] = MASK_ID
    wrong = torch.zeros_like(tokens, dtype=torch.bool)
    tokens[1, 20] = (tokens[1, 20] + 1) % 9  # a wrong decoded digit
    wrong[1, 20] = True
    tokens[3, :10] = sols[5, :10]  # fully (and rightly) decoded: nothing left to learn
    groups = torch.tensor([0, 2, 2, 5])
    return sols, tokens, wrong, groups


def test_wrong_tokens_go_back_to_mask_and_finished_states_are_dropped():
    sols, tokens, wrong, groups = _pool_and_states()
    data = DecoderStatePool.from_decoded(tokens, wrong, groups, sols)
    assert data.states.shape == data.solutions.shape == (3, 81)
    np.testing.assert_array_equal(data.solutions, sols[[0, 2, 2]].numpy())
    assert data.states[1, 20] == MASK_ID and (data.states[1] == MASK_ID).sum() == 11
    assert (data.states[[0, 2]] == MASK_ID).sum(1).tolist() == [10, 10]


def test_batches_are_consistent_boards_and_pure_functions_of_step():
    sols, tokens, wrong, groups = _pool_and_states()
    data = DecoderStatePool.from_decoded(tokens, wrong, groups, sols)
    a, b = data.batch(3, 32, seed=1), data.batch(3, 32, seed=1)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0], data.batch(4, 32, seed=1)[0])
    inputs, targets, mask = a
    assert torch.equal(mask, inputs == MASK_ID) and mask.any(1).all()
    # the symmetry moved state and solution together: kept tokens agree with the answer,
    # and the answer is still a valid grid
    assert torch.equal(inputs[~mask], targets[~mask])
    grids = tokens_to_grid(targets)
    assert is_valid_solution(grids, grids).all()
    assert (mask.sum(1) == 10).sum() > 0 and (mask.sum(1) == 11).sum() > 0


def test_mixed_batch_takes_its_share_from_each_source():
    def source(value):
        return lambda step, n: tuple(torch.full((n, 81), value) for _ in range(3))

    inputs, targets, _ = mixed_batch(source(1), source(2), 0.25)(0, 8)
    assert inputs[:, 0].tolist() == [1] * 6 + [2] * 2
    assert mixed_batch(source(1), source(2), 1.0)(0, 4)[0][:, 0].tolist() == [2] * 4
