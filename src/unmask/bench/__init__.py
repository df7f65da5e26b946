"""Benchmarking samplers: the bench contract (:mod:`~unmask.bench.contract`), sweeps of
sampler entries over items on an engine (:mod:`~unmask.bench.sweep`, with
:mod:`~unmask.bench.recipe` saying how a worker loads the model), the shard cache
(:mod:`~unmask.bench.cache`), the shared row columns (:mod:`~unmask.bench.rows`), tables and
plots (:mod:`~unmask.bench.table`, :mod:`~unmask.bench.plot`) and reports over bench files
(:mod:`~unmask.bench.report`). The engines and shard files it runs on are
:mod:`unmask.parallel`'s."""
