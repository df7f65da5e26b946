"""Ray engine: label shards from Ray workers equal the local run's bytes, also after a worker
is killed mid-run; bad engine input is one line."""

import operator
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import unmask
from unmask import UnmaskError
from unmask.cli import main
from unmask.errors import require
from unmask.mi.label_files import read_labels
from unmask.mi.labels import write_labels
from unmask.models import MDMTransformer
from unmask.parallel.workers import LocalEngine, RayEngine, make_engine
from unmask.sudoku.train import sudoku_model_config

SRC = str(Path(unmask.__file__).resolve().parents[1])
LABELS = dict(contexts=6, shard_size=2, seed=5, eps=1e-3, batch_size=512)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.manual_seed(0)
    model = MDMTransformer(sudoku_model_config(d_model=16, n_layers=1, n_heads=2, d_ff=32))
    path = tmp_path_factory.mktemp("model") / "tiny"
    model.save_pretrained(path)
    return MDMTransformer.from_pretrained(path), path


@pytest.fixture(scope="module")
def local_labels(tiny, tmp_path_factory):
    """The reference: the local engine, one torch thread (as each Ray worker runs)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = tmp_path_factory.mktemp("local") / "labels"
        write_labels(tiny[0], out, **LABELS)
    finally:
        torch.set_num_threads(threads)
    return out


def _same_folder(a: Path, b: Path) -> None:
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())  # no temporary files either
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_engines_map_every_job_once(ray_session):
    jobs = [3, 1, 4, 1, 5]
    local = LocalEngine()
    local.open(lambda: 2)
    assert list(local.map_unordered(operator.mul, jobs)) == [(k, 2 * j) for k, j in
                                                            enumerate(jobs)]
    # Ray pickles functions by reference: stdlib and unmask functions reach the workers
    with RayEngine(2) as engine:
        engine.open(int)  # every worker's state: int() = 0
        assert engine.call(operator.add, 3) == 3
        assert sorted(engine.map_unordered(operator.add, jobs)) == list(enumerate(jobs))
        with pytest.raises(UnmaskError, match="^job: refused$"):  # the worker's own line
            list(engine.map_unordered(require, ["job: refused"]))
        with pytest.raises(UnmaskError, match="^engine: running job 1 failed on a Ray worker "
                                              r"\(ZeroDivisionError"):
            list(engine.map_unordered(operator.truediv, [1, 0]))
    assert ray_session.is_initialized()  # a caller's session stays up


def test_ray_shards_equal_local_bytes(tiny, local_labels, ray_session, tmp_path):
    lines = []
    manifest = write_labels(tiny[0], tmp_path / "ray", engine=RayEngine(2), log=lines.append,
                            **LABELS)
    _same_folder(tmp_path / "ray", local_labels)
    assert manifest == read_labels(local_labels)[1]
    assert len(lines) == 3 and all(" 2 contexts, " in line for line in lines)


class _KillOnce:
    """A log callback that SIGKILLs the engine's workers after the first finished shard."""

    def __init__(self, engine: RayEngine):
        self.engine, self.lines, self.killed = engine, [], False

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        if not self.killed:
            self.killed = True
            for pid in self.engine.pids:
                os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_killed_worker_is_restarted_and_the_bytes_stay(tiny, local_labels, ray_session,
                                                         tmp_path):
    engine = RayEngine(2, max_restarts=1)
    log = _KillOnce(engine)
    write_labels(tiny[0], tmp_path / "ray", engine=engine, log=log, **LABELS)
    assert log.killed and len(log.lines) == 3
    _same_folder(tmp_path / "ray", local_labels)


@pytest.mark.slow
def test_killed_workers_without_restarts_fail_in_one_line_and_resume(tiny, local_labels,
                                                                      ray_session, tmp_path):
    engine = RayEngine(2, max_restarts=0)
    log = _KillOnce(engine)
    with pytest.raises(UnmaskError, match="Ray worker died") as e:
        write_labels(tiny[0], tmp_path / "ray", engine=engine, log=log, **LABELS)
    assert "\n" not in str(e.value)
    finished = sorted(p.name for p in (tmp_path / "ray").glob("shard-*"))
    assert 1 <= len(finished) < 3  # killed mid-run, the first shard kept
    lines = []
    write_labels(tiny[0], tmp_path / "ray", engine=RayEngine(2), log=lines.append, **LABELS)
    # the resume on Ray checks the finished shards' hashes and computes only the rest
    assert sum("done already" in line for line in lines) == len(finished)
    assert sum(" 2 contexts, " in line for line in lines) == 3 - len(finished)
    _same_folder(tmp_path / "ray", local_labels)


# --- bad input: one line, exit 2 -------------------------------------------------------------

def test_ray_not_installed_is_one_line(tiny, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    argv = ["mi", "label", "--model", str(tiny[1]), "--contexts", "2", "--out",
            str(tmp_path / "o"), "--engine", "ray", "--workers", "2"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: engine: ray is not installed (pip install 'unmask[ray]')"
    with pytest.raises(UnmaskError, match="ray is not installed"):
        make_engine("ray", 2)
    with pytest.raises(UnmaskError, match="workers"):
        RayEngine(0)


def test_unreachable_ray_address_fails_fast_in_one_line(tiny, tmp_path):
    pytest.importorskip("ray")
    env = {**os.environ, "PYTHONPATH": SRC, "RAY_ADDRESS": "127.0.0.1:1"}
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "unmask", "mi", "label", "--model",
                           str(tiny[1]), "--contexts", "2", "--out", str(tmp_path / "o"),
                           "--engine", "ray"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: RAY_ADDRESS: cannot reach 127.0.0.1:1")
    assert done.stderr.count("\n") == 1 and time.monotonic() - t0 < 60
    assert not (tmp_path / "o" / "manifest.json").exists()
