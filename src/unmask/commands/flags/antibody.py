"""The flags of ``unmask antibody bench`` (:mod:`unmask.commands.antibody`)."""

from __future__ import annotations

from unmask.commands.flags.bench import bench_arguments

bench = bench_arguments("antibody")
