"""What stands between the network and the application: the HTTP connection's own limits
(:func:`protocol_class`, uvicorn's h11 protocol with a header deadline, a body deadline, a
header size limit and a connection limit that evicts the oldest unfinished connection) and
the request's origin (:class:`HostCheck`: a ``Host`` header of the server's own names, a JSON
content type).

A connection must send its whole request head within ``header_timeout_s`` of opening (or of
its first byte, after a keep-alive response), in at most ``max_header_bytes`` (431 past it),
and a body it announces within ``body_timeout_s`` of its head (408 past either deadline).
Past ``max_connections``, a new connection closes the oldest one still sending its head: held
half-open connections cannot keep well-formed clients out.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from unmask.serve.schemas import error_body

#: the names a server answers to whatever it is bound to (an IP literal is always accepted:
#: a page cannot rebind one, DNS rebinding needs a name)
LOOPBACK_NAMES = ("localhost",)


@dataclass(frozen=True)
class ConnectionLimits:
    """A connection's limits (module docstring); seconds and bytes."""

    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_header_bytes: int = 16 * 1024
    max_connections: int = 2048


def _reply(transport, status: int, reason: str, message: str, code: str) -> None:
    """Write a whole response (OpenAI's error body) on ``transport`` and close it; for a
    connection whose request the application never saw or never answered."""
    body = json.dumps(error_body(message, code=code)).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode()
    if not transport.is_closing():
        transport.write(head + body)
        transport.close()


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol under :attr:`limits` (module docstring)."""

    limits: ConnectionLimits = ConnectionLimits()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._timer = None
        self._head_bytes, self._tail = 0, b""
        self._opened = 0.0

    # -- state
    def _in_head(self) -> bool:
        """Still receiving a request's head (none seen yet on this cycle)."""
        return self.conn.their_state is h11.IDLE

    def _arm(self, seconds: float, then) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, then)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _head_size(self, data: bytes) -> int:
        """The bytes of the request head so far, ``data`` included (up to its blank
        line, where ``data`` holds it)."""
        seen = self._tail + data
        ends = [i + len(m) for m in (b"\r\n\r\n", b"\n\n") if (i := seen.find(m)) >= 0]
        self._tail = seen[-3:]
        if not ends:
            self._head_bytes += len(data)
            return self._head_bytes
        return self._head_bytes + min(ends) - (len(seen) - len(data))

    # -- asyncio.Protocol
    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._opened = self.loop.time()
        self._arm(self.limits.header_timeout_s, self._head_late)
        if len(self.connections) > self.limits.max_connections:
            self._make_room()

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        in_head = self._in_head()
        if in_head:
            if self._timer is None:  # a keep-alive connection's next request starts
                self._arm(self.limits.header_timeout_s, self._head_late)
            if self._head_size(data) > self.limits.max_header_bytes:
                self._disarm()
                _reply(self.transport, 431, "Request Header Fields Too Large",
                       f"request headers: larger than the server's limit of "
                       f"{self.limits.max_header_bytes} bytes", "headers_too_large")
                return
        super().data_received(data)
        if self.transport.is_closing():
            return
        if in_head:
            if not self._in_head():  # the head is complete: its body next, if any
                self._head_bytes, self._tail = 0, b""
                self._disarm()
                if self.conn.their_state is h11.SEND_BODY:
                    self._arm(self.limits.body_timeout_s, self._body_late)
        elif self.conn.their_state is not h11.SEND_BODY:
            self._disarm()  # the body is complete

    def on_response_complete(self) -> None:
        self._disarm()
        super().on_response_complete()

    # -- deadlines
    def _head_late(self) -> None:
        self._timer = None
        if self._in_head() and not self.transport.is_closing():
            if self._head_bytes:
                _reply(self.transport, 408, "Request Timeout",
                       f"request headers: not received within "
                       f"{self.limits.header_timeout_s:g} s", "request_timeout")
            else:
                self.transport.close()

    def _body_late(self) -> None:
        self._timer = None
        if self.conn.their_state is not h11.SEND_BODY or self.transport.is_closing():
            return
        if self.cycle is not None:
            started = self.cycle.response_started
            self.cycle.disconnected = True  # the application's receive() ends
            self.cycle.message_event.set()
            if started:
                self.transport.close()
                return
        _reply(self.transport, 408, "Request Timeout",
               f"body: not received within {self.limits.body_timeout_s:g} s",
               "request_timeout")

    def _make_room(self) -> None:
        """Close the oldest connection still sending its head (answer this one 503 if none
        is)."""
        waiting = [c for c in self.connections
                   if isinstance(c, GuardedH11) and c is not self and c._in_head()
                   and not c.transport.is_closing()]
        if not waiting:
            _reply(self.transport, 503, "Service Unavailable",
                   f"the server holds {self.limits.max_connections} connections; retry later",
                   "server_busy")
            return
        oldest = min(waiting, key=lambda c: c._opened)
        oldest._disarm()
        oldest.transport.close()


def protocol_class(limits: ConnectionLimits) -> type[GuardedH11]:
    """The protocol class under ``limits`` (``uvicorn.Config(http=...)``)."""
    return type("GuardedH11", (GuardedH11,), {"limits": limits})


def allowed_hosts(host: str, extra: tuple[str, ...] = ()) -> frozenset[str]:
    """The names a server bound to ``host`` answers to, besides IP literals and
    ``localhost``: ``host`` and the operator's ``extra`` (``--allow-host``)."""
    return frozenset(h.lower() for h in (host, *extra))


def host_allowed(host: bytes | None, allowed: frozenset[str]) -> bool:
    """Whether a ``Host`` header names this server: an IP literal, ``localhost``, or a name
    in ``allowed`` (``*`` in it: any); the port is not checked."""
    if "*" in allowed:
        return True
    if not host:
        return False
    text = host.decode("latin-1").strip().lower()
    if text.startswith("["):  # [::1]:8000
        name = text[1:text.find("]")] if "]" in text else text
    else:
        name = text.rsplit(":", 1)[0] if text.count(":") == 1 else text
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return name in LOOPBACK_NAMES or name in allowed


class HostCheck:
    """ASGI middleware: a request whose ``Host`` does not name this server
    (:func:`host_allowed`) is answered 400 (a page on another site that rebinds its name to
    this address cannot drive the API); a POST whose body is not declared JSON is answered
    415 (a page can send a cross-origin ``text/plain`` POST without asking)."""

    def __init__(self, app, allowed: frozenset[str]):
        self.app, self.allowed = app, allowed

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        problem = None
        if not host_allowed(headers.get(b"host"), self.allowed):
            problem = (400, "host: this server does not answer to that name (start it with "
                            "--allow-host NAME to add one)", "host_not_allowed")
        elif scope["method"] == "POST" and not headers.get(b"content-type", b"").split(b";")[
                0].strip().lower() == b"application/json":
            problem = (415, "content-type: send the body as application/json",
                       "unsupported_media_type")
        if problem is None:
            return await self.app(scope, receive, send)
        from fastapi.responses import JSONResponse

        status, message, code = problem
        response = JSONResponse(error_body(message, code=code), status_code=status)
        await response(scope, receive, send)
