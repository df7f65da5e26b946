"""Named decoding configurations: ``lossless``, ``fast`` and ``quality``.

A preset is a name for a sampler spec (:mod:`unmask.samplers.spec`): everything it decodes
with, verification options included, is said in the spec, so ``--preset fast`` and
``--sampler`` with its spec decode alike. The choices and their measurements on the shipped
Sudoku model are in ``experiments/wallclock/README.md``.

* ``quality``: sequential confidence decoding, one position per pass.
* ``lossless``: the parallel rule whose accuracy stays at sequential decoding's while taking
  the least wall-clock time: EB-Sampler at a small error budget (one sequence per pass).
* ``fast``: the most accurate rule at about an eighth of sequential decoding's passes.

A preset decodes as ``parse_spec(preset_spec(name)).build()``
(:func:`unmask.samplers.spec.parse_spec`); this module imports no sampler, so the command line
lists the presets without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from unmask.errors import UnmaskError


@dataclass(frozen=True)
class Preset:
    """One named configuration: ``spec``, a sampler spec, and ``doc``, one line on what it
    is for."""

    spec: str
    doc: str


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


# ---------------------------------------------------------------- presets of one model
# A model whose own measurements pick another configuration for a preset name overrides it
# here, by the name ``--model`` takes; every other model keeps :data:`PRESETS`.

#: model name -> {preset name: Preset}
MODEL_PRESETS: dict[str, dict[str, Preset]] = {
    "antiberty": {
        "fast": Preset("topk:k=128+ramp=0.25+verify=0.03,prefixes=doubling",
                       "one position a pass while the chain type is open, then a cap "
                       "growing by a quarter of what is known, each draft verified: "
                       "heavy chains as often as sequential decoding and its "
                       "pseudo-log-likelihood at about 4 residues and 3.3 sequences a pass "
                       "(chosen on unconditional 118-residue chains at T=1, "
                       "experiments/antibody_coherence)"),
    },
}


def model_preset(name: str, model: object = None) -> Preset:
    """Preset ``name`` for ``model`` (a model name such as ``antiberty``, or anything else:
    the general :data:`PRESETS`); UnmaskError naming ``preset`` for unknown names."""
    own = MODEL_PRESETS.get(model, {}) if isinstance(model, str) else {}
    return own[name] if name in own else preset(name)


def model_preset_spec(name: str, model: object = None) -> str:
    """The sampler spec of preset ``name`` for ``model`` (:func:`model_preset`)."""
    return model_preset(name, model).spec
