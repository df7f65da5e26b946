"""Where a command's model runs: ``--device``, ``--engine`` and ``--workers``
(:mod:`unmask.parallel.workers`), and a bench sweep's ``--cache``."""

from __future__ import annotations

import argparse

from unmask.commands.flags.paths import cache_folder
from unmask.commands.flags.types import literal_of, positive_int
from unmask.errors import UnmaskError


def add_device_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu",
                   help="torch device to run the model on (cpu, cuda, cuda:1, ...)")


def resolve_device(name: str):
    """The torch device ``--device`` names, or :class:`UnmaskError` saying why it cannot be
    used here."""
    from unmask.devices import check_device

    return check_device(name, "--device")


def add_engine_args(p: argparse.ArgumentParser, *, gpus: bool = True) -> None:
    """``--engine`` and ``--workers`` (:mod:`unmask.parallel.workers`); ``gpus``: the command has
    ``--device``, and a Ray worker on cuda reserves one GPU."""
    p.add_argument("--engine", default="local",
                   choices=literal_of("unmask.parallel.workers:ENGINES"),
                   help="local: this process (default); ray: Ray actors, one model each, on "
                        "the cluster at RAY_ADDRESS or a local one (pip install 'unmask[ray]')")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="Ray workers (default 1), each reserving --threads CPUs"
                        + (" and, with --device cuda, one GPU" if gpus else ""))


def add_cache_arg(p: argparse.ArgumentParser) -> None:
    """``--cache DIR``: keep each finished shard of a bench sweep there and reuse it
    (:mod:`unmask.bench.cache`)."""
    p.add_argument("--cache", default=None, metavar="DIR", type=cache_folder,
                   help="keep each finished shard here and reuse it: a killed bench run again "
                        "with the same flags resumes where it stopped")


def engine_from_args(args: argparse.Namespace):
    """(the engine ``--engine`` and ``--workers`` name, the torch device its workers run the
    model on). The local engine's device is ``--device`` (cpu without the flag), checked
    here; a Ray worker's is cpu or cuda, checked where it runs (each gets its own GPU).
    Refused in one line: ``--workers`` above 1 on the local engine, Ray not installed, a
    device with an index under Ray."""
    import torch

    from unmask.parallel.workers import LocalEngine, make_engine

    name = getattr(args, "device", "cpu")
    if args.engine == "local":
        if args.workers not in (None, 1):
            raise UnmaskError(f"--workers: the local engine runs 1 worker, got {args.workers}; "
                              "add --engine ray")
        return LocalEngine(), resolve_device(name)
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise UnmaskError(f"--device: {name!r} is not a torch device") from None
    if device.type not in ("cpu", "cuda") or device.index is not None:
        raise UnmaskError(f"--device: with --engine ray give cpu or cuda (each worker gets "
                          f"its own GPU), got {name!r}")
    engine = make_engine("ray", args.workers, cpus_per_worker=args.threads or 1,
                         gpus_per_worker=1 if device.type == "cuda" else 0)
    return engine, device
