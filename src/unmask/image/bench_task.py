"""The image bench as the command line reads it: its flags, defaults and
labels (:class:`ImageBenchTask`); :mod:`unmask.image.bench` runs it. This module imports
neither torch nor numpy, so that ``unmask image bench --help`` does not."""

from __future__ import annotations

from unmask.bench.contract import BenchTask

#: every registered sampler at its usual settings (mi-guided needs an MI estimator, and there
#: is none for digits), fixed-count parallel decoding at 4 and 8 pixels per pass, and every
#: pixel drafted at once with its passes verified
DEFAULT_SPECS = [
    "confidence", "entropy", "margin", "uniform", "pc", "klass", "eb:gamma=0.1",
    "threshold:tau=0.9", "topk:k=4", "topk:k=8", "topk:k=64+verify", "info-gain",
    "info-gain:bypass=0.9", "lookum",
]


class ImageBenchTask(BenchTask):
    """Every sampler on class-conditional digits: FID, IS-style score and class accuracy of
    the samples against forward passes; the accuracy is the class accuracy."""

    name = "image"

    default_specs = DEFAULT_SPECS

    default_model = "image"

    default_limit = 500

    min_limit = 2

    items = "samples per sampler (classes in turn)"

    default_temperatures = "1.0"

    all_temperatures = True

    accuracy_label = "class accuracy %"

    aliases = {"--n": "--limit"}

    def add_arguments(self, p, types) -> None:
        p.add_argument("--classifier", default="digit_classifier",
                       help="shipped classifier name or a classifier folder (the metrics' "
                            "features)")
        types.add_confidence_arg(p)
        p.add_argument("--rounds", type=types.int_at_least(2), default=200,
                       help="bootstrap resamples")
        p.add_argument("--grid", default=None, metavar="F.png",
                       help="write a PNG with one row of samples per sampler")


#: what ``unmask image bench`` builds its flags from, before importing the bench
DECLARED = ImageBenchTask()
