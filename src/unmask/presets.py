"""Named decoding configurations: ``lossless``, ``fast`` and ``quality``.

A preset is a name for a sampler spec (:mod:`unmask.samplers.spec`): everything it decodes
with, verification options included, is said in the spec, so ``--preset fast`` and
``--sampler`` with its spec decode alike. Every preset is defined for any model: each names
a rule that reads only the model's own distributions (no estimator, no task), so it decodes
Sudoku, proteins, antibodies, text or images alike. Each says in ``chosen_on`` what it was
chosen on; the budgets were set on the shipped Sudoku model, where sequential accuracy can be
checked exactly, and carry to another model as budgets in nats, not as a guarantee of its
accuracy there.

* ``quality``: sequential confidence decoding, one position per pass.
* ``lossless``: the parallel rule whose accuracy stays at sequential decoding's while taking
  the least wall-clock time: EB-Sampler at a small error budget (one sequence per pass).
* ``fast``: the most accurate rule at about an eighth of sequential decoding's passes.

For a model with a shipped MI estimator, plain ``mi-guided`` decodes with the estimator's
own recommended setting (``recommended.json`` beside its weights, chosen by a sweep on that
model; :mod:`unmask.samplers.mi_guided`).

A preset decodes as ``parse_spec(preset_spec(name)).build()``
(:func:`unmask.samplers.spec.parse_spec`); this module imports no sampler, so the command line
lists the presets without importing torch.
"""

from __future__ import annotations

from typing import NamedTuple

from unmask.errors import UnmaskError


class Preset(NamedTuple):
    """One named configuration: ``spec``, a sampler spec; ``doc``, one line on what it is
    for; ``chosen_on``, what it was chosen on (the measurements, where they are)."""

    spec: str
    doc: str
    chosen_on: str


PRESETS: dict[str, Preset] = {
    "quality": Preset("confidence", "sequential confidence decoding: one position per pass",
                      "the reference every parallel rule is measured against"),
    "lossless": Preset("eb:gamma=0.01,order=confidence",
                       "EB-Sampler at an error budget of 0.01 nats: sequential decoding's "
                       "accuracy in about a quarter of its passes and time",
                       "shipped Sudoku model, three sets of 1,000 hard puzzles: within 0.5 "
                       "points of sequential decoding on each at 14.7 passes against 57, "
                       "the fastest such rule without an estimator "
                       "(experiments/wallclock/README.md)"),
    "fast": Preset("eb:gamma=1.0,order=confidence+verify=0.03",
                   "verified EB drafts, every prefix checked: the best accuracy at about an "
                   "eighth of sequential decoding's passes",
                   "shipped Sudoku model, 1,000 hard puzzles: 79.1% at 7.6 passes against "
                   "sequential decoding's 80.0% at 57 (experiments/wallclock/README.md)"),
}


def preset(name: str) -> Preset:
    """The :class:`Preset` called ``name``; UnmaskError naming ``preset`` for unknown names."""
    if name not in PRESETS:
        raise UnmaskError(f"preset: unknown {name!r}; choose from {', '.join(PRESETS)}")
    return PRESETS[name]


def preset_spec(name: str) -> str:
    """The sampler spec of preset ``name`` (:func:`preset`)."""
    return preset(name).spec
