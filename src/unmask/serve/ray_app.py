"""The application on Ray Serve: ``unmask serve --engine ray --replicas N``.

Each replica loads the model once and runs the same application as the local server
(:func:`~unmask.serve.app.create_app`), its exact batcher included: Ray Serve routes requests
to replicas, and each replica decodes the compatible requests it holds in one call (Ray's own
``@serve.batch`` groups requests without regard to their settings, and rows of different
settings cannot share a decode call). The cluster is the one at ``RAY_ADDRESS``, else a local
one started here; the HTTP proxy listens on ``host:port``.
"""

from __future__ import annotations

import os
import time

from unmask.errors import UnmaskError
from unmask.serve.options import ServeOptions


def deployment(options: ServeOptions, replicas: int, host: str = "127.0.0.1"):
    """The bound Ray Serve application: ``replicas`` replicas of the server, each reserving
    ``options.threads`` CPUs (and one GPU with a cuda device), answering only the names of
    ``host`` (:class:`~unmask.serve.guard.HostCheck`; the connections' own limits are Ray
    Serve's proxy's)."""
    from ray import serve

    threads = options.threads or 1

    def build_app():
        import torch

        from unmask.serve.app import create_app
        from unmask.serve.guard import HostCheck, allowed_hosts
        from unmask.serve.jobs import ServedModel

        torch.set_num_threads(threads)
        app = create_app(ServedModel.load(options))
        app.add_middleware(HostCheck, allowed=allowed_hosts(host, options.allow_hosts))
        return app

    gpus = 1 if str(options.device).startswith("cuda") else 0
    replica = serve.deployment(
        serve.ingress(build_app)(), name="unmask", num_replicas=replicas,
        ray_actor_options={"num_cpus": threads, "num_gpus": gpus},
        max_ongoing_requests=options.max_queue_rows)
    return replica.bind()


def start(options: ServeOptions, host: str, port: int, replicas: int) -> None:
    """Connect to (or start) a Ray cluster and deploy the server on it; returns once every
    replica is ready."""
    try:
        import ray
        from ray import serve
    except ImportError:
        raise UnmaskError("--engine ray: Ray Serve is not installed (pip install "
                          "'unmask[serve]')") from None
    address = os.environ.get("RAY_ADDRESS") or None
    kwargs = {} if address else {"num_cpus": max(replicas * (options.threads or 1), 1)}
    if not ray.is_initialized():
        ray.init(address=address, logging_level="ERROR", log_to_driver=False, **kwargs)
    serve.start(http_options={"host": host, "port": port})
    serve.run(deployment(options, replicas, host), name="unmask", route_prefix="/")


def stop() -> None:
    """Remove the deployment and disconnect (a local cluster started here is shut down)."""
    import ray
    from ray import serve

    serve.shutdown()
    ray.shutdown()


def serve_on_ray(options: ServeOptions, host: str, port: int, replicas: int,
                 announce=print) -> None:
    """:func:`start`, then serve until interrupted, then :func:`stop`."""
    start(options, host, port, replicas)
    announce(f"unmask serve: http://{host}:{port}/v1 on Ray Serve, {replicas} replica(s)")
    try:
        while True:
            time.sleep(1.0)
    finally:
        stop()
