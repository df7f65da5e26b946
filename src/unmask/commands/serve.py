"""``unmask serve``: every decoder behind an OpenAI-compatible HTTP API (:mod:`unmask.serve`).

Nothing heavy is imported until the command runs: ``unmask serve --help`` reads no torch and
no web framework."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from unmask.commands.registry import arguments, command
from unmask.commands.threads import add_threads_arg
from unmask.errors import UnmaskError
from unmask.validation import finite_float, positive_int

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="text",
                   help="a shipped name or a model folder, loaded once (default: the shipped "
                        "text MDM); requests cannot name another")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--sampler", default=None,
                       help="default sampler spec (requests may give their own; default "
                            "confidence)")
    which.add_argument("--preset", default=None, choices=["quality", "lossless", "fast"],
                       help="a named configuration as the default sampler")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    p.add_argument("--max-batch", type=positive_int, default=32, metavar="N",
                   help="rows decoded in one call at most (default 32)")
    p.add_argument("--batch-wait-ms", type=finite_float(0.0), default=10.0, metavar="T",
                   help="how long a request waits for compatible ones to share its call "
                        "(default 10)")
    p.add_argument("--max-tokens", type=positive_int, default=None, metavar="N",
                   help="the largest max_tokens a request may ask for (default: the model's "
                        "length)")
    p.add_argument("--max-n", type=positive_int, default=16, metavar="N",
                   help="choices (rows) one request may ask for (default 16)")
    p.add_argument("--max-queue-rows", type=positive_int, default=1024, metavar="N",
                   help="rows waiting or decoding at once; more is answered 429 (default 1024)")
    p.add_argument("--max-body-bytes", type=positive_int, default=1 << 20, metavar="N",
                   help="largest request body; more is answered 413 (default 1 MiB)")
    p.add_argument("--served-model-name", default=None, metavar="NAME",
                   help="the model id clients give (default: the model folder's name)")
    p.add_argument("--chat-template", default=None, metavar="FILE",
                   help="a Jinja chat template for a folder whose tokenizer has none")
    p.add_argument("--cache-kv", choices=["prefix", "dual"], default=None,
                   help="Fast-dLLM's block KV cache (folders whose code takes "
                        "past_key_values); approximate, see docs/models.md")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="run modelling code shipped inside the model folder (only from there)")
    p.add_argument("--dtype", default=None, help="float32, bfloat16 or float16")
    p.add_argument("--device", default="cpu",
                   help="torch device (cpu, cuda, cuda:1, ...; with --engine ray: cpu or cuda)")
    p.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="local: uvicorn in this process (default); ray: Ray Serve replicas "
                        "on the cluster at RAY_ADDRESS or a local one")
    p.add_argument("--replicas", type=positive_int, default=1, metavar="N",
                   help="Ray Serve replicas, one model each (--engine ray; default 1)")
    p.add_argument("--log-level", default="warning",
                   choices=["critical", "error", "warning", "info", "debug"],
                   help="server log level (info logs every request)")
    add_threads_arg(p)


def options_from_args(args: argparse.Namespace):
    """The :class:`~unmask.serve.options.ServeOptions` the flags name."""
    from unmask.presets import preset_spec
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
    sampler = preset_spec(args.preset) if args.preset else (args.sampler or "confidence")
    return ServeOptions(
        model=args.model, sampler=sampler, served_name=args.served_model_name,
        max_batch=args.max_batch, batch_wait_ms=args.batch_wait_ms, max_tokens=args.max_tokens,
        max_n=min(args.max_n, args.max_batch), max_queue_rows=args.max_queue_rows,
        max_body_bytes=args.max_body_bytes, chat_template=template,
        trust_remote_code=args.trust_remote_code, dtype=args.dtype, device=args.device,
        cache_kv=args.cache_kv, threads=args.threads)


@command("serve", help="serve every decoder behind an OpenAI-compatible API (completions, chat, "
                       "infill; streaming, exact dynamic batching)")
@arguments(_args)
def serve_cmd(args: argparse.Namespace) -> int:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise UnmaskError("serve: needs fastapi and uvicorn (pip install 'unmask[serve]')"
                          ) from None
    options = options_from_args(args)
    if args.host not in LOOPBACK:
        print(f"warning: listening on {args.host}: reachable from other machines; the API has "
              "no authentication", file=sys.stderr)
    if args.engine == "ray":
        from unmask.serve.ray_app import serve_on_ray

        serve_on_ray(options, args.host, args.port, args.replicas,
                     announce=lambda s: print(s, flush=True))
        return 0
    from unmask.commands.engine_flags import resolve_device
    from unmask.serve.run import serve_forever

    resolve_device(args.device)
    serve_forever(options, args.host, args.port, args.log_level,
                  announce=lambda s: print(s, flush=True))
    return 0
