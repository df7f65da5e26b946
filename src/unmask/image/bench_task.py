"""The image bench as the command line reads it: its options (:class:`ImageBench`), defaults
and labels (:class:`ImageBenchTask`); :mod:`unmask.image.bench` runs it. This module imports
neither torch nor numpy, so that ``unmask image bench --help`` does not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from unmask.bench.contract import BenchOptions, BenchTask

#: every registered sampler at its usual settings (mi-guided needs an MI estimator, and there
#: is none for digits), fixed-count parallel decoding at 4 and 8 pixels per pass, and every
#: pixel drafted at once with its passes verified
DEFAULT_SPECS = [
    "confidence", "entropy", "margin", "uniform", "pc", "klass", "eb:gamma=0.1",
    "threshold:tau=0.9", "topk:k=4", "topk:k=8", "topk:k=64+verify", "info-gain",
    "info-gain:bypass=0.9", "lookum",
]


@dataclass(frozen=True, kw_only=True)
class ImageBench(BenchOptions):
    """What an image bench run is asked for (``unmask image bench``'s flags): the shared
    options (``limit``: samples per sampler, classes in turn; at least 2) and

    Attributes:
        classifier: shipped classifier name or a classifier folder (the metrics' features).
        confidence: what confidence-type rules rank by when sampling (draw or max:
            :class:`~unmask.decode.DecodeConfig`).
        rounds: bootstrap resamples.
        grid: a PNG to write with one row of samples per sampler (None: none).
    """

    task: ClassVar[str] = "image"

    model: str | None = "image"
    limit: int | None = 500
    temperatures: tuple[float, ...] = (1.0,)
    classifier: str = "digit_classifier"
    confidence: str = "draw"
    rounds: int = 200
    grid: str | None = None


class ImageBenchTask(BenchTask):
    """Every sampler on class-conditional digits: FID, IS-style score and class accuracy of
    the samples against forward passes; the accuracy is the class accuracy."""

    name = "image"

    options = ImageBench

    default_specs = DEFAULT_SPECS

    min_limit = 2

    items = "samples per sampler (classes in turn)"

    all_temperatures = True

    accuracy_label = "class accuracy %"

    aliases = {"--n": "--limit"}


#: what ``unmask image bench`` builds its flags from, before importing the bench
DECLARED = ImageBenchTask()
