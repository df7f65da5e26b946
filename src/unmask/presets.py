"""Named decoding configurations: ``lossless``, ``fast`` and ``quality``.

A preset is a sampler spec (:mod:`unmask.samplers.spec`) and, for verified specs, the prefixes
a verified pass evaluates (:class:`~unmask.samplers.verified.Verified`); ``preset_sampler``
builds it. The choices and their measurements on the shipped Sudoku model are in
``experiments/wallclock/README.md``.

* ``quality``: sequential confidence decoding, one position per pass.
* ``lossless``: the parallel rule whose accuracy stays at sequential decoding's while taking
  the least wall-clock time: EB-Sampler at a small error budget (one sequence per pass).
* ``fast``: the most accurate rule at about an eighth of sequential decoding's passes.
"""

from __future__ import annotations

from dataclasses import dataclass

from unmask.errors import UnmaskError
from unmask.samplers.base import Sampler
from unmask.samplers.spec import SamplerSpec, parse_spec
from unmask.samplers.verified import PREFIXES, Verified


@dataclass(frozen=True)
class Preset:
    """One named configuration.

    spec: the sampler spec.
    prefixes: for a verified spec, the prefixes each pass evaluates (``"all"`` or
        ``"doubling"``); ignored otherwise.
    doc: one line on what it is for.
    """

    spec: str
    doc: str
    prefixes: str = "all"

    def __post_init__(self):
        if self.prefixes not in PREFIXES:
            raise UnmaskError(f"prefixes: expected one of {PREFIXES}, got {self.prefixes!r}")

    @property
    def text(self) -> str:
        """The spec, with the prefix scheme when it is not the default (for tables)."""
        return self.spec + ("" if self.prefixes == "all" else f" (prefixes={self.prefixes})")


PRESETS: dict[str, Preset] = {
    "quality": Preset("confidence", "sequential confidence decoding: one position per pass"),
    "lossless": Preset("eb:gamma=0.01,order=confidence",
                       "EB-Sampler at an error budget of 0.01 nats: sequential decoding's "
                       "accuracy in about a quarter of its passes and time"),
    "fast": Preset("eb:gamma=1.0,order=confidence+verify=0.03",
                   "verified EB drafts, every prefix checked: the best accuracy at about an "
                   "eighth of sequential decoding's passes"),
}


def preset(name: str) -> Preset:
    """The :class:`Preset` called ``name``; UnmaskError naming ``preset`` for unknown names."""
    if name not in PRESETS:
        raise UnmaskError(f"preset: unknown {name!r}; choose from {', '.join(PRESETS)}")
    return PRESETS[name]


def preset_spec(name: str) -> str:
    """The sampler spec of preset ``name`` (:func:`preset`)."""
    return preset(name).spec


@dataclass
class PresetSpec(SamplerSpec):
    """A :class:`SamplerSpec` that builds its verified sampler with a prefix scheme: what a
    bench takes as an entry for a preset (``timed_decode``, ``bench_sudoku``).

    prefixes: ``"all"`` or ``"doubling"`` (:class:`~unmask.samplers.verified.Verified`).
    """

    prefixes: str = "all"

    def build(self) -> Sampler:
        sampler = super().build()
        if isinstance(sampler, Verified) and self.prefixes != "all":
            sampler = Verified(sampler.inner, tolerance=sampler.tolerance,
                               max_draft=sampler.max_draft, prefixes=self.prefixes)
        return sampler


def preset_entry(name: str) -> PresetSpec:
    """Preset ``name`` as a bench entry, labelled ``preset=NAME`` and its spec's label."""
    p = preset(name)
    spec = parse_spec(p.spec)
    label = f"{spec.label} preset={name}" + ("" if p.prefixes == "all"
                                             else f" prefixes={p.prefixes}")
    return PresetSpec(spec.name, dict(spec.params), spec.verify, spec.corrected, label,
                      prefixes=p.prefixes)


def preset_sampler(name: str) -> Sampler:
    """A fresh sampler of preset ``name``: its spec built, with the preset's prefix scheme
    when the spec is verified."""
    return preset_entry(name).build()
