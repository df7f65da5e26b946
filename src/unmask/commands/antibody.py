"""``unmask antibody bench``: every sampler on antibody heavy chains."""

from __future__ import annotations

import argparse

from unmask.commands.flags.bench import bench_task, run_bench_command
from unmask.commands.registry import command


@command("antibody", "bench")
def bench_antibody(args: argparse.Namespace) -> int:
    return run_bench_command(bench_task("antibody"), args)
