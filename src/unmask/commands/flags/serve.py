"""The flags of ``unmask serve`` (:mod:`unmask.commands.serve`)."""

from __future__ import annotations

import argparse

from unmask.commands.flags.engine import add_device_arg
from unmask.commands.flags.sampler import add_sampler_arg
from unmask.commands.flags.threads import add_threads_arg
from unmask.commands.flags.types import (
    add_cache_kv_arg,
    add_folder_model_args,
    finite_float,
    positive_int,
)


def serve(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="text",
                   help="a shipped name or a model folder, loaded once (default: the shipped "
                        "text MDM); requests cannot name another")
    add_sampler_arg(p, also=" (the default of requests, which may give their own)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="a name clients may reach the server by (the Host header), besides "
                        "localhost, the --host name and IP addresses; repeat for more, '*' "
                        "for any (other names are refused: DNS rebinding)")
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
    p.add_argument("--max-decode-s", type=finite_float(0.0, 86400.0, open_low=True),
                   default=120.0, metavar="S",
                   help="a request's decode budget in seconds: past it, its rows leave the "
                        "decode and it is answered with an error (default 120)")
    p.add_argument("--served-model-name", default=None, metavar="NAME",
                   help="the model id clients give (default: the model folder's name)")
    p.add_argument("--chat-template", default=None, metavar="FILE",
                   help="a Jinja chat template for a folder whose tokenizer has none")
    p.add_argument("--pad-to-multiple-of", type=positive_int, default=None, metavar="M",
                   help="round a prompt's slots up to a multiple of M: rows of one width share "
                        "calls (default: the request's block length; 1: no padding computed, "
                        "prompts of one length batch)")
    add_cache_kv_arg(p)
    p.add_argument("--batch-invariant", action="store_true",
                   help="compute each row's pass alone, so that batched answers equal answers "
                        "alone bit for bit on any device (slower; see docs/gpu.md)")
    add_folder_model_args(p)
    add_device_arg(p)
    p.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="local: uvicorn in this process (default); ray: Ray Serve replicas "
                        "on the cluster at RAY_ADDRESS or a local one")
    p.add_argument("--replicas", type=positive_int, default=1, metavar="N",
                   help="Ray Serve replicas, one model each (--engine ray; default 1)")
    p.add_argument("--log-level", default="warning",
                   choices=["critical", "error", "warning", "info", "debug"],
                   help="server log level (info logs every request)")
    add_threads_arg(p)
