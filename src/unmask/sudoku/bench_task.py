"""The sudoku bench as the command line reads it: its flags, defaults and
labels (:class:`SudokuBenchTask`); :mod:`unmask.sudoku.bench` runs it. This module imports
neither torch nor numpy, so that ``unmask sudoku bench --help`` does not."""

from __future__ import annotations

from unmask.bench.contract import BenchTask

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


class SudokuBenchTask(BenchTask):
    """Every sampler on one puzzle set: solved share against forward passes."""

    name = "sudoku"

    default_specs = DEFAULT_SPECS

    items = "puzzles (the first of the set)"

    model_task = "sudoku"

    corrector = True

    estimator = True

    accuracy_label = "solved %"

    references = SEED_REFERENCE

    def add_arguments(self, p, types) -> None:
        p.add_argument("--set", default="hard",
                       help="hard | medium | a UTF-8 puzzle file (default hard)")
        p.add_argument("--batch-size", type=types.positive_int, default=1000,
                       help="puzzles per decode call (default %(default)s)")
        p.add_argument("--no-self-condition", action="store_true",
                       help="(self-conditioning models) give every pass zeros instead of the "
                            "previous pass's beliefs, to measure what they add")


#: what ``unmask sudoku bench`` builds its flags from, before importing the bench
DECLARED = SudokuBenchTask()
