"""What a request may ask of a sampler spec, checked before anything is built.

A served request (``unmask serve``'s ``sampler`` field) is written by someone who may not touch
the server: its spec may set only parameters of plain types (int, float, bool, str or None),
so no parameter that takes a path, a table or an object (an MI estimator's folder,
``pc:frequencies``, DEMASK's estimator: any whose type hint is not plain) may be given; its
strings are plain words (an order, a schedule), never paths; and every parameter that scales
the work of a pass is bounded (:data:`REQUEST_LIMITS`). :func:`check_request_spec` reads the
spec's text (:func:`~unmask.samplers.spec.spec_parts`) and checks it against the parameters'
declared types without building the sampler, so that a refused spec has read nothing and
built nothing; the operator's own spec (``--sampler``) is not limited.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
import typing

from unmask.errors import UnmaskError
from unmask.samplers.base import MAX_PARAM_INT, _field_hints, sampler_class
from unmask.samplers.spec import HOOK_MODIFIERS, spec_parts
from unmask.samplers.verified import Verified
from unmask.validation import is_int, is_number, is_scalar_hint

#: parameter -> (lowest, highest) a request may give; each scales a pass's model calls or
#: memory (lookahead candidates, re-masking rounds, verified drafts) or, for the token and
#: position temperatures of lookahead candidates, stops their de-duplication
REQUEST_LIMITS: dict[str, tuple[float, float]] = {
    "n_candidates": (1, 16), "keep": (1, 16), "tau_tok": (0.0, 10.0),
    "tau_pos": (0.0, 10.0), "max_checks": (0, 64), "max_remasks": (0, 8),
    "history": (1, 64), "max_draft": (1, 4096),
}
#: samplers a request may not name: each pass costs sequences in the thousands (probing)
REQUEST_REFUSED = {"mi-oracle": "it probes every position and token (thousands of sequences "
                                "a pass); the operator may serve it with --sampler"}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


def parameter_hints(owner: str) -> dict:
    """The parameters a spec may give ``owner`` (a sampler name, ``+verify`` or a modifier
    ``+NAME``), name -> type hint (``object`` where none is declared)."""
    if owner == "+verify":
        cls = Verified
    elif owner.startswith("+"):
        if owner[1:] not in HOOK_MODIFIERS:
            raise UnmaskError(f"sampler spec: unknown modifier {owner}")
        cls = HOOK_MODIFIERS[owner[1:]].make
    else:
        cls = sampler_class(owner)
    if dataclasses.is_dataclass(cls):
        hints = _field_hints(cls)
        return {f.name: hints.get(f.name, object) for f in dataclasses.fields(cls)
                if f.init and f.name != "inner"}
    try:
        hints = typing.get_type_hints(cls.__init__)
    except (NameError, TypeError):
        hints = {}
    params = list(inspect.signature(cls.__init__).parameters)[1:]
    return {k: hints.get(k, object) for k in params}


def check_request_spec(text: str) -> dict:
    """The parts of spec ``text`` (:func:`~unmask.samplers.spec.spec_parts`) when a request
    may decode with it (module docstring); :class:`UnmaskError` naming ``sampler`` and the
    parameter otherwise. Builds nothing and reads no file."""
    parts = spec_parts(text)
    name = parts["name"]
    if name in REQUEST_REFUSED:
        raise UnmaskError(f"sampler: {name!r} cannot be requested: {REQUEST_REFUSED[name]}")
    groups = [(name, parts["params"]), ("+verify", parts["verify_options"]),
              *((f"+{k}", v) for k, v in parts["hooks"].items())]
    for owner, params in groups:
        hints = parameter_hints(owner) if params else {}
        for key, value in params.items():
            check_request_value(owner, key, hints.get(key), value)
    return parts


def check_request_value(owner: str, key: str, hint, value) -> None:
    """Refuse ``owner``'s parameter ``key`` = ``value`` from a request: a parameter of no
    plain type (a path, a table, an object), a string that is not a plain word, a number out
    of :data:`REQUEST_LIMITS` or :data:`MAX_PARAM_INT`. An unknown ``key`` (``hint`` None)
    is left to the sampler's own message."""
    where = f"sampler: {key}={value!r}"
    if hint is not None and not is_scalar_hint(hint):
        raise UnmaskError(f"{where}: a request cannot set {key} (it may name a file or an "
                          "object on the server; the operator may set it with --sampler)")
    if isinstance(value, str) and not _WORD.fullmatch(value):
        raise UnmaskError(f"{where}: expected a plain word")
    if is_int(value) and abs(value) > MAX_PARAM_INT:
        raise UnmaskError(f"{where}: out of range (at most {MAX_PARAM_INT} in magnitude)")
    if is_number(value) and not math.isfinite(value):
        raise UnmaskError(f"{where}: must be a finite number")
    if key in REQUEST_LIMITS and is_number(value):
        lo, hi = REQUEST_LIMITS[key]
        if not lo <= value <= hi:
            raise UnmaskError(f"{where}: the server allows {key} in [{lo:g}, {hi:g}] for a "
                              f"request (it scales the work of every pass)")
