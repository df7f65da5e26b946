"""Run the exactness tests (marker ``kernels``, slow cases included) under every CPU kernel
set torch offers on this machine and with 1 and 2 threads.

torch picks its CPU kernels by ``ATEN_CPU_CAPABILITY``; on x86 the sets nest (``default`` <
``avx2`` < ``avx512``), so a machine runs each set up to the best it has. Float reductions
differ between the sets and thread counts: tokens, NFE and sequences must not.

    python scripts/test_kernels.py [--threads 1 2] [pytest args...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

ORDER = ("default", "avx2", "avx512")


def capabilities() -> list[str]:
    """The kernel sets this machine runs: every x86 set up to its best one."""
    best = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu."
                           "get_cpu_capability())"], capture_output=True, text=True,
                          check=True).stdout.strip().lower()
    best = "avx512" if best.startswith("avx512") else best
    return list(ORDER[:ORDER.index(best) + 1]) if best in ORDER else ["default"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args, rest = parser.parse_known_args()
    failed = []
    for cap in capabilities():
        for threads in args.threads:
            env = {**os.environ, "ATEN_CPU_CAPABILITY": cap,
                   "UNMASK_TEST_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
            t0 = time.perf_counter()
            code = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "kernels",
                                   "-p", "no:cacheprovider", *rest], env=env).returncode
            print(f"kernels {cap} threads {threads}: "
                  f"{'ok' if code == 0 else f'FAILED (exit {code})'} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
            if code != 0:
                failed.append(f"{cap}/{threads}")
    if failed:
        print(f"failed under: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
