"""The caches unmask derives are never trusted blindly (docs/threat_model.md lists them).
The kept Sudoku puzzle pool and a corrector run's decoded states are checked against their
sha256 (a changed byte regenerates them). The converted AntiBERTy folder is
checked against its manifest on every load: any change (a byte of a tensor, a config or
tokenizer edit, a file removed, a file or folder added, a link) is found, and the folder is
converted again from the pinned wheel, or refused in one line without the wheel; it never runs
remote code. The tamperings are generated."""

import json
import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unmask.cli import main
from unmask.errors import UnmaskError
from unmask.io import file_sha256
from unmask.models import antiberty

FILES = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
         antiberty.MANIFEST]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """(cache root, the converted folder, sha256 of each of its files) converted once."""
    pytest.importorskip("transformers")
    pytest.importorskip("antiberty")
    root = tmp_path_factory.mktemp("antiberty_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(antiberty.CACHE_ENV, str(root))
        folder = antiberty.antiberty_folder()
    return root, folder, {p.name: file_sha256(p) for p in folder.iterdir()}


def _copy(folder, dest):
    """A copy of ``folder`` whose files are hard links (tampering replaces a file whole)."""
    shutil.copytree(folder, dest, copy_function=os.link)
    return dest


def _replace(path, data: bytes):
    path.unlink()
    path.write_bytes(data)


def _edit_json(path, edit):
    meta = json.loads(path.read_text())
    edit(meta)
    _replace(path, json.dumps(meta).encode())


def _swap_two_ids(meta):
    vocab = meta["model"]["vocab"]
    a, b = "A", "C"
    vocab[a], vocab[b] = vocab[b], vocab[a]


TAMPERINGS = {
    "flip a byte": None,  # generated offset, below
    "truncate": None,
    "delete": lambda p: p.unlink(),
    "two layers": lambda p: _edit_json(p.parent / "config.json",
                                       lambda m: m.update(num_hidden_layers=2)),
    "auto_map": lambda p: _edit_json(p.parent / "config.json", lambda m: m.update(
        auto_map={"AutoModelForMaskedLM": "modeling_evil.Evil"})),
    "plant code": lambda p: (p.parent / "modeling_evil.py").write_text(
        "open('ran', 'w').write('ran')\n"),
    "swap token ids": lambda p: _edit_json(p.parent / "tokenizer.json", _swap_two_ids),
    "folder in place of a file": lambda p: (p.unlink(), p.mkdir()),
    "link in place of a file": lambda p: (p.unlink(), p.symlink_to(os.devnull)),
    "manifest not JSON": lambda p: _replace(p.parent / antiberty.MANIFEST, b"{"),
}


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(how=st.sampled_from(sorted(TAMPERINGS)), name=st.sampled_from(FILES),
       where=st.floats(0, 1), byte=st.integers(1, 255))
def test_any_change_to_the_converted_folder_is_found(converted, tmp_path_factory, how, name,
                                                     where, byte):
    _, folder, _ = converted
    copy = _copy(folder, tmp_path_factory.mktemp("tampered") / folder.name)
    assert antiberty.folder_problem(copy) is None
    path = copy / name
    if how in ("flip a byte", "truncate"):
        data = bytearray(path.read_bytes())
        at = min(int(where * len(data)), len(data) - 1)
        if how == "flip a byte":
            data[at] ^= byte
        else:
            data = data[:at]
        _replace(path, bytes(data))
    else:
        TAMPERINGS[how](path)
    problem = antiberty.folder_problem(copy)
    if problem is None:  # only a change of the manifest's layout (whitespace) is no change
        assert name == antiberty.MANIFEST and how in ("flip a byte", "truncate")
        assert json.loads(path.read_text()) == json.loads((folder / name).read_text())
    else:
        assert "\n" not in problem


def test_a_changed_folder_is_converted_again_from_the_wheel(converted, monkeypatch, capsys):
    root, folder, digests = converted
    monkeypatch.setenv(antiberty.CACHE_ENV, str(root))
    # one changed tensor byte, a config declaring 2 layers, code planted with an auto_map
    data = bytearray((folder / "model.safetensors").read_bytes())
    data[len(data) // 2] ^= 1
    _replace(folder / "model.safetensors", bytes(data))
    TAMPERINGS["auto_map"](folder / "config.json")
    TAMPERINGS["plant code"](folder / "config.json")
    assert antiberty.antiberty_folder() == folder
    assert {p.name: file_sha256(p) for p in folder.iterdir()} == digests
    assert [p.name for p in root.iterdir()] == [folder.name]  # nothing set aside is left


def test_a_missing_config_is_converted_again(converted, monkeypatch, capsys):
    """Once looped on "Directory not empty"."""
    root, folder, digests = converted
    monkeypatch.setenv(antiberty.CACHE_ENV, str(root))
    (folder / "config.json").unlink()
    assert main(["infill", "--model", "antiberty", "--template", "EVQLV<mask:2>GG",
                 "--threads", "1"]) == 0
    assert {p.name: file_sha256(p) for p in folder.iterdir()} == digests


def test_without_the_wheel_a_changed_folder_is_refused_in_one_line(converted, monkeypatch,
                                                                   capsys, tmp_path):
    _, folder, _ = converted
    root = tmp_path / "cache"
    copy = _copy(folder, root / folder.name)
    TAMPERINGS["two layers"](copy / "config.json")
    monkeypatch.setenv(antiberty.CACHE_ENV, str(root))
    monkeypatch.setattr(antiberty, "wheel_installed", lambda: False)
    with pytest.raises(UnmaskError, match="holds a changed config.json"):
        antiberty.antiberty_folder()
    code = main(["infill", "--model", "antiberty", "--template", "EVQLV<mask:2>GG",
                 "--trust-remote-code"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "pip install 'unmask[antibody]'" in err
    assert "--trust-remote-code" not in err.replace("antibody]'", "")


def test_the_converted_model_never_runs_remote_code(converted, monkeypatch):
    """Even a folder whose manifest was rewritten to match planted code loads without it."""
    from unmask.models.auto import load_model

    _, folder, _ = converted
    root = folder.parent.parent / "planted"
    copy = _copy(folder, root / folder.name)
    TAMPERINGS["auto_map"](copy / "config.json")
    TAMPERINGS["plant code"](copy / "config.json")
    (copy / antiberty.MANIFEST).unlink()
    antiberty.write_manifest(copy)
    monkeypatch.setenv(antiberty.CACHE_ENV, str(root))
    monkeypatch.chdir(root)
    with pytest.raises(UnmaskError, match="no folder unmask converts has") as e:
        load_model("antiberty", trust_remote_code=True)
    assert "--trust-remote-code" not in str(e.value)
    assert not (root / "ran").exists()


def _flip(path, where: float, byte: int) -> None:
    data = bytearray(path.read_bytes())
    at = min(int(where * len(data)), len(data) - 1)
    data[at] ^= byte
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """(the kept pool file of 3 puzzles, the pool)."""
    from unmask.sudoku.train import SudokuPool

    cache = tmp_path_factory.mktemp("pool")
    first = SudokuPool.generate(3, seed=5, cache_dir=cache)
    (path,) = cache.iterdir()
    return path, first


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0, 1), byte=st.integers(1, 255))
def test_a_changed_puzzle_pool_is_never_believed(pool, tmp_path_factory, where, byte,
                                                 monkeypatch):
    import numpy as np

    from unmask.sudoku import train

    kept, first = pool
    cache = tmp_path_factory.mktemp("pool")
    shutil.copyfile(kept, cache / kept.name)
    _flip(cache / kept.name, where, byte)
    generated = []
    with monkeypatch.context() as mp:
        mp.setattr(train, "training_grids",
                   lambda n, seed: generated.append(n) or first.solutions)
        mp.setattr(train, "make_puzzles", lambda solutions, seed: first.puzzles)
        again = train.SudokuPool.generate(3, seed=5, cache_dir=cache)
    assert np.array_equal(again.puzzles, first.puzzles)
    assert np.array_equal(again.solutions, first.solutions)
    assert generated == [3] or train._read_pool(cache / kept.name, 3) is not None


def _states():
    import torch

    from unmask.corrector import DecodedStates

    g = torch.Generator().manual_seed(0)
    return DecodedStates(tokens=torch.randint(0, 10, (4, 81), generator=g),
                         wrong=torch.rand(4, 81, generator=g) < 0.1,
                         decoded=torch.rand(4, 81, generator=g) < 0.5,
                         groups=torch.arange(4))


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0, 1), byte=st.integers(1, 255))
def test_changed_decoded_states_are_never_believed(tmp_path_factory, where, byte):
    import torch

    from unmask.corrector import load_decoded_states, save_decoded_states

    path = tmp_path_factory.mktemp("states") / "states.pt"
    key = {"model": "abc", "puzzles": 4}
    save_decoded_states(path, key, _states())
    got_key, got = load_decoded_states(path)
    assert got_key == key and torch.equal(got.tokens, _states().tokens)
    _flip(path, where, byte)
    try:
        got_key, got = load_decoded_states(path)
    except UnmaskError as e:
        assert "\n" not in str(e) and str(e).startswith("states: ")
        return
    # a byte torch's zip format ignores (padding, a comment): the content is unchanged
    assert got_key == key and all(torch.equal(a, b) for a, b in
                                  zip(vars(got).values(), vars(_states()).values(), strict=True))


def test_mi_fit_recomputes_a_changed_label_shard_of_a_former_run(run, tiny_model, tmp_path):
    """Once refused forever, with advice to run another command."""
    out = tmp_path / "fit"
    argv = ["mi", "fit", "--model", tiny_model, "--out", out, "--contexts", 6, "--shard-size",
            2, "--train-s", 1, "--threads", 1]
    assert run(*argv).code == 0
    last = out / "labels" / "shard-00002.safetensors"
    before = last.read_bytes()
    _flip(last, 0.5, 1)
    r = run(*argv)
    assert r.code == 0, r.err
    assert last.read_bytes() == before
