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
* ``info-gain-authors``, ``lookum-authors``: Info-Gain and LookUM as their authors ship them
  (their defaults, their bypass and de-duplication).

For a model with a shipped MI estimator, plain ``mi-guided`` decodes with the estimator's
own recommended setting (``recommended.json`` beside its weights, chosen by a sweep on that
model; :mod:`unmask.samplers.mi_guided`).

A preset decodes as ``parse_spec(preset_spec(name)).build()``
(:func:`unmask.samplers.spec.parse_spec`); this module imports no sampler, so the command line
lists the presets without importing torch.
"""

from __future__ import annotations

import os
from pathlib import Path
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
    "info-gain-authors": Preset(
        "info-gain:n_candidates=8,tau_pos=0.2,bypass=0.8,bypass_rule=block,dedupe=positions,"
        "draw=gumbel",
        "Info-Gain with its authors' defaults: 8 one-position candidates a step, position "
        "temperature 0.2, the whole block filled at once when every masked position's max "
        "probability reaches 0.8 (they decode in blocks of 32: --block-size 32 where a "
        "command takes it)",
        "the authors' sampler (yks23/Information-Gain-Sampler), decoded token for token "
        "(tests/hf/test_info_gain_authors.py; experiments/info_gain_authors/README.md)"),
    "lookum-authors": Preset(
        "lookum:n_candidates=8,tau_pos=0.2,bypass=0.8,bypass_rule=block,dedupe=positions,"
        "draw=gumbel",
        "LookUM with the Info-Gain authors' defaults (as info-gain-authors, J = -Hbar of the "
        "next state)",
        "the authors' sampler, variant='lookum', decoded token for token "
        "(tests/hf/test_info_gain_authors.py; experiments/info_gain_authors/README.md)"),
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
                       "pseudo-log-likelihood at about 4 residues and 3.3 sequences a pass",
                       "AntiBERTy, unconditional 118-residue chains at T=1: 8/8 heavy, PLL "
                       "-0.001 +- 0.056 nats of sequential decoding's at 3.8 residues a "
                       "pass; unverified rules lose 0.13-0.29 nats, and every rule without "
                       "the ramp types light (experiments/antibody_coherence/README.md)"),
    },
}


def preset_model(model: object) -> str | None:
    """The model of :data:`MODEL_PRESETS` that ``model`` is: its name (``antiberty``), or a
    folder unmask converted from it (AntiBERTy's converted folder, or a copy: its manifest
    names the pinned wheel's weights and every file matches); None for any other."""
    if isinstance(model, str) and model in MODEL_PRESETS:
        return model
    if not isinstance(model, (str, os.PathLike)) or not Path(model).is_dir():
        return None
    from unmask.models.antiberty import MANIFEST, NAME, folder_problem

    folder = Path(model)
    return NAME if (folder / MANIFEST).is_file() and folder_problem(folder) is None else None


def model_preset(name: str, model: object = None) -> Preset:
    """Preset ``name`` for ``model`` (a model name such as ``antiberty`` or its converted
    folder, :func:`preset_model`; anything else: the general :data:`PRESETS`); UnmaskError
    naming ``preset`` for unknown names."""
    own = MODEL_PRESETS.get(preset_model(model), {})
    return own[name] if name in own else preset(name)


def model_preset_spec(name: str, model: object = None) -> str:
    """The sampler spec of preset ``name`` for ``model`` (:func:`model_preset`)."""
    return model_preset(name, model).spec
