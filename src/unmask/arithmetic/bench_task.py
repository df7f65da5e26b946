"""The arithmetic bench as the command line reads it: its flags, defaults and
labels (:class:`ArithmeticBenchTask`); :mod:`unmask.arithmetic.bench` runs it. This module imports
neither torch nor numpy, so that ``unmask arithmetic bench --help`` does not."""

from __future__ import annotations

from unmask.bench.contract import BenchTask


class ArithmeticBenchTask(BenchTask):
    """Every sampler on the multiplication model's tasks: accuracy against forward passes;
    the temperature is that of unconditional generation (the conditional tasks decode at
    0)."""

    name = "arithmetic"

    default_model = "arithmetic"

    default_limit = 500

    items = "inputs per task"

    default_temperatures = "1.0"

    aliases = {"--prompts": "--limit", "--temperature": "--temperatures"}

    def add_arguments(self, p, types) -> None:
        p.add_argument("--tasks", default="generate,product,factors",
                       help="comma-separated: generate, product (factors given), factors "
                            "(product given)")


#: what ``unmask arithmetic bench`` builds its flags from, before importing the bench
DECLARED = ArithmeticBenchTask()
