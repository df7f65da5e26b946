"""Regenerate the packaged Sudoku test sets src/unmask/sudoku/data/{hard,medium}.txt.

The output is byte-identical on every run and machine (the generator is keyed by seed and
candidate index only). Usage: python scripts/make_sudoku_sets.py [--out DIR]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from unmask.sudoku.datasets import (
    DATA_DIR,
    TEST_SET_KINDS,
    TEST_SET_SEEDS,
    TEST_SET_SIZE,
    write_set,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="output folder")
    parser.add_argument("--n", type=int, default=TEST_SET_SIZE, help="puzzles per set")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for kind in TEST_SET_KINDS:
        start = time.perf_counter()
        path = args.out / f"{kind}.txt"
        write_set(path, kind, args.n, TEST_SET_SEEDS[kind])
        print(f"{path}: {args.n} puzzles in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
