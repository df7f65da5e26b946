"""Load test of `unmask serve` on loopback: N requests from C concurrent `openai` clients
(mixed samplers, generated lengths and prompt lengths), against the same requests through
`unmask.generate` one by one in this process (the ratio), with every answer checked against
the one-by-one answer (text and pass count).

    PYTHONPATH=src python benchmarks/serve_load.py [--requests 200] [--clients 16] \\
        [--threads 1] [--max-batch 32] [--batch-wait-ms 20] [--samplers SPEC ...] \\
        [--lengths N ...] [--json OUT.json]

The server is `unmask serve` in a subprocess on 127.0.0.1 (the shipped text MDM, the same
torch threads as the one-by-one run); the clients are threads of this process, each sending
its next request when the last one is answered. Prints wall-clock seconds, requests/s, p50 /
p95 latency, forward passes and sequences evaluated of both modes, the throughput ratio, the
decode calls the server made (rows per call), and the lost, failed and differing requests.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
SAMPLERS = ["confidence", "eb:gamma=0.1"]
LENGTHS = [16, 32]
WORDS = ["1 + 2", "What is 7+5", "Sum 3 4 9", "12 * 3 =", "9 - 4", "Count 1 2 3",
         "What is 30+12", "2+2="]


def make_requests(n: int, samplers: list[str], lengths: list[int]) -> list[dict]:
    """``n`` requests: prompt, sampler and length cycling at different rates, temperature
    0.7, seed = index."""
    return [{"prompt": WORDS[i % len(WORDS)], "sampler": samplers[(i // 3) % len(samplers)],
             "max_tokens": lengths[(i // 2) % len(lengths)], "temperature": 0.7, "seed": i}
            for i in range(n)]


def one_by_one(reqs: list[dict], threads: int) -> tuple[float, list[tuple[str, int, int]]]:
    """Wall seconds and (text, passes, sequences) of each request through `generate`."""
    import torch

    from unmask.generate import generate
    from unmask.models.auto import load_model

    torch.set_num_threads(threads)
    model = load_model("text")
    generate(model, None, "warm up", gen_length=8)
    out = []
    t0 = time.perf_counter()
    for r in reqs:
        (g,) = generate(model, None, r["prompt"], sampler=r["sampler"],
                        gen_length=r["max_tokens"], temperature=r["temperature"], seed=r["seed"])
        out.append((g.text, g.nfe, g.sequences))
    return time.perf_counter() - t0, out


def start_server(args) -> tuple[subprocess.Popen, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "unmask", "serve", "--port", str(port), "--threads",
         str(args.threads), "--max-batch", str(args.max_batch), "--batch-wait-ms",
         str(args.batch_wait_ms), "--max-tokens", str(max(args.lengths))],
        stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    if "http://" not in line:
        proc.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    return proc, port


def load(reqs: list[dict], port: int, clients: int) -> tuple[float, list]:
    """Wall seconds and, per request, (latency s, (text, passes, sequences)) or an error."""
    import openai

    todo: queue.Queue = queue.Queue()
    for i, r in enumerate(reqs):
        todo.put((i, r))
    results: list = [None] * len(reqs)

    def client() -> None:
        c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused",
                          max_retries=0, timeout=600)
        while True:
            try:
                i, r = todo.get_nowait()
            except queue.Empty:
                return
            t0 = time.perf_counter()
            try:
                resp = c.completions.create(
                    model="text", prompt=r["prompt"], max_tokens=r["max_tokens"],
                    temperature=r["temperature"], seed=r["seed"],
                    extra_body={"sampler": r["sampler"]})
                stats = resp.choices[0].model_extra["unmask"]
                results[i] = (time.perf_counter() - t0,
                              (resp.choices[0].text, stats["passes"], stats["sequences"]))
            except Exception as e:  # noqa: BLE001 - counted as failed
                results[i] = (time.perf_counter() - t0, f"{type(e).__name__}: {e}")

    workers = [threading.Thread(target=client) for _ in range(clients)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - t0, results


def row(name: str, wall: float, n: int, lat: list[float], answers: list) -> dict:
    return {"mode": name, "requests": n, "wall_s": round(wall, 2),
            "req_per_s": round(n / wall, 3),
            "p50_s": round(statistics.median(lat), 3) if lat else None,
            "p95_s": round(sorted(lat)[int(0.95 * (len(lat) - 1))], 3) if lat else None,
            "passes": sum(a[1] for a in answers), "sequences": sum(a[2] for a in answers)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-batch", type=int, default=32)
    p.add_argument("--batch-wait-ms", type=float, default=20.0)
    p.add_argument("--samplers", nargs="+", default=SAMPLERS)
    p.add_argument("--lengths", nargs="+", type=int, default=LENGTHS, help="max_tokens values")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    reqs = make_requests(args.requests, args.samplers, args.lengths)
    base_wall, base = one_by_one(reqs, args.threads)
    base_lat = [base_wall / len(reqs)] * len(reqs)
    proc, port = start_server(args)
    try:
        wall, got = load(reqs, port, args.clients)
        health = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/health").read())
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    lost = sum(g is None for g in got)
    failed = [g[1] for g in got if g is not None and isinstance(g[1], str)]
    ok = [g for g in got if g is not None and not isinstance(g[1], str)]
    differ = sum(g is not None and not isinstance(g[1], str) and g[1] != b
                 for g, b in zip(got, base, strict=True))
    rows = [row("generate, one by one", base_wall, len(reqs), base_lat, base),
            row(f"serve, {args.clients} clients", wall, len(ok), [g[0] for g in ok],
                [g[1] for g in ok])]
    ratio = rows[1]["req_per_s"] / rows[0]["req_per_s"]
    print(f"{args.requests} requests, samplers {args.samplers}, max_tokens {args.lengths}, "
          f"{len(WORDS)} prompts, temperature 0.7, --threads {args.threads}, max batch "
          f"{args.max_batch}, wait {args.batch_wait_ms:g} ms")
    print(f"{'mode':<24} {'wall s':>8} {'req/s':>8} {'p50 s':>7} {'p95 s':>7} {'passes':>7} "
          f"{'seqs':>7}")
    for r in rows:
        print(f"{r['mode']:<24} {r['wall_s']:>8} {r['req_per_s']:>8} {r['p50_s']:>7} "
              f"{r['p95_s']:>7} {r['passes']:>7} {r['sequences']:>7}")
    calls = health["decode_calls"]
    print(f"throughput ratio (serve / one by one): {ratio:.2f}x; lost {lost}, failed "
          f"{len(failed)}, answers differing from one by one {differ}; the server made "
          f"{calls} decode calls ({health['rows_decoded'] / max(calls, 1):.1f} rows each)")
    for f in failed[:3]:
        print("  failed:", f)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows,
                                               "ratio": round(ratio, 3), "lost": lost,
                                               "decode_calls": calls,
                                               "failed": len(failed), "differ": differ},
                                              indent=1))


if __name__ == "__main__":
    main()
