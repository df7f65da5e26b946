"""Which samplers a command decodes with: ``--sampler`` / ``--preset`` and a bench's
``--samplers`` specs, read into :class:`~unmask.bench.BenchEntry` items."""

from __future__ import annotations

import argparse

from unmask.bench import BenchEntry
from unmask.errors import UnmaskError
from unmask.presets import PRESETS, preset_entry


def add_sampler_arg(p: argparse.ArgumentParser, default: str = "confidence") -> None:
    """``--sampler SPEC`` and ``--preset NAME`` (one or the other)."""
    p.add_argument("--sampler", default=None, metavar="SPEC",
                   help="sampler spec NAME[:K=V,K=V][+verify[=T]][+corrector], e.g. "
                        f"eb:gamma=0.1 or topk:k=9+verify=0 (default {default})")
    p.add_argument("--preset", default=None, choices=list(PRESETS),
                   help="a named configuration instead of --sampler: "
                        + "; ".join(f"{k}: {v.text}" for k, v in PRESETS.items()))
    p.set_defaults(default_sampler=default)


def add_presets_arg(p: argparse.ArgumentParser) -> None:
    """``--preset NAME ...`` on a bench: rows for named configurations, beside --samplers."""
    p.add_argument("--preset", nargs="+", default=[], choices=list(PRESETS), metavar="NAME",
                   help=f"add the rows of these presets ({', '.join(PRESETS)})")


def entry_from_args(args: argparse.Namespace):
    """The bench entry ``--sampler`` or ``--preset`` names (the default sampler when
    neither)."""
    if args.preset is not None:
        if args.sampler is not None:
            raise UnmaskError("--preset: give --sampler or --preset, not both")
        return preset_entry(args.preset)
    return sampler_entry(args.sampler or args.default_sampler)


def sampler_entry(spec: str, flag: str = "--sampler"):
    """The :class:`~unmask.bench.BenchEntry` a sampler spec names, validated now; errors name
    ``flag``."""
    try:
        return BenchEntry.parse(spec)
    except (UnmaskError, TypeError, ValueError) as e:  # a value of the wrong type, too
        raise UnmaskError(f"{flag}: {spec!r}: {e}" if not isinstance(e, UnmaskError)
                          else f"{flag}: {e}") from None


def bench_entries(specs: list[str] | None, defaults: list[str], estimator: str | None = None,
                  presets: list[str] = ()):
    """The :class:`~unmask.bench.BenchEntry` list of a bench command: ``specs`` (or the
    command's ``defaults`` when neither specs nor ``presets`` are given), each validated now,
    then the rows of ``presets``; ``estimator`` (a folder, from --estimator) is given to every
    ``mi-guided`` entry."""
    if specs is not None and not specs:
        raise UnmaskError("--samplers: no sampler spec given")
    entries = []
    for spec in specs or ([] if presets else defaults):
        entries.append(sampler_entry(spec, "--samplers"))
    entries += [preset_entry(name) for name in presets]
    if estimator:
        for e in entries:
            if e.name == "mi-guided":
                e.params["estimator"] = estimator
    return entries
