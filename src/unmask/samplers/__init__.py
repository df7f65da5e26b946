"""Samplers, one file each, registered by name. Import this package to register them all."""

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

__all__ = [
    "CountRule",
    "Sampler",
    "Selection",
    "StepState",
    "available_samplers",
    "make_sampler",
    "register",
    "sampler_class",
]
