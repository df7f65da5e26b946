"""Which samplers a command decodes with, one way for every command: ``--sampler`` /
``--preset`` (:func:`add_sampler_arg`, read by :func:`sampler_text` or :func:`entry_from_args`)
and a bench's ``--samplers`` specs (:func:`bench_entries`), read into
:class:`~unmask.samplers.spec.SamplerSpec` items."""

from __future__ import annotations

import argparse

from unmask.errors import UnmaskError
from unmask.presets import PRESETS, preset_spec


def add_sampler_arg(p: argparse.ArgumentParser, default: str = "confidence",
                    also: str = "") -> None:
    """``--sampler SPEC`` and ``--preset NAME`` (one or the other); ``also``: what else
    ``--sampler`` accepts on this command, said in its help."""
    p.add_argument("--sampler", default=None, metavar="SPEC",
                   help="sampler spec NAME[:K=V,K=V][+verify[=T]][+corrector], e.g. "
                        f"eb:gamma=0.1 or topk:k=9+verify=0{also} (default {default})")
    p.add_argument("--preset", default=None, choices=list(PRESETS),
                   help="a named configuration instead of --sampler: "
                        + "; ".join(f"{k}: {v.spec}" for k, v in PRESETS.items()))
    p.set_defaults(default_sampler=default)


def add_presets_arg(p: argparse.ArgumentParser) -> None:
    """``--preset NAME ...`` on a bench: rows for named configurations, beside --samplers."""
    p.add_argument("--preset", nargs="+", default=[], choices=list(PRESETS), metavar="NAME",
                   help=f"add the rows of these presets ({', '.join(PRESETS)})")


def sampler_text(args: argparse.Namespace) -> str:
    """The sampler spec ``--sampler`` or ``--preset`` names (the command's default when
    neither), as text."""
    if args.preset is not None:
        if args.sampler is not None:
            raise UnmaskError("--preset: give --sampler or --preset, not both")
        return preset_spec(args.preset)
    return args.sampler or args.default_sampler


def entry_from_args(args: argparse.Namespace):
    """The :class:`~unmask.samplers.spec.SamplerSpec` ``--sampler`` or ``--preset`` names
    (the default sampler when neither), validated now."""
    from unmask.samplers.spec import preset_entry, spec_entry

    if args.preset is not None:
        sampler_text(args)  # refuses both
        return preset_entry(args.preset)
    return spec_entry(sampler_text(args))


def bench_entries(specs: list[str] | None, defaults: list[str], estimator: str | None = None,
                  presets: list[str] = ()):
    """The :class:`~unmask.samplers.spec.SamplerSpec` list of a bench command: ``specs`` (or
    the command's ``defaults`` when neither specs nor ``presets`` are given), each validated
    now, then the rows of ``presets``; ``estimator`` (a folder, from --estimator) is given to
    every entry whose sampler reads an MI estimator
    (:func:`unmask.samplers.spec.with_estimator`)."""
    from unmask.samplers.spec import preset_entry, spec_entry, with_estimator

    if specs is not None and not specs:
        raise UnmaskError("--samplers: no sampler spec given")
    entries = [spec_entry(spec, "--samplers")
               for spec in specs or ([] if presets else defaults)]
    return with_estimator(entries + [preset_entry(name) for name in presets], estimator)
