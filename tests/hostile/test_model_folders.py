"""Hostile model folders given to the commands that load a model: missing, empty, not a
folder, truncated or empty weights, a config that is not an object, lacks or adds a key,
has a value of the wrong type or disagrees with the weights, a model of another task.
Each is refused in one line before any output is written."""

import json
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import files_in


def _config_edit(edit):
    def make(folder):
        path = folder / "config.json"
        meta = json.loads(path.read_text())
        path.write_text(json.dumps(edit(meta)))
    return make


def _drop(key):
    def edit(meta):
        del meta["config"][key]
        return meta
    return edit


def _set(key, value):
    def edit(meta):
        meta["config"][key] = value
        return meta
    return edit


def _truncate(fraction):
    def make(folder):
        path = folder / "model.safetensors"
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * fraction)])
    return make


# name -> (how to spoil a copy of the tiny model, marks)
FOLDERS = {
    "missing": (None, ()),
    "empty-dir": ("empty", ()),
    "a-file": ("file", ()),
    "no-weights": (lambda f: (f / "model.safetensors").unlink(), ()),
    "no-config": (lambda f: (f / "config.json").unlink(), ()),
    "weights-empty": (_truncate(0.0), ()),
    "weights-truncated": (_truncate(0.5), ()),
    "weights-garbage": (lambda f: (f / "model.safetensors").write_bytes(b"\x00" * 64),
                        ()),
    "config-not-json": (lambda f: (f / "config.json").write_text("{"), ()),
    "config-list": (_config_edit(lambda meta: [meta]), ()),
    "config-missing-key": (_config_edit(_drop("d_model")), ()),
    "config-extra-key": (_config_edit(_set("no_such_field", 1)), ()),
    "config-wrong-type": (_config_edit(_set("d_model", "128")), ()),
    "config-disagrees-with-weights": (_config_edit(_set("d_model", 32)), ()),
    "config-binary": (lambda f: (f / "config.json").write_bytes(b"\xff\xfe\x00"), ()),
}


@pytest.fixture
def spoiled(request, tiny_model, tmp_path):
    how = FOLDERS[request.param][0]
    folder = tmp_path / "model"
    if how is None:
        return folder
    if how == "empty":
        folder.mkdir()
        return folder
    if how == "file":
        folder.write_text("not a model")
        return folder
    shutil.copytree(tiny_model, folder)
    how(folder)
    return folder


def _params(names):
    return [pytest.param(n, marks=FOLDERS[n][1], id=n) for n in names]


@pytest.mark.parametrize("spoiled", _params(FOLDERS), indirect=True)
def test_solve_refuses_a_spoiled_model_folder(run, spoiled, nearly_solved):
    run("sudoku", "solve", nearly_solved[0], "--model", spoiled).refused()


@pytest.mark.parametrize("spoiled", _params(["missing", "empty-dir", "weights-truncated",
                                             "config-list", "config-wrong-type"]),
                         indirect=True)
def test_bench_refuses_a_spoiled_model_and_writes_nothing(run, spoiled, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    run("sudoku", "bench", "--model", spoiled, "--limit", "1", "--samplers", "confidence",
        "--json", out / "b.json", "--plot", out / "p.png").refused()
    assert files_in(out) == set()


@pytest.mark.parametrize("spoiled", _params(["missing", "weights-truncated", "config-list"]),
                         indirect=True)
def test_mi_map_refuses_a_spoiled_model_and_writes_nothing(run, spoiled, tmp_path,
                                                          nearly_solved):
    run("mi", "map", nearly_solved[0].replace("1", ".", 3), "--model", spoiled, "--out",
        tmp_path / "m.png").refused()
    assert not (tmp_path / "m.png").exists()


@pytest.mark.parametrize("argv", [
    ["sudoku", "solve", "{puzzle}", "--model", "protein"],
    ["sudoku", "solve", "{puzzle}", "--model", "arithmetic"],
    ["sudoku", "bench", "--model", "protein", "--limit", "1", "--samplers", "confidence"],
    ["mi", "map", "{puzzle}", "--model", "protein", "--out", "{tmp}/m.png"],
    ["corrector", "train", "--model", "protein", "--out", "{tmp}/c", "--puzzles", "10"],
    ["arithmetic", "bench", "--model", "sudoku", "--limit", "1"],
], ids=lambda a: " ".join(a[:2]) + " " + a[a.index("--model") + 1])
def test_a_model_of_another_task_is_refused(run, argv, tmp_path, nearly_solved):
    puzzle = nearly_solved[0].replace("1", ".", 3)  # a few blanks: mi map needs pairs
    argv = [a.format(puzzle=puzzle, tmp=tmp_path) for a in argv]
    line = run(*argv).refused()
    assert "model" in line
    assert files_in(tmp_path) == set()


def test_a_folder_named_like_a_shipped_model_does_not_replace_it(run, tmp_path,
                                                                  monkeypatch):
    """A bare shipped name means the shipped asset, whatever the working folder holds."""
    (tmp_path / "sudoku").mkdir()
    monkeypatch.chdir(tmp_path)
    r = run("sudoku", "solve", "." * 80 + "1", "--model", "sudoku", "--json",
            "--sampler", "topk:k=81")
    assert r.code == 0, r.err


def _poison(folder, name_index: int, at: float, value: float) -> str:
    """Set one number of one tensor of ``folder``'s weights to ``value``; the tensor's name."""
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    state = load_file(str(path))
    name = sorted(k for k, v in state.items() if v.is_floating_point())[name_index % len(
        [v for v in state.values() if v.is_floating_point()])]
    flat = state[name].reshape(-1)
    flat[min(int(at * flat.numel()), flat.numel() - 1)] = value
    save_file(state, str(path))
    return name


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name_index=st.integers(0, 50), at=st.floats(0, 1),
       value=st.sampled_from([float("nan"), float("inf"), -float("inf"), 3e38, -3e38]))
def test_weights_that_are_not_numbers_are_refused_naming_the_model(
        run, tiny_model, tmp_path_factory, nearly_solved, name_index, at, value):
    """A NaN, an infinity or a huge value anywhere in the weights: the decode either runs on
    finite logits or is refused in one line naming the model (never a sampler's
    RuntimeError)."""
    folder = shutil.copytree(tiny_model, tmp_path_factory.mktemp("poison") / "m")
    _poison(folder, name_index, at, value)
    r = run("sudoku", "solve", nearly_solved[0], "--model", folder, "--threads", 1)
    if not r.ok_or_refused():
        line = r.refused("not finite numbers")
        assert str(folder) in line


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 3e38])
def test_a_poisoned_final_layer_is_refused(run, tiny_model, tmp_path, nearly_solved, value):
    folder = shutil.copytree(tiny_model, tmp_path / "m")
    from safetensors.torch import load_file, save_file

    state = load_file(str(folder / "model.safetensors"))
    state["ln_f.bias"][0] = value  # reaches every logit of every position
    save_file(state, str(folder / "model.safetensors"))
    line = run("sudoku", "solve", nearly_solved[0], "--model", folder).refused(
        "not finite numbers")
    assert str(folder) in line
