"""The Sudoku bench's own measures: same-pass peer clashes."""

import torch

from unmask.sudoku import grid_to_tokens, load_set
from unmask.sudoku.bench import same_pass_clashes


def test_clashes_count_same_digit_peers_of_one_pass_only():
    _, solutions = load_set("hard")
    tokens = grid_to_tokens(solutions[:1]).repeat(4, 1)
    steps = torch.arange(81).repeat(4, 1)  # sequential: one cell per pass
    tokens[1:, 0] = tokens[1:, 1]  # cell 0 takes the digit of its row peer, cell 1
    assert same_pass_clashes(tokens[:1], steps[:1]).tolist() == [0]
    assert same_pass_clashes(tokens[1:2], steps[1:2]).tolist() == [0]  # different passes
    steps[2, 1] = steps[2, 0]  # the two same-digit peers revealed in one pass
    assert same_pass_clashes(tokens[2:3], steps[2:3]).tolist() == [1]
    steps[3, 1] = steps[3, 0] = -1  # both given: not the decoder's doing
    assert same_pass_clashes(tokens[3:4], steps[3:4]).tolist() == [0]
    # all in one pass: the valid board has no clash; the corrupted one has one with cell 1,
    # and one with the column-0 / box-0 peer that holds the digit (a valid board has it once
    # in column 0; it is in box 0 already as cell 1)
    one_pass = torch.zeros(2, 81, dtype=torch.long)
    assert same_pass_clashes(tokens[:2], one_pass).tolist() == [0, 2]
