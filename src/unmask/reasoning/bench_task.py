"""The reasoning bench as the command line reads it: its options (:class:`ReasoningBench`),
defaults and labels (:class:`ReasoningBenchTask`); :mod:`unmask.reasoning.bench` runs it.
This module imports neither torch nor numpy, so that ``unmask reasoning bench --help`` does
not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from unmask.bench.contract import BenchOptions, BenchTask

#: every sampler that needs no extra file, at its usual settings, fixed-count parallel
#: decoding, and verified drafts (``mi-guided`` needs an MI estimator of the model: add it with
#: ``--samplers mi-guided:estimator=DIR``)
DEFAULT_SPECS = [
    "confidence", "entropy", "margin", "uniform", "klass", "info-gain", "lookum",
    "eb:gamma=0.1", "eb:gamma=1.0", "threshold:tau=0.9", "dus", "topk:k=2", "topk:k=4",
    "topk:k=4+verify", "eb:gamma=1.0,order=confidence+verify=0.002",
]


@dataclass(frozen=True, kw_only=True)
class ReasoningBench(BenchOptions):
    """What a reasoning bench run is asked for (``unmask reasoning bench``'s flags): the
    shared options (``limit``: problems per task, of generator seeds ``seed`` ..
    ``seed + limit - 1``) and

    Attributes:
        tasks: the tasks' names (None: all of :data:`unmask.reasoning.tasks.TASKS`).
        confidence: what confidence-type rules rank by when sampling (draw or max:
            :class:`~unmask.decode.DecodeConfig`).
    """

    task: ClassVar[str] = "reasoning"

    model: str | None = "text"
    limit: int | None = 100
    tasks: tuple[str, ...] | None = None
    confidence: str = "draw"


class ReasoningBenchTask(BenchTask):
    """Samplers on the reasoning tasks, each answer scored by its task's verifier; a
    pooled row per sampler and temperature."""

    name = "reasoning"

    options = ReasoningBench

    default_specs = DEFAULT_SPECS

    model_help = ("shipped model name or a transformers folder (default: the shipped text "
                  "MDM)")

    items = "problems per task (of seeds --seed .. --seed + limit - 1)"

    all_temperatures = True


#: what ``unmask reasoning bench`` builds its flags from, before importing the bench
DECLARED = ReasoningBenchTask()
