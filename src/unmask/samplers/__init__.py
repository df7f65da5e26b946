"""Samplers, one file each, registered by name. Import this package to register them all.

:class:`~unmask.samplers.verified.Verified` wraps any sampler that does not evaluate its next
state; :func:`~unmask.samplers.spec.parse_spec` reads the one spec syntax
(``NAME[:K=V,...][+verify[=T]][+corrector]``).
"""

from unmask.samplers import (  # noqa: F401  (imported for registration)
    confidence,
    dapd,
    demask,
    dus,
    eb,
    entropy,
    factor,
    info_gain,
    klass,
    lookum,
    margin,
    mi_guided,
    pc,
    ramp,
    threshold,
    topk,
    uniform,
)
from unmask.samplers.base import (
    CountRule,
    Sampler,
    Selection,
    StepState,
    available_samplers,
    make_sampler,
    register,
    sampler_class,
)
from unmask.samplers.spec import SamplerSpec, parse_spec
from unmask.samplers.verified import Verified

__all__ = [
    "CountRule",
    "Sampler",
    "SamplerSpec",
    "Selection",
    "StepState",
    "Verified",
    "available_samplers",
    "make_sampler",
    "parse_spec",
    "register",
    "sampler_class",
]
