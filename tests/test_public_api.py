"""The public API as a newcomer meets it: ``dir(unmask)`` lists each public name once and
nothing private; the task helpers take what the command line takes (Sudoku puzzle strings) or
say in one line what they expect."""

import importlib
import inspect

import numpy as np
import pytest
import torch

import unmask

PUZZLE = ("..3.2.6..9..3.5..1..18.64....81.29..7.......8..67.82....26.95..8..2.3..9..5.1.3..")


def test_dir_lists_each_public_name_once_and_nothing_private():
    before = dir(unmask)
    for name in ("Verified", "decode", "make_sampler", "generate", "infill"):
        getattr(unmask, name)  # loading a name binds it: it is still listed once
    importlib.import_module("unmask.sudoku")  # a subpackage loaded

    after = dir(unmask)
    assert after == before == sorted(set(after))
    assert set(after) == {*unmask.__all__, "__version__"}
    for private in ("sys", "importlib", "types", "annotations", "_EXPORTS", "_Package"):
        assert private not in after
    assert all(callable(getattr(unmask, n)) for n in unmask.__all__)
    assert callable(unmask.decode) and callable(unmask.generate)  # the functions, not modules


def test_grid_to_tokens_takes_the_puzzle_strings_the_cli_takes():
    from unmask.sudoku import grid_to_tokens, parse_puzzle

    grid = parse_puzzle(PUZZLE)
    assert torch.equal(grid_to_tokens(PUZZLE), grid_to_tokens(grid))
    assert torch.equal(grid_to_tokens(PUZZLE.replace(".", "0")), grid_to_tokens(grid))
    both = grid_to_tokens([PUZZLE, PUZZLE])
    assert both.shape == (2, 81) and torch.equal(both[1], grid_to_tokens(grid))
    assert torch.equal(grid_to_tokens(np.array([PUZZLE])), both[:1])
    with pytest.raises(unmask.UnmaskError, match="bad character 'x' at position 1"):
        grid_to_tokens("x" + PUZZLE[1:])
    with pytest.raises(unmask.UnmaskError, match="expected 81 cells, got 3"):
        grid_to_tokens(["123"])
    with pytest.raises(unmask.UnmaskError, match=r"expected puzzle strings .* got float"):
        grid_to_tokens(3.5)


def test_the_sudoku_helpers_take_puzzle_strings():
    from unmask.sudoku import (
        count_solutions,
        format_grid,
        is_valid_solution,
        parse_puzzle,
        rate,
        rounds_of_singles,
        solve,
        to_string,
    )

    grid = parse_puzzle(PUZZLE)
    solution = solve(PUZZLE)
    assert np.array_equal(solution, solve(grid)) and count_solutions(PUZZLE) == 1
    assert is_valid_solution(to_string(solution), PUZZLE).all()
    assert to_string(PUZZLE) == PUZZLE and format_grid(PUZZLE) == format_grid(grid)
    assert rounds_of_singles(PUZZLE) == rounds_of_singles(grid)
    assert rate([PUZZLE]) == rate(grid[None])


def _one_argument_helpers():
    for pkg in ("sudoku", "protein", "arithmetic", "antibody"):
        module = importlib.import_module(f"unmask.{pkg}")
        for name in module.__all__:
            f = getattr(module, name)
            if not inspect.isfunction(f):
                continue
            required = [p for p in inspect.signature(f).parameters.values()
                        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                                                                p.POSITIONAL_OR_KEYWORD)]
            if len(required) <= 1:
                yield f"{pkg}.{name}", f


@pytest.mark.parametrize("name, helper", list(_one_argument_helpers()))
@pytest.mark.parametrize("bad", ["garbage", 3.5, None])
def test_a_task_helper_given_the_wrong_thing_says_what_it_expects(name, helper, bad):
    """Each helper of a task package either reads the value or refuses it in one line (a
    ValueError such as UnmaskError), never with a raw AttributeError, IndexError or numpy's
    TypeError."""
    try:
        helper(bad)
    except ValueError as e:
        assert "\n" not in str(e) and str(e), name
    except Exception as e:  # noqa: BLE001 - the test names what leaked
        pytest.fail(f"{name}({bad!r}) leaked {type(e).__name__}: {e}")
