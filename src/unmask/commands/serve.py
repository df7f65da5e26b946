"""``unmask serve``: every decoder behind an OpenAI-compatible HTTP API (:mod:`unmask.serve`).

Nothing heavy is imported until the command runs: ``unmask serve --help`` reads no torch and
no web framework."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from unmask.commands.flags.sampler import sampler_text
from unmask.commands.registry import command
from unmask.errors import UnmaskError

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def options_from_args(args: argparse.Namespace):
    """The :class:`~unmask.serve.options.ServeOptions` the flags name."""
    from unmask.serve.options import ServeOptions

    if not 0 <= args.port <= 65535:
        raise UnmaskError(f"--port: must be in [0, 65535], got {args.port}")
    if args.engine == "local" and args.replicas != 1:
        raise UnmaskError("--replicas: the local engine runs one; add --engine ray")
    template = None
    if args.chat_template:
        path = Path(args.chat_template)
        if not path.is_file():
            raise UnmaskError(f"--chat-template: no file {path}")
        template = path.read_text(encoding="utf-8")
    sampler = sampler_text(args)
    return ServeOptions(
        model=args.model, sampler=sampler, served_name=args.served_model_name,
        max_batch=args.max_batch, batch_wait_ms=args.batch_wait_ms, max_tokens=args.max_tokens,
        max_n=min(args.max_n, args.max_batch), max_queue_rows=args.max_queue_rows,
        max_body_bytes=args.max_body_bytes, chat_template=template,
        trust_remote_code=args.trust_remote_code, dtype=args.dtype, device=args.device,
        cache_kv=args.cache_kv, batch_invariant=args.batch_invariant, threads=args.threads,
        pad_to_multiple_of=args.pad_to_multiple_of, allow_hosts=tuple(args.allow_host),
        max_decode_s=args.max_decode_s)


@command("serve")
def serve_cmd(args: argparse.Namespace) -> int:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise UnmaskError("serve: needs fastapi and uvicorn (pip install 'unmask[serve]')"
                          ) from None
    options = options_from_args(args)
    if args.engine == "local":
        from unmask.serve.run import check_port

        check_port(args.host, args.port)  # refused before any warning
    if args.host not in LOOPBACK:
        print(f"warning: listening on {args.host}: reachable from other machines; the API has "
              "no authentication", file=sys.stderr)
    if args.engine == "ray":
        from unmask.serve.ray_app import serve_on_ray

        serve_on_ray(options, args.host, args.port, args.replicas,
                     announce=lambda s: print(s, flush=True))
        return 0
    from unmask.commands.flags.engine import resolve_device
    from unmask.serve.run import serve_forever

    resolve_device(args.device)
    serve_forever(options, args.host, args.port, args.log_level,
                  announce=lambda s: print(s, flush=True))
    return 0
