"""scripts/gpu_sudoku.sh, the prepared GPU run, works end to end in a tiny CPU form."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_script_trains_benches_and_labels_on_cpu(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "DEVICE": "cpu", "TRAIN_S": "4", "POOL": "200",
           "LIMIT": "3", "CONTEXTS": "3", "BATCH": "16", "WARMUP": "5", "PYTHON": sys.executable,
           "CONFIG": '{"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32}'}
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_sudoku.sh")], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    # the time budget ended the run and its last step was evaluated into best/
    history = [json.loads(line) for line in (tmp_path / "model" / "history.jsonl").open()]
    assert history and history[-1]["lr"] == pytest.approx(5e-5, rel=0.05)
    assert (tmp_path / "model" / "best" / "model.safetensors").is_file()
    assert not (tmp_path / "model" / "checkpoint.pt").exists()
    rows = json.loads((tmp_path / "bench.json").read_text())["rows"]
    assert [r["label"] for r in rows][0] == "confidence" and len(rows) == 5
    fp = run.stdout.split("model fingerprint ")[1].split()[0]
    manifest = json.loads((tmp_path / "mi" / f"labels-{fp}" / "manifest.json").read_text())
    assert manifest["contexts"] == 3
