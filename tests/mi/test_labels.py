"""Label shards: pure contexts, atomic resumable shards, identity checks, kill-and-resume."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import unmask
from unmask import ExactJointMDM, UnmaskError
from unmask.cli import main
from unmask.mi import perturbation_mi
from unmask.mi.label_files import read_labels
from unmask.mi.label_set import LabelSet
from unmask.mi.labels import write_labels
from unmask.models import MDMTransformer
from unmask.sudoku import grid_to_tokens, is_valid_solution, training_grids
from unmask.sudoku.labels import _SUDOKU_LABEL_SALT, sudoku_contexts
from unmask.sudoku.train import sudoku_model_config

SRC = str(Path(unmask.__file__).resolve().parents[1])


@pytest.fixture(scope="module")
def tiny_sudoku(tmp_path_factory):
    """A randomly initialised one-layer Sudoku MDM saved as a model folder."""
    torch.manual_seed(0)
    model = MDMTransformer(sudoku_model_config(d_model=16, n_layers=1, n_heads=2, d_ff=32))
    path = tmp_path_factory.mktemp("model") / "tiny"
    model.save_pretrained(path)
    return MDMTransformer.from_pretrained(path), path


def test_contexts_are_a_pure_function_of_seed_and_index():
    batch = sudoku_contexts(3, 10, 6, (0.05, 1.0))
    one_by_one = torch.cat([sudoku_contexts(3, 10 + k, 1, (0.05, 1.0)) for k in range(6)])
    assert torch.equal(batch, one_by_one)
    assert not torch.equal(batch, sudoku_contexts(4, 10, 6, (0.05, 1.0)))
    assert (batch == 9).any(1).all()
    # a ratio range near 0 still masks one cell, so no context is free of probes
    assert ((sudoku_contexts(3, 10, 6, (0.0, 1e-9)) == 9).sum(1) == 1).all()


def test_contexts_hide_fresh_valid_grids_at_the_asked_ratio():
    lo, hi = 0.3, 0.5
    x = sudoku_contexts(0, 0, 40, (lo, hi))
    n_masked = (x == 9).sum(1)
    assert n_masked.min() >= round(lo * 81) and n_masked.max() <= round(hi * 81)
    assert n_masked.float().std() > 0  # the ratio varies per context
    grids = training_grids(40, seed=_SUDOKU_LABEL_SALT, offset=0)
    assert is_valid_solution(grids).all()
    revealed = x != 9
    assert torch.equal(x[revealed], grid_to_tokens(grids)[revealed])
    # not the grids a training run with a small seed draws
    assert not (training_grids(40, seed=0) == grids).all(1).any()


def test_shards_hold_the_probing_result(tiny_sudoku, tmp_path):
    model, _ = tiny_sudoku
    manifest = write_labels(model, tmp_path / "labels", contexts=5, shard_size=2, eps=1e-3,
                            seed=7)
    assert [s["count"] for s in manifest["shards"]] == [2, 2, 1]
    assert manifest["contexts"] == 5
    tensors, read_manifest = read_labels(tmp_path / "labels")
    assert read_manifest == manifest
    assert torch.equal(tensors["tokens"], sudoku_contexts(7, 0, 5, (0.05, 1.0)))
    res = perturbation_mi(model, tensors["tokens"], eps=1e-3)
    assert torch.equal(tensors["masked"], tensors["tokens"] == 9)
    assert torch.allclose(tensors["mi"], res.mi.float(), atol=1e-5)
    assert torch.allclose(tensors["directed"], res.directed.float(), atol=1e-5)
    assert torch.allclose(tensors["entropy"], res.entropy.float(), atol=1e-5)
    assert torch.allclose(tensors["dropped_mass"], res.dropped_mass.float(), atol=1e-6)
    assert tensors["sequences"].tolist() == res.row_sequences.tolist()


def test_rerun_skips_finished_shards_and_grows(tiny_sudoku, tmp_path):
    model, _ = tiny_sudoku
    out = tmp_path / "labels"
    write_labels(model, out, contexts=3, shard_size=2)
    first = (out / "shard-00000.safetensors").stat().st_mtime_ns
    (out / ".shard-00001.safetensors.x1y2.tmp").write_bytes(b"half a shard")  # a SIGKILL's mess
    lines = []
    write_labels(model, out, contexts=3, shard_size=2, log=lines.append)
    assert lines == ["shard 1/2: done already", "shard 2/2: done already"]
    assert (out / "shard-00000.safetensors").stat().st_mtime_ns == first
    assert not list(out.glob(".*.tmp"))
    # growing the set recomputes the short last shard at its new size
    write_labels(model, out, contexts=6, shard_size=2)
    write_labels(model, tmp_path / "direct", contexts=6, shard_size=2)
    for name in ["shard-00000.safetensors", "shard-00001.safetensors",
                 "shard-00002.safetensors", "manifest.json"]:
        assert (out / name).read_bytes() == (tmp_path / "direct" / name).read_bytes()
    # a smaller request keeps the larger set
    manifest = write_labels(model, out, contexts=2, shard_size=2)
    assert manifest["contexts"] == 6


@pytest.mark.parametrize("change, field", [
    ({"seed": 1}, "seed"), ({"eps": 0.0}, "eps"), ({"mask_ratio": (0.1, 0.9)}, "mask_ratio"),
    ({"shard_size": 3}, "shard_size"),
])
def test_a_folder_of_other_labels_is_an_error(tiny_sudoku, tmp_path, change, field):
    model, _ = tiny_sudoku
    kwargs = dict(contexts=2, shard_size=2, seed=0, eps=1e-4, mask_ratio=(0.05, 1.0))
    write_labels(model, tmp_path, **kwargs)
    with pytest.raises(UnmaskError, match=field):
        write_labels(model, tmp_path, **{**kwargs, **change})


def test_another_model_is_an_error(tiny_sudoku, tmp_path):
    model, _ = tiny_sudoku
    write_labels(model, tmp_path, contexts=2, shard_size=2)
    torch.manual_seed(1)
    other = MDMTransformer(sudoku_model_config(d_model=16, n_layers=1, n_heads=2, d_ff=32))
    with pytest.raises(UnmaskError, match="model_fingerprint"):
        write_labels(other, tmp_path, contexts=2, shard_size=2)
    other.autocast_bf16 = True
    with pytest.raises(UnmaskError, match="model_fingerprint|precision"):
        write_labels(other, tmp_path, contexts=2, shard_size=2)


def test_shards_without_manifest_and_wrong_model_are_errors(tiny_sudoku, tmp_path):
    model, _ = tiny_sudoku
    write_labels(model, tmp_path, contexts=2, shard_size=2)
    (tmp_path / "manifest.json").unlink()
    with pytest.raises(UnmaskError, match="manifest"):
        write_labels(model, tmp_path, contexts=2, shard_size=2)
    with pytest.raises(UnmaskError, match="model: the sudoku task"):
        write_labels(ExactJointMDM(), tmp_path / "toy", contexts=2, task="sudoku")
    with pytest.raises(UnmaskError, match="task: name the context task"):
        write_labels(ExactJointMDM(), tmp_path / "toy", contexts=2)  # it records no task
    with pytest.raises(UnmaskError, match="task"):
        write_labels(model, tmp_path / "x", contexts=2, task="proteins")
    with pytest.raises(UnmaskError, match="contexts"):
        write_labels(model, tmp_path / "x", contexts=0)


def _cli(*args):
    return [sys.executable, "-m", "unmask", "mi", "label", *args]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _run_until(cmd, path: Path, timeout: float = 120.0) -> None:
    """Start ``cmd`` and SIGKILL it as soon as ``path`` exists (or it ends)."""
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while proc.poll() is None and not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_killed_and_resumed_run_is_byte_identical(tiny_sudoku, tmp_path):
    _, model_dir = tiny_sudoku
    args = ["--model", str(model_dir), "--contexts", "8", "--shard-size", "2", "--eps", "1e-3",
            "--seed", "5", "--threads", "1", "--batch-size", "512"]
    resumed, straight = tmp_path / "resumed", tmp_path / "straight"
    cmd = _cli(*args, "--out", str(resumed))
    _run_until(cmd, resumed / "shard-00000.safetensors")  # killed computing shard 1
    _run_until(cmd, resumed / "shard-00002.safetensors")  # killed again further on
    assert not (resumed / "shard-00003.safetensors").exists()  # the kills did interrupt
    _flip_byte(resumed / "shard-00000.safetensors")  # and a finished shard went bad
    done = subprocess.run(cmd, env=_env(), check=True, capture_output=True, text=True)
    assert "shard 1/4: shard-00000.safetensors does not match its sha256" in done.stdout
    subprocess.run(_cli(*args, "--out", str(straight)), env=_env(), check=True,
                   capture_output=True)
    names = sorted(p.name for p in straight.iterdir())
    assert names == sorted(p.name for p in resumed.iterdir())  # no temp files left over
    assert names == ["manifest.json"] + [f"shard-{k:05d}.safetensors" for k in range(4)]
    for name in names:
        assert (resumed / name).read_bytes() == (straight / name).read_bytes(), name


@pytest.mark.parametrize("args, message", [
    (["--mask-ratio", "0.6:0.2"], "--mask-ratio"), (["--mask-ratio", "half"], "--mask-ratio"),
    (["--eps", "1.5"], "--eps"), (["--contexts", "0"], "--contexts"),
    (["--shard-size", "0"], "--shard-size"),
])
def test_cli_bad_input_is_one_line(tiny_sudoku, tmp_path, capsys, args, message):
    _, model_dir = tiny_sudoku
    base = ["mi", "label", "--model", str(model_dir), "--contexts", "2", "--out",
            str(tmp_path / "o")]
    assert main(base + args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_sudoku_symmetries_move_grids_to_grids_and_keep_masks():
    from unmask.mi.labels import get_task

    perm, tmap = get_task("sudoku").symmetries(16, 3)
    assert perm.shape == (16, 81) and tmap.shape == (16, 10)
    assert (np.sort(perm, 1) == np.arange(81)).all() and (tmap[:, 9] == 9).all()
    x = sudoku_contexts(0, 0, 16, (0.2, 0.6))
    moved = torch.gather(torch.from_numpy(tmap), 1, torch.gather(x, 1, torch.from_numpy(perm)))
    assert ((moved == 9).sum(1) == (x == 9).sum(1)).all()
    grids = training_grids(16, seed=_SUDOKU_LABEL_SALT, offset=0)
    solved = grid_to_tokens(grids)
    moved_solved = torch.gather(torch.from_numpy(tmap), 1,
                                torch.gather(solved, 1, torch.from_numpy(perm)))
    assert is_valid_solution(moved_solved.numpy() + 1).all()
    assert get_task("sudoku").symmetries(16, 3)[0].tolist() == perm.tolist()  # seeded


# --- the manifest's sha256 is checked on resume (recompute) and on read (refuse) -------------

def _flip_byte(path: Path, offset: int = -5) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-100])


def _edit_sha(out: Path, file: str) -> None:
    manifest = json.loads((out / "manifest.json").read_text())
    entry = next(s for s in manifest["shards"] if s["file"] == file)
    entry["sha256"] = "0" * 64
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


def _drop_entry(out: Path, file: str) -> None:
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["shards"] = [s for s in manifest["shards"] if s["file"] != file]
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


@pytest.fixture(scope="module")
def straight_labels(tiny_sudoku, tmp_path_factory):
    """An uninterrupted run: 5 contexts in shards of 2."""
    model, _ = tiny_sudoku
    out = tmp_path_factory.mktemp("straight") / "labels"
    write_labels(model, out, contexts=5, shard_size=2)
    return out


def _same_folder(a: Path, b: Path) -> None:
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


SHARD1 = "shard-00001.safetensors"
BAD_HASH = "does not match its sha256 in manifest.json"


@pytest.mark.parametrize("damage, why", [
    (lambda out: _flip_byte(out / SHARD1), BAD_HASH),  # a tensor byte
    (lambda out: _flip_byte(out / SHARD1, 20), BAD_HASH),  # a header byte
    (lambda out: _truncate(out / SHARD1), BAD_HASH),
    (lambda out: _edit_sha(out, SHARD1), BAD_HASH),
    (lambda out: _drop_entry(out, SHARD1), "not listed in the manifest"),
], ids=["tensor-byte", "header-byte", "truncated", "manifest-sha", "unlisted"])
def test_a_damaged_shard_is_recomputed_on_resume_and_refused_on_read(
        tiny_sudoku, straight_labels, tmp_path, damage, why):
    model, _ = tiny_sudoku
    out = tmp_path / "labels"
    shutil.copytree(straight_labels, out)
    damage(out)
    if "listed" not in why:
        with pytest.raises(UnmaskError, match="shard-00001.safetensors does not match") as e:
            read_labels(out)
        assert "\n" not in str(e.value)
        with pytest.raises(UnmaskError, match="sha256"):  # what training reads
            LabelSet.from_dir(out)
    lines = []
    write_labels(model, out, contexts=5, shard_size=2, log=lines.append)
    assert lines[0] == "shard 1/3: done already" and lines[2] == "shard 3/3: done already"
    assert lines[1] == f"shard 2/3: shard-00001.safetensors {why}; recomputing it"
    assert lines[3].startswith("shard 2/3: 2 contexts")  # recomputed, nothing else
    _same_folder(out, straight_labels)  # the manifest holds the true hash again
    read_labels(out)


def test_a_shard_listed_but_missing_is_recomputed(tiny_sudoku, straight_labels, tmp_path):
    model, _ = tiny_sudoku
    out = tmp_path / "labels"
    shutil.copytree(straight_labels, out)
    (out / "shard-00002.safetensors").unlink()
    with pytest.raises(UnmaskError, match="shard-00002.safetensors is missing"):
        read_labels(out)
    lines = []
    write_labels(model, out, contexts=5, shard_size=2, log=lines.append)
    assert "listed in the manifest but missing; recomputing it" in lines[2]
    _same_folder(out, straight_labels)


@pytest.mark.parametrize("edit, message", [
    (lambda m: "{not json", "not valid JSON"),
    (lambda m: json.dumps([1, 2]), "not a label manifest"),
    (lambda m: json.dumps({**m, "shards": [{**m["shards"][0], "start": "0"}]}),
     "damaged shard entry #0"),
    (lambda m: json.dumps({**m, "shards": [{**m["shards"][0], "file": "../evil"}]}),
     "damaged shard entry #0"),
    (lambda m: json.dumps({**m, "identity": {**m["identity"], "seed": 9}}), "seed"),
])
def test_a_damaged_manifest_is_refused(tiny_sudoku, straight_labels, tmp_path, edit, message):
    model, _ = tiny_sudoku
    out = tmp_path / "labels"
    shutil.copytree(straight_labels, out)
    text = edit(json.loads((out / "manifest.json").read_text()))
    (out / "manifest.json").write_text(text)
    for call in (lambda: write_labels(model, out, contexts=5, shard_size=2),
                 lambda: read_labels(out)):
        with pytest.raises(UnmaskError, match=message) as e:
            call()
        assert "\n" not in str(e.value)
    assert (out / "manifest.json").read_text() == text  # refused, not rewritten


def test_read_checks_the_shard_against_the_manifest_identity(tiny_sudoku, straight_labels,
                                                             tmp_path):
    """A shard of another folder copied in with its true hash is refused on read."""
    model, _ = tiny_sudoku
    other = tmp_path / "other"
    write_labels(model, other, contexts=2, shard_size=2, seed=3)
    out = tmp_path / "labels"
    shutil.copytree(straight_labels, out)
    shutil.copy(other / "shard-00000.safetensors", out / "shard-00000.safetensors")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["shards"][0]["sha256"] = json.loads(
        (other / "manifest.json").read_text())["shards"][0]["sha256"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(UnmaskError, match="disagrees with manifest.json: seed=3"):
        read_labels(out)
    with pytest.raises(UnmaskError, match="seed=3"):
        write_labels(model, out, contexts=5, shard_size=2)


def test_cli_unwritable_or_odd_output_is_one_line(tiny_sudoku, tmp_path, capsys, monkeypatch):
    _, model_dir = tiny_sudoku
    base = ["mi", "label", "--model", str(model_dir), "--contexts", "2", "--shard-size", "2"]
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    if os.access(locked, os.W_OK):  # root ignores the mode: make the write fail as it would
        real = tempfile.mkstemp

        def refuse(*args, dir=None, **kwargs):
            if dir is not None and Path(dir).is_relative_to(locked):
                raise PermissionError(13, "Permission denied")
            return real(*args, dir=dir, **kwargs)

        monkeypatch.setattr(tempfile, "mkstemp", refuse)
    for out in (locked, locked / "sub"):
        assert main(base + ["--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: out: ") and str(out) in err and "\n" not in err
    assert not any(p.name.startswith("shard-") for p in locked.rglob("*"))
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert main(base + ["--out", str(a_file)]) == 2
    assert "is not a folder" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--workers", "0", "--engine", "ray"], "--workers"), (["--workers", "2"], "--workers"),
    (["--threads", "0"], "--threads"), (["--engine", "ray", "--device", "cuda:1"], "--device"),
])
def test_cli_engine_options_are_checked(tiny_sudoku, tmp_path, capsys, args, message):
    _, model_dir = tiny_sudoku
    base = ["mi", "label", "--model", str(model_dir), "--contexts", "2", "--out",
            str(tmp_path / "o")]
    assert main(base + args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert not (tmp_path / "o").exists()


def _reshape_listed(out: Path, file: str) -> None:
    """Rewrite ``file`` as a self-consistent shard (its metadata, a true content digest, the
    manifest's sha256 updated) whose tensors have other shapes: only the shape check can
    catch it."""
    from safetensors import safe_open

    from unmask.parallel.shard_store import shard_bytes

    with safe_open(str(out / file), framework="pt") as f:
        meta = {k: v for k, v in (f.metadata() or {}).items() if k != "content_sha256"}
        tensors = {k: f.get_tensor(k)[:, :80] if f.get_tensor(k).dim() > 1 else f.get_tensor(k)
                   for k in f.keys()}  # noqa: SIM118 (not a dict)
    data = shard_bytes(tensors, meta)
    (out / file).write_bytes(data)
    manifest = json.loads((out / "manifest.json").read_text())
    entry = next(s for s in manifest["shards"] if s["file"] == file)
    entry["sha256"] = hashlib.sha256(data).hexdigest()
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


def test_a_shard_of_other_shapes_is_recomputed_and_refused_on_read(tiny_sudoku, straight_labels,
                                                                   tmp_path):
    model, _ = tiny_sudoku
    out = tmp_path / "labels"
    shutil.copytree(straight_labels, out)
    _reshape_listed(out, SHARD1)
    with pytest.raises(UnmaskError, match="shard-00001.safetensors holds .* of shape"):
        read_labels(out)
    lines = []
    write_labels(model, out, contexts=5, shard_size=2, log=lines.append)
    assert lines[1].startswith("shard 2/3: shard-00001.safetensors holds ")
    assert lines[1].endswith("; recomputing it")
    _same_folder(out, straight_labels)
