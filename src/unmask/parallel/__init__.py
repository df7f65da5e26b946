"""Work spread over workers, below the benches and the MI labels that use it: the engines
(:mod:`~unmask.parallel.workers`: this process, or Ray actors), how a worker loads its model
(:mod:`~unmask.bench.recipe`) and content-addressed shard files
(:mod:`~unmask.parallel.shard_store`)."""
