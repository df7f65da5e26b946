"""CLI subcommands, one module per area; importing this package registers them all."""

import importlib
import pkgutil

for _mod in pkgutil.iter_modules(__path__):
    if _mod.name not in ("common", "registry"):
        importlib.import_module(f"{__name__}.{_mod.name}")
