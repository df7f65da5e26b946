"""Running the application: on uvicorn in this process (:func:`serve_forever`), on a uvicorn
thread for tests and benchmarks (:class:`ServerThread`), or on Ray Serve
(:func:`unmask.serve.ray_app.serve_on_ray`)."""

from __future__ import annotations

import socket
import threading
import time

from unmask.errors import UnmaskError
from unmask.serve.options import ServeOptions

#: bytes h11 may buffer beyond the header limit (a read is at most 256 KiB, so the limit's
#: own 431 always comes first)
H11_SLACK = 512 * 1024


def uvicorn_config(app, options: ServeOptions, host: str, port: int, log_level: str):
    """uvicorn's settings: ``app`` behind :class:`~unmask.serve.guard.HostCheck`, on the h11
    protocol under the options' connection limits (:mod:`unmask.serve.guard`)."""
    import uvicorn

    from unmask.serve.guard import ConnectionLimits, HostCheck, allowed_hosts, protocol_class

    limits = ConnectionLimits(options.header_timeout_s, options.body_timeout_s,
                              options.max_header_bytes, options.max_connections)
    allowed = allowed_hosts(host, options.allow_hosts)
    return uvicorn.Config(HostCheck(app, allowed), host=host, port=port, log_level=log_level,
                          http=protocol_class(limits),
                          h11_max_incomplete_event_size=options.max_header_bytes + H11_SLACK,
                          timeout_keep_alive=5, access_log=log_level == "info",
                          server_header=False)


def serve_forever(options: ServeOptions, host: str, port: int, log_level: str = "warning",
                  announce=print) -> None:
    """Load the model, then serve on ``host:port`` until interrupted."""
    import uvicorn

    from unmask.serve.app import create_app
    from unmask.serve.jobs import ServedModel

    check_port(host, port)
    served = ServedModel.load(options)
    server = uvicorn.Server(uvicorn_config(create_app(served), options, host, port, log_level))
    announce(f"unmask serve: http://{host}:{port}/v1 serving {served.name!r} "
             f"(max batch {options.max_batch} rows, wait {options.batch_wait_ms:g} ms)")
    server.run()
    if not server.started:
        raise UnmaskError(f"--port: cannot listen on {host}:{port} (in use, or not allowed)")


def check_port(host: str, port: int) -> None:
    """Refuse, in one line, an address this process cannot listen on (in use, not local)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(infos[0][4])
    except OSError as e:
        raise UnmaskError(f"--host/--port: cannot listen on {host}:{port} "
                          f"({e.strerror or e})") from None


class ServerThread:
    """The application on a uvicorn thread, on a free loopback port unless ``port`` is given:
    ``with ServerThread(app) as s: s.url`` (``.../v1``). For tests and benchmarks."""

    def __init__(self, app, options: ServeOptions | None = None, host: str = "127.0.0.1",
                 port: int = 0):
        import uvicorn

        config = uvicorn_config(app, options or ServeOptions(), host, port, "warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.host = host

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.base = f"http://{self.host}:{self.port}"
        self.url = f"{self.base}/v1"
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
