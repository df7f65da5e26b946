"""unmask: dependency-aware decoding of masked diffusion models (MDMs).

Entropies and mutual informations are in nats throughout. The names below are imported from
their modules on first use, so that ``import unmask`` (and the command line's ``--help``) does
not load torch.
"""

import importlib as _importlib
import sys as _sys
import types as _types

__version__ = "0.1.0"

#: public name -> the module defining it
_EXPORTS = {
    "DecodeConfig": "unmask.decode", "DecodeResult": "unmask.decode", "decode": "unmask.decode",
    "UnmaskError": "unmask.errors",
    "Generation": "unmask.generate", "generate": "unmask.generate",
    "Hook": "unmask.hooks", "corrector_hooks": "unmask.hooks",
    "infill": "unmask.infill",
    "DecodeRequest": "unmask.request",
    "ExactJointMDM": "unmask.models", "MaskedModel": "unmask.models",
    "MDMTransformer": "unmask.models", "ModelOutput": "unmask.models",
    "TransformerConfig": "unmask.models",
    "Sampler": "unmask.samplers", "SamplerSpec": "unmask.samplers", "Verified": "unmask.samplers",
    "available_samplers": "unmask.samplers", "make_sampler": "unmask.samplers",
    "parse_spec": "unmask.samplers",
}

__all__ = sorted(_EXPORTS)


class _Package(_types.ModuleType):
    """The package, whose ``decode``, ``generate`` and ``infill`` are the functions: the
    import system binds a submodule to its package's attribute once loaded, and here the
    function of that name is bound in its place (as an eager ``from unmask.decode import
    decode`` did)."""

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, _types.ModuleType) and _EXPORTS.get(name) == value.__name__:
            value = getattr(value, name)
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'unmask' has no attribute {name!r}")
    value = getattr(_importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names, each once: the exports and ``__version__`` (nothing private, no name
    the module itself imports, the same whatever has been loaded)."""
    return sorted({*_EXPORTS, "__version__"})
