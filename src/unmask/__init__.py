"""unmask: dependency-aware decoding of masked diffusion models (MDMs).

Entropies and mutual informations are in nats throughout.
"""

from unmask.decode import DecodeConfig, DecodeResult, decode
from unmask.errors import UnmaskError
from unmask.generate import Generation, generate
from unmask.hooks import Hook, corrector_hooks
from unmask.infill import infill
from unmask.models import ExactJointMDM, MaskedModel, MDMTransformer, ModelOutput, TransformerConfig
from unmask.samplers import (
    Sampler,
    SamplerSpec,
    Verified,
    available_samplers,
    make_sampler,
    parse_spec,
)

__version__ = "0.1.0"

__all__ = [
    "DecodeConfig",
    "DecodeResult",
    "ExactJointMDM",
    "Generation",
    "Hook",
    "MDMTransformer",
    "MaskedModel",
    "ModelOutput",
    "Sampler",
    "SamplerSpec",
    "TransformerConfig",
    "UnmaskError",
    "Verified",
    "available_samplers",
    "corrector_hooks",
    "decode",
    "generate",
    "infill",
    "make_sampler",
    "parse_spec",
]
