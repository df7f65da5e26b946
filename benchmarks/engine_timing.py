"""An engine wrapper for the engine benchmarks: it records how long ``open`` took.

Imported by ``label_engine.py`` and ``ray_bench_sweep.py`` (run as scripts, this folder is on
their import path).
"""

from __future__ import annotations

import time

from unmask.parallel.workers import Engine


class Timed(Engine):
    """An engine that records how long ``open`` (start-up, model loads, warm-up) took."""

    def __init__(self, inner: Engine):
        self.inner, self.name, self.workers, self.open_seconds = inner, inner.name, \
            inner.workers, 0.0

    def open(self, setup):
        t0 = time.perf_counter()
        self.inner.open(setup)
        self.open_seconds = time.perf_counter() - t0

    def call(self, fn, arg=None):
        return self.inner.call(fn, arg)

    def map_unordered(self, fn, jobs):
        return self.inner.map_unordered(fn, jobs)

    def close(self):
        self.inner.close()
