"""``unmask antibody bench``: every sampler on antibody heavy chains."""

from __future__ import annotations

import argparse

from unmask.commands.bench_command import bench_arguments, bench_task, run_bench
from unmask.commands.registry import arguments, command


@command("antibody", "bench", help="benchmark every sampler on antibody heavy chains: CDR "
                                   "infilling, random masking, generation")
@arguments(bench_arguments("antibody"))
def bench_antibody(args: argparse.Namespace) -> int:
    return run_bench(bench_task("antibody"), args)
