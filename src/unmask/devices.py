"""Which torch devices can be used here: one check for the CLI's ``--device`` and the
Python API's ``device=``."""

from __future__ import annotations

import torch

from unmask.errors import UnmaskError


def check_device(device: str | torch.device | None, name: str = "device") -> torch.device:
    """The torch device ``device`` names (None: cpu), or :class:`UnmaskError` naming ``name``
    and why it cannot be used here (not a device, CUDA absent, an index past the last GPU,
    a device type other than cpu and cuda)."""
    if device is None:
        return torch.device("cpu")
    if not isinstance(device, (str, torch.device)):
        raise UnmaskError(f"{name}: expected a device name such as 'cpu' or 'cuda', got "
                          f"{type(device).__name__}")
    try:
        resolved = torch.device(device)
    except (RuntimeError, ValueError):
        raise UnmaskError(f"{name}: {str(device)!r} is not a torch device (cpu, cuda, "
                          "cuda:1, ...)") from None
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise UnmaskError(f"{name}: {str(device)!r} asked for, but CUDA is not available "
                              "here")
        if resolved.index is not None and resolved.index >= torch.cuda.device_count():
            raise UnmaskError(f"{name}: {str(device)!r} asked for, but this machine has "
                              f"{torch.cuda.device_count()} CUDA device(s)")
    elif resolved.type != "cpu":
        raise UnmaskError(f"{name}: {str(device)!r}: only cpu and cuda devices are supported")
    return resolved
