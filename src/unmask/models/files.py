"""Reading model folders safely: JSON configs as dataclasses, safetensors weights checked
against the module they load into. Every failure is one :class:`UnmaskError` line."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import nn

from unmask.errors import UnmaskError
from unmask.io import parse_json
from unmask.validation import field_problem


def read_json_object(path: str | Path) -> dict:
    """The JSON object in ``path``; :class:`UnmaskError` naming the file when it is missing,
    not JSON, or not an object."""
    path = Path(path)
    if not path.is_file():
        raise UnmaskError(f"model: {path.parent} has no {path.name}")
    try:
        data = parse_json(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UnmaskError(f"model: {path} is not JSON ({getattr(e, 'msg', e)})") from None
    if not isinstance(data, dict):
        raise UnmaskError(f"model: {path} holds a JSON {type(data).__name__}, expected an object")
    return data


def dataclass_from_dict(cls, data, where: str):
    """``cls(**data)`` for a config dataclass read from a file, refusing with one line a
    non-object, a missing or unknown key, or a value of the wrong JSON type (``"128"`` for
    an int; :func:`unmask.validation.field_problem`). ``where`` names the file in the
    message."""
    if not isinstance(data, dict):
        raise UnmaskError(f"model: {where}: expected an object, got {type(data).__name__}")
    problem = field_problem(cls, data)
    if problem is not None:
        key, hint = problem.key, problem.hint
        if problem.kind == "unknown":
            raise UnmaskError(f"model: {where}: unknown key {key!r}")
        if problem.kind == "missing":
            raise UnmaskError(f"model: {where}: missing key {key!r}")
        raise UnmaskError(f"model: {where}: {key!r} must be of type "
                          f"{getattr(hint, '__name__', hint)}, got {json.dumps(data[key])}")
    try:
        return cls(**data)
    except TypeError as e:  # pragma: no cover - the checks above catch what JSON can hold
        raise UnmaskError(f"model: {where}: {e}") from None


def load_safetensors(path: str | Path, device: str = "cpu") -> dict[str, torch.Tensor]:
    """The tensors of a ``.safetensors`` file; :class:`UnmaskError` when it is missing, empty,
    truncated or not safetensors. Nothing in it is executed."""
    path = Path(path)
    if not path.is_file():
        raise UnmaskError(f"model: {path.parent} has no {path.name}")
    try:
        return load_file(str(path), device=device)
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise UnmaskError(f"model: {path} is not a readable safetensors file ({first})") from None


def load_checked_state(module: nn.Module, state: dict[str, torch.Tensor], where: str) -> None:
    """Load ``state`` into ``module`` after checking that the names and shapes are exactly the
    module's: a config that disagrees with its weights is one line, not a traceback."""
    own = module.state_dict()
    missing = sorted(set(own) - set(state))
    if missing:
        raise UnmaskError(f"model: {where} lacks the weight {missing[0]!r} its config implies")
    unknown = sorted(set(state) - set(own))
    if unknown:
        raise UnmaskError(f"model: {where} has a weight {unknown[0]!r} its config does not "
                          "imply")
    for name, t in own.items():
        if tuple(state[name].shape) != tuple(t.shape):
            raise UnmaskError(f"model: {where}: weight {name!r} has shape "
                              f"{tuple(state[name].shape)}, the config implies {tuple(t.shape)}")
    module.load_state_dict(state)
