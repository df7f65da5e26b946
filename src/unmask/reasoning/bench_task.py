"""The reasoning bench as the command line reads it: its flags, defaults and
labels (:class:`ReasoningBenchTask`); :mod:`unmask.reasoning.bench` runs it. This module imports
neither torch nor numpy, so that ``unmask reasoning bench --help`` does not."""

from __future__ import annotations

from unmask.bench.contract import BenchTask
from unmask.reasoning.tasks import TASKS

#: every sampler that needs no extra file, at its usual settings, fixed-count parallel
#: decoding, and verified drafts (``mi-guided`` needs an MI estimator of the model: add it with
#: ``--samplers mi-guided:estimator=DIR``)
DEFAULT_SPECS = [
    "confidence", "entropy", "margin", "uniform", "klass", "info-gain", "lookum",
    "eb:gamma=0.1", "eb:gamma=1.0", "threshold:tau=0.9", "dus", "topk:k=2", "topk:k=4",
    "topk:k=4+verify", "eb:gamma=1.0,order=confidence+verify=0.002",
]


class ReasoningBenchTask(BenchTask):
    """Samplers on the reasoning tasks, each answer scored by its task's verifier; a
    pooled row per sampler and temperature."""

    name = "reasoning"

    default_specs = DEFAULT_SPECS

    default_model = "text"

    model_help = ("shipped model name or a transformers folder (default: the shipped text "
                  "MDM)")

    default_limit = 100

    items = "problems per task (of seeds --seed .. --seed + limit - 1)"

    all_temperatures = True

    def add_arguments(self, p, types) -> None:
        p.add_argument("--tasks", nargs="+", default=None, metavar="TASK",
                       help=f"tasks to run (default all: {', '.join(TASKS)})")
        types.add_confidence_arg(p)


#: what ``unmask reasoning bench`` builds its flags from, before importing the bench
DECLARED = ReasoningBenchTask()
