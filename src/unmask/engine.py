"""Deprecated: the engines moved to :mod:`unmask.workers`; import them from there.

This alias keeps ``from unmask.engine import RayEngine`` (the import the Ray guide once showed)
working, with a :class:`DeprecationWarning`.
"""

import warnings

from unmask.workers import (  # noqa: F401 - re-exported
    ENGINES,
    Engine,
    LocalEngine,
    RayEngine,
    import_ray,
    make_engine,
    worker_path,
)

warnings.warn("unmask.engine is deprecated; import from unmask.workers", DeprecationWarning,
              stacklevel=2)
