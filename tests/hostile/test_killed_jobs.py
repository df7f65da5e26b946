"""kill -9 in the middle of a job: what was finished survives, nothing is half-written, and a
resumed training ends exactly where an uninterrupted one does."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from unmask.cli import main

SRC = Path(__file__).resolve().parents[2] / "src"
TINY_ARITH = ["--batch-size", "8", "--eval-every", "2", "--eval-prompts", "4", "--warmup", "1",
              "--threads", "1", "--no-bf16", "--seed", "5", "--model-config",
              '{"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32}']
STEPS = 40


def _env():
    return {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def _kill_when(cmd, ready, timeout=180.0):
    """Start ``cmd``, SIGKILL it once ``ready()`` is true (or it ends); its exit status."""
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + timeout
        while proc.poll() is None and not ready() and time.time() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        return proc.wait(timeout=60)
    finally:
        proc.kill()


def _weights(run: Path) -> dict:
    return torch.load(run / "checkpoint.pt", weights_only=True)["model"]


def test_training_killed_and_resumed_ends_as_an_uninterrupted_run(tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    assert main(["arithmetic", "train", "--out", str(straight), "--steps", str(STEPS),
                 *TINY_ARITH]) == 0
    cmd = [sys.executable, "-m", "unmask", "arithmetic", "train", "--out", str(killed),
           "--steps", str(STEPS), *TINY_ARITH]
    status = _kill_when(cmd, lambda: (killed / "checkpoint.pt").is_file())
    assert status == -signal.SIGKILL  # killed mid-run, not finished
    step = torch.load(killed / "checkpoint.pt", weights_only=True)["step"]
    assert 1 <= step < STEPS
    assert main(["arithmetic", "train", "--out", str(killed), "--steps", str(STEPS),
                 *TINY_ARITH, "--resume"]) == 0
    a, b = _weights(straight), _weights(killed)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_bench_killed_mid_run_leaves_no_half_written_json(tmp_path):
    out = tmp_path / "bench.json"
    cmd = [sys.executable, "-m", "unmask", "sudoku", "bench", "--set", "hard", "--limit", "3",
           "--threads", "1", "--samplers", "confidence", "topk:k=9", "--json", str(out),
           "--quiet"]
    started = time.time()
    status = _kill_when(cmd, lambda: time.time() - started > 6.0)
    # killed at some point of the run: the JSON is either not there or whole
    assert status in (0, -signal.SIGKILL)
    if out.exists():
        assert len(json.loads(out.read_text())["rows"]) == 2
