"""Regenerate the packaged Sudoku test sets src/unmask/sudoku/data/{hard,medium}.txt.

The output is byte-identical on every run and machine (the generator is keyed by seed and
candidate index only). Usage: python scripts/make_sudoku_sets.py [--out DIR]

``--seed S`` draws another set under the same rule from stream S instead of the packaged
seed, for example a validation set that shares no puzzle with the test sets:
python scripts/make_sudoku_sets.py --kinds hard --seed 2001 --out runs/val
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
    parser.add_argument("--kinds", nargs="+", choices=TEST_SET_KINDS, default=list(TEST_SET_KINDS),
                        help="which sets to write")
    parser.add_argument("--seed", type=int, default=None,
                        help="stream seed for every set written (default: the packaged seeds)")
    args = parser.parse_args()
    if args.seed is not None and args.seed in TEST_SET_SEEDS.values():
        parser.error(f"--seed {args.seed} is a packaged test set's seed")
    args.out.mkdir(parents=True, exist_ok=True)
    for kind in args.kinds:
        start = time.perf_counter()
        path = args.out / f"{kind}.txt"
        seed = TEST_SET_SEEDS[kind] if args.seed is None else args.seed
        write_set(path, kind, args.n, seed)
        print(f"{path}: {args.n} puzzles in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
