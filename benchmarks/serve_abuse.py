"""Loopback abuse test of `unmask serve`: are well-formed clients still answered, and how fast,
while others hold half-open connections and ask for the most expensive decode allowed?

    PYTHONPATH=src python benchmarks/serve_abuse.py [--half-open 1000] [--clients 16] \\
        [--rounds 3] [--abusers 2] [--threads 1] [--json OUT.json]

The server is `unmask serve` (the shipped text MDM) in a subprocess on 127.0.0.1; everything
here talks to 127.0.0.1 only, with bounded counts, and stops by itself (``--max-s``). Phase
"alone": ``--rounds`` rounds of ``--clients`` concurrent well-formed completions (8 tokens).
Phase "attacked": the same rounds while ``--half-open`` connections each hold a partial
request head (reopened as the server closes them), one connection announces a body it never
sends, one sends a 256 KiB header, and ``--abusers`` clients send back to back the most
expensive lookahead request the server allows (``info-gain`` at its candidate limit, 32
tokens) and one over the limit (``n_candidates=256``, refused). Prints each phase's client
latencies (median, max per round), the ratio attacked / alone, and every status seen.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
HOST = "127.0.0.1"
ABUSE = {"model": "text", "prompt": "What is 7+5? " * 4, "max_tokens": 32,
         "sampler": "info-gain:n_candidates=16,tau_tok=10,tau_pos=10", "temperature": 1.0}
OVER = {**ABUSE, "sampler": "info-gain:n_candidates=256,tau_tok=100,tau_pos=100"}


def start_server(threads: int) -> tuple[subprocess.Popen, int]:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "unmask", "serve", "--host", HOST, "--port",
                             str(port), "--threads", str(threads), "--max-tokens", "32",
                             "--max-batch", "32", "--max-decode-s", "30"],
                            stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    if "http://" not in line:
        proc.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # announced: listening within moments
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the server did not listen")


def post(port: int, body: dict, timeout: float = 120) -> tuple[int, float]:
    """(status, seconds) of one completion request."""
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("POST", "/v1/completions", json.dumps(body),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        return resp.status, time.perf_counter() - t0
    except OSError:
        return -1, time.perf_counter() - t0
    finally:
        conn.close()


def rounds(port: int, clients: int, n: int) -> list[list[tuple[int, float]]]:
    """``n`` rounds of ``clients`` concurrent well-formed requests."""
    out = []
    with ThreadPoolExecutor(clients) as pool:
        for r in range(n):
            bodies = [{"model": "text", "prompt": f"{i} + {r} =", "max_tokens": 8, "seed": i}
                      for i in range(clients)]
            out.append(list(pool.map(lambda b: post(port, b), bodies)))
    return out


class Attack:
    """The hostile clients, on threads until :meth:`stop` (or ``until``, a monotonic time)."""

    def __init__(self, port: int, half_open: int, abusers: int, until: float):
        self.port, self.half_open, self.until = port, half_open, until
        self.stopped = threading.Event()
        self.statuses: dict[str, dict[int, int]] = {"abuse": {}, "over": {}, "other": {}}
        self.reopened = 0
        self.threads = [threading.Thread(target=self._hold, daemon=True),
                        threading.Thread(target=self._oddities, daemon=True),
                        *(threading.Thread(target=self._abuse, daemon=True)
                          for _ in range(abusers))]

    def running(self) -> bool:
        return not self.stopped.is_set() and time.monotonic() < self.until

    def _count(self, kind: str, status: int) -> None:
        self.statuses[kind][status] = self.statuses[kind].get(status, 0) + 1

    def _open(self) -> socket.socket | None:
        try:
            s = socket.create_connection((HOST, self.port), timeout=5)
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Held: ")
            s.setblocking(False)
            return s
        except OSError:
            return None

    def _hold(self) -> None:
        held = [s for s in (self._open() for _ in range(self.half_open)) if s is not None]
        while self.running():
            time.sleep(0.25)
            for i, s in enumerate(held):
                try:
                    alive = s.recv(4096) == b"" and False
                except BlockingIOError:
                    alive = True
                except OSError:
                    alive = False
                if not alive:
                    s.close()
                    held[i] = self._open() or held[i]
                    self.reopened += 1
        for s in held:
            s.close()

    def _oddities(self) -> None:
        try:
            with socket.create_connection((HOST, self.port), timeout=60) as s:
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                          b"application/json\r\nContent-Length: 1000\r\n\r\n{")
                self._count("other", int(s.recv(100)[9:12] or 0))
            with socket.create_connection((HOST, self.port), timeout=60) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "
                          + b"a" * 256 * 1024 + b"\r\n\r\n")
                self._count("other", int(s.recv(100)[9:12] or 0))
        except (OSError, ValueError):
            self._count("other", -1)

    def _abuse(self) -> None:
        while self.running():
            self._count("over", post(self.port, OVER)[0])
            self._count("abuse", post(self.port, ABUSE)[0])

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        self.stopped.set()
        for t in self.threads:
            t.join(timeout=70)


def summary(rs: list[list[tuple[int, float]]]) -> dict:
    lat = [t for r in rs for _, t in r]
    return {"median_s": round(statistics.median(lat), 3), "max_s": round(max(lat), 3),
            "round_max_s": [round(max(t for _, t in r), 3) for r in rs],
            "statuses": sorted({s for r in rs for s, _ in r})}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--half-open", type=int, default=1000)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--abusers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-s", type=float, default=300.0, help="stop everything after this")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    proc, port = start_server(args.threads)
    try:
        rounds(port, args.clients, 1)  # warm up
        alone = summary(rounds(port, args.clients, args.rounds))
        attack = Attack(port, args.half_open, args.abusers, time.monotonic() + args.max_s)
        attack.start()
        time.sleep(3.0)  # the connections held, the first expensive calls running
        attacked = summary(rounds(port, args.clients, args.rounds))
        attack.stop()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    out = {"half_open": args.half_open, "clients": args.clients, "rounds": args.rounds,
           "alone": alone, "attacked": attacked, "hostile_statuses": attack.statuses,
           "reopened": attack.reopened,
           "ratio_median": round(attacked["median_s"] / alone["median_s"], 2),
           "ratio_max": round(attacked["max_s"] / alone["max_s"], 2)}
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
