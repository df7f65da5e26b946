"""How fast the command line answers: ``unmask --help`` (and ``--version``, a mistyped
command, ``unmask sudoku --help``) and the ``--help`` of leaf commands against ``python -c
pass``, each a fresh interpreter, timed in interleaved rounds, with a bench's ``--help`` (its
flags are its task's BenchTask, whose module imports torch) beside them for scale.

    python benchmarks/cli_startup.py [--rounds 5]

Prints the median wall-clock seconds of each and its ratio to ``python -c pass``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
CASES = {
    "python -c pass": ["-c", "pass"],
    "unmask --help": ["-m", "unmask", "--help"],
    "unmask --version": ["-m", "unmask", "--version"],
    "unmask sudok (typo)": ["-m", "unmask", "sudok"],
    "unmask sudoku --help": ["-m", "unmask", "sudoku", "--help"],
    "unmask generate --help": ["-m", "unmask", "generate", "--help"],
    "unmask sudoku solve --help": ["-m", "unmask", "sudoku", "solve", "--help"],
    "unmask mi fit --help": ["-m", "unmask", "mi", "fit", "--help"],
    "unmask results plot --help": ["-m", "unmask", "results", "plot", "--help"],
    "unmask protein train --help": ["-m", "unmask", "protein", "train", "--help"],
    "unmask sudoku bench --help": ["-m", "unmask", "sudoku", "bench", "--help"],
}


def seconds(args: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.rounds):  # interleaved, so load on the machine hits every case alike
        for name, argv in CASES.items():
            times[name].append(seconds(argv))
    base = statistics.median(times["python -c pass"])
    print(f"{'command':<30}{'median s':>10}{'min s':>9}{'x python -c pass':>18}")
    for name, t in times.items():
        med = statistics.median(t)
        print(f"{name:<30}{med:>10.3f}{min(t):>9.3f}{med / base:>18.1f}")


if __name__ == "__main__":
    main()
