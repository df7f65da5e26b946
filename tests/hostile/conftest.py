"""Shared pieces of the hostile-input suite: run a command in-process, check the refusal
contract (exit 0, or exit 2 with exactly one stderr line and no traceback)."""

import json
from pathlib import Path

import pytest
import torch

from unmask.cli import main
from unmask.models.transformer import MDMTransformer
from unmask.sudoku.datasets import load_set
from unmask.sudoku.parse import to_string
from unmask.sudoku.train import sudoku_model_config


class Ran:
    """One command's outcome: exit status, stdout, stderr."""

    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err

    def refused(self, needle: str | None = None) -> str:
        """Assert exit 2 with one line ``error: ...`` (containing ``needle``); the line."""
        assert self.code == 2, (self.code, self.out[-500:], self.err[-2000:])
        lines = self.err.strip().splitlines()
        assert len(lines) == 1, self.err
        assert lines[0].startswith("error: ") and "Traceback" not in self.err
        if needle is not None:
            assert needle in lines[0], lines[0]
        return lines[0]

    def ok_or_refused(self) -> bool:
        """The contract: exit 0, or a one-line refusal. True when it ran."""
        if self.code == 0:
            assert "Traceback" not in self.err
            return True
        self.refused()
        return False


@pytest.fixture
def run(capsys):
    def go(*argv) -> Ran:
        capsys.readouterr()
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return go


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A random one-layer Sudoku MDM saved as a model folder."""
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("hostile_tiny")
    MDMTransformer(sudoku_model_config(d_model=16, n_layers=1, n_heads=2, d_ff=32)
                   ).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def nearly_solved() -> tuple[str, str]:
    """(a puzzle with one blank, its solution) from the medium set: any decoder solves it in
    one pass."""
    _, solutions = load_set("medium")
    grid = solutions[0].copy()
    full = to_string(grid)
    grid[40] = 0
    return to_string(grid), full


def files_in(folder: Path) -> set[str]:
    """Names in ``folder`` (to see that a refusal left nothing behind)."""
    return {p.name for p in folder.iterdir()}


def strict_json(line: str):
    """``json.loads`` that refuses NaN and infinities (which are not JSON)."""
    def bad(constant):
        raise ValueError(f"not JSON: {constant}")

    return json.loads(line, parse_constant=bad)
