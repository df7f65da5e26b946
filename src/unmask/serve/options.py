"""The server's settings, plain data (no torch, no web framework): what ``unmask serve`` reads
from its flags and every replica of a Ray deployment receives."""

from __future__ import annotations

from dataclasses import dataclass

from unmask.errors import require
from unmask.validation import is_int, is_number

#: bounds a request cannot exceed whatever the operator sets
HARD_MAX_BODY_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ServeOptions:
    """What ``unmask serve`` serves, and its limits.

    model: a shipped name or a model folder (loaded once; requests cannot name another).
    sampler: the default sampler spec (a request may give its own ``sampler``).
    served_name: the model id requests give in ``model`` and ``GET /v1/models`` lists
        (default: the folder's name).
    max_batch: rows decoded in one call at most (a request with ``n`` choices is ``n`` rows).
    batch_wait_ms: how long the first request of a batch waits for compatible ones.
    max_tokens: the largest ``max_tokens`` (generated length) a request may ask for (None:
        the model's max_length).
    max_n: choices (rows) one request may ask for, over all its prompts.
    max_queue_rows: rows waiting or decoding at once; more is answered 429.
    max_body_bytes: the largest request body; more is answered 413.
    chat_template: a Jinja chat template (its text) for a folder whose tokenizer has none.
    pad_to_multiple_of: a completion row's prompt slots are its prompt's length rounded up
        to a multiple of this (None: the request's block length). Rows of one width share
        calls: whole blocks let prompts of other lengths batch; 1 computes no padding but
        batches only prompts of one length.
    header_timeout_s, body_timeout_s: how long a connection may take to send a request's
        head, and then its body (408 past it); max_header_bytes: the largest request head
        (431 past it); max_connections: open connections at most (past it, a new one closes
        the oldest still sending its head): :mod:`unmask.serve.guard`.
    allow_hosts: the names, besides ``localhost`` and any IP address, a request's ``Host``
        header may give (``*``: any); others are answered 400 (DNS rebinding).
    max_decode_s: a request's decode budget in seconds: past it, its rows leave their call
        and it is answered with an error.
    trust_remote_code, dtype, device, cache_kv, batch_invariant, threads: as
        ``unmask generate`` (``batch_invariant``: each row's pass computed alone, so that a
        row's tokens are bit for bit those it gets alone on any device; slower).
    """

    model: str = "text"
    sampler: str = "confidence"
    served_name: str | None = None
    max_batch: int = 32
    batch_wait_ms: float = 10.0
    max_tokens: int | None = None
    max_n: int = 16
    max_queue_rows: int = 1024
    max_body_bytes: int = 1024 * 1024
    chat_template: str | None = None
    trust_remote_code: bool = False
    dtype: str | None = None
    device: str = "cpu"
    cache_kv: str | None = None
    batch_invariant: bool = False
    threads: int | None = None
    pad_to_multiple_of: int | None = None
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_header_bytes: int = 16 * 1024
    max_connections: int = 2048
    allow_hosts: tuple[str, ...] = ()
    max_decode_s: float = 120.0

    def __post_init__(self):
        for name in ("max_batch", "max_n", "max_queue_rows", "max_body_bytes",
                     "max_header_bytes", "max_connections"):
            value = getattr(self, name)
            require(is_int(value) and value >= 1, f"{name}: must be an integer >= 1, got "
                                                  f"{value!r}")
        require(self.max_body_bytes <= HARD_MAX_BODY_BYTES,
                f"max_body_bytes: at most {HARD_MAX_BODY_BYTES}, got {self.max_body_bytes}")
        require(self.pad_to_multiple_of is None or (is_int(self.pad_to_multiple_of)
                                                     and self.pad_to_multiple_of >= 1),
                f"pad_to_multiple_of: must be an integer >= 1, got {self.pad_to_multiple_of!r}")
        require(self.max_tokens is None or (is_int(self.max_tokens) and self.max_tokens >= 1),
                f"max_tokens: must be an integer >= 1, got {self.max_tokens!r}")
        require(isinstance(self.batch_wait_ms, (int, float)) and 0 <= self.batch_wait_ms
                <= 60_000, f"batch_wait_ms: must be in [0, 60000], got {self.batch_wait_ms!r}")
        for name in ("header_timeout_s", "body_timeout_s", "max_decode_s"):
            value = getattr(self, name)
            require(is_number(value) and 0 < value <= 86_400,
                    f"{name}: must be a number of seconds in (0, 86400], got {value!r}")
        require(isinstance(self.allow_hosts, tuple)
                and all(isinstance(h, str) and h for h in self.allow_hosts),
                f"allow_hosts: expected a tuple of names, got {self.allow_hosts!r}")
        require(self.max_n <= self.max_batch,
                f"max_n: {self.max_n} exceeds max_batch {self.max_batch} (a request's rows "
                "decode in one call)")
