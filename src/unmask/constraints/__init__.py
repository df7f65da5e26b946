"""Constrained decoding: the decoded text must belong to a language.

Public constructors: :func:`regex`, :func:`json_schema`, :func:`json_object`, :func:`choice`
give a :class:`ConstraintSpec` (light: no torch, no outlines-core at import time).
"""

from unmask.constraints.spec import (
    KINDS,
    ConstraintSpec,
    choice,
    json_object,
    json_schema,
    regex,
)

__all__ = ["KINDS", "ConstraintSpec", "choice", "json_object", "json_schema", "regex"]
