"""The sudoku bench as the command line reads it: its options (:class:`SudokuBench`), defaults
and labels (:class:`SudokuBenchTask`); :mod:`unmask.sudoku.bench` runs it. This module imports
neither torch nor numpy, so that ``unmask sudoku bench --help`` does not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from unmask.bench.contract import BenchTask, CorrectedBenchOptions

#: the published reference of arXiv 2605.20187 (same protocol: 1,000 hard puzzles, one MDM):
#: (label, NFE, solved %)
SEED_REFERENCE = [("ref sequential", 53.9, 61.6), ("ref top-7", 9.0, 36.8),
                  ("ref MI-guided γ=0.3", 15.2, 63.6), ("ref MI-guided γ=0.6", 9.7, 56.2)]

DEFAULT_SPECS = [
    "confidence", "entropy", "margin",
    "topk:k=3", "topk:k=5", "topk:k=7",
    "eb:gamma=0.01,order=confidence", "eb:gamma=0.03,order=confidence",
    "eb:gamma=0.1,order=confidence",
    "eb:gamma=0.3,order=confidence", "eb:gamma=1.0,order=confidence",
    "eb:gamma=0.1", "eb:gamma=1.0",
    "threshold:tau=0.99", "threshold:tau=0.9", "threshold:tau=0.7",
    "mi-guided:gamma=0.1,order=confidence", "mi-guided:gamma=0.3,order=confidence",
    "mi-guided:gamma=0.6,order=confidence", "mi-guided:gamma=1.0,order=confidence",
    "mi-guided:gamma=0.3", "mi-guided:gamma=0.6",
    # verified passes (docs/verify.md)
    "mi-guided:gamma=1.0,order=confidence+verify=0.002",
    "eb:gamma=1.0,order=confidence+verify=0.002",
    "info-gain", "lookum",
]


@dataclass(frozen=True, kw_only=True)
class SudokuBench(CorrectedBenchOptions):
    """What a Sudoku bench run is asked for (``unmask sudoku bench``'s flags): the shared
    options and

    Attributes:
        set: hard | medium | a UTF-8 puzzle file.
        batch_size: puzzles per decode call.
        no_self_condition: (self-conditioning models) give every pass zeros instead of the
            previous pass's beliefs, to measure what they add.
        rules: decode under the Sudoku rules (no digit twice in a unit, also within a
            pass's commit; a board whose blank has no digit left ends: the dead-end column).
    """

    task: ClassVar[str] = "sudoku"

    set: str = "hard"
    batch_size: int = 1000
    no_self_condition: bool = False
    rules: bool = False


class SudokuBenchTask(BenchTask):
    """Every sampler on one puzzle set: solved share against forward passes."""

    name = "sudoku"

    options = SudokuBench

    default_specs = DEFAULT_SPECS

    items = "puzzles (the first of the set)"

    model_task = "sudoku"

    estimator = True

    accuracy_label = "solved %"

    references = SEED_REFERENCE


#: what ``unmask sudoku bench`` builds its flags from, before importing the bench
DECLARED = SudokuBenchTask()
