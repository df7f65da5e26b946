"""Packages whose public names live in their submodules, imported on first use: importing
the package (for a light module of it, such as a bench's declared flags) imports nothing
else."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable, Callable]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``: ``exports`` maps each public
    name to the submodule that defines it (imported when the name is first read)."""

    def __getattr__(name: str):
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
