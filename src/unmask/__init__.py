"""unmask: dependency-aware decoding of masked diffusion models (MDMs).

Entropies and mutual informations are in nats throughout.
"""

from unmask.decode import DecodeConfig, DecodeResult, decode
from unmask.errors import UnmaskError
from unmask.generate import Generation, generate
from unmask.models import ExactJointMDM, MaskedModel, MDMTransformer, ModelOutput, TransformerConfig
from unmask.samplers import Sampler, available_samplers, make_sampler

__version__ = "0.1.0"

__all__ = [
    "DecodeConfig",
    "DecodeResult",
    "ExactJointMDM",
    "Generation",
    "MDMTransformer",
    "MaskedModel",
    "ModelOutput",
    "Sampler",
    "TransformerConfig",
    "UnmaskError",
    "available_samplers",
    "decode",
    "generate",
    "make_sampler",
]
