"""The one :class:`~unmask.request.DecodeRequest` a command's flags describe."""

from __future__ import annotations

import argparse

from unmask.commands.flags.types import flags_for
from unmask.request import SETTINGS, DecodeRequest

#: request settings -> the flag that gives them, where the names differ
FLAG_OF = {"chat_template": "chat", "stop_at_eos": "no_eos_stop"}


def request_from_args(args: argparse.Namespace, sampler: str, **settings) -> DecodeRequest:
    """The request of ``args`` (every setting the command has a flag for) with the spec
    ``sampler`` and ``settings`` given by the caller; a refusal names the flag
    (``--block-length: ...``)."""
    values = {}
    for name in SETTINGS:
        flag = FLAG_OF.get(name, name)
        if name not in settings and hasattr(args, flag) and name != "sampler":
            value = getattr(args, flag)
            values[name] = not value if name == "stop_at_eos" else value
    values.update(settings)
    with flags_for(*(n for n in SETTINGS if n not in FLAG_OF), *FLAG_OF.values()):
        return DecodeRequest(sampler=sampler, **values)
