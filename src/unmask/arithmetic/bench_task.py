"""The arithmetic bench as the command line reads it: its options (:class:`ArithmeticBench`),
defaults and labels (:class:`ArithmeticBenchTask`); :mod:`unmask.arithmetic.bench` runs it.
This module imports neither torch nor numpy, so that ``unmask arithmetic bench --help`` does
not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from unmask.bench.contract import BenchOptions, BenchTask


@dataclass(frozen=True, kw_only=True)
class ArithmeticBench(BenchOptions):
    """What an arithmetic bench run is asked for (``unmask arithmetic bench``'s flags): the
    shared options (``limit``: inputs per task; ``temperatures``: unconditional
    generation's) and

    Attributes:
        tasks: of generate, product (factors given), factors (product given): a tuple, or
            their names separated by commas (read as the tuple).
    """

    task: ClassVar[str] = "arithmetic"

    model: str | None = "arithmetic"
    limit: int | None = 500
    temperatures: tuple[float, ...] = (1.0,)
    tasks: tuple[str, ...] = ("generate", "product", "factors")

    def __post_init__(self):
        if isinstance(self.tasks, str):
            object.__setattr__(self, "tasks", tuple(
                t.strip() for t in self.tasks.split(",") if t.strip()))


class ArithmeticBenchTask(BenchTask):
    """Every sampler on the multiplication model's tasks: accuracy against forward passes;
    the temperature is that of unconditional generation (the conditional tasks decode at
    0)."""

    name = "arithmetic"

    options = ArithmeticBench

    items = "inputs per task"

    aliases = {"--prompts": "--limit", "--temperature": "--temperatures"}


#: what ``unmask arithmetic bench`` builds its flags from, before importing the bench
DECLARED = ArithmeticBenchTask()
