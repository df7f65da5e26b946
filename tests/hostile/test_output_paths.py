"""Hostile output paths: a missing folder, a folder that is a file, a path that is a
folder, a read-only folder, a wrong extension, the same file for two outputs. Each is
refused in one line before any work, and nothing is left behind; what is written is
written whole (atomically) and is valid for its format."""

import os

import pytest

from unmask.io import atomic_path, atomic_write_text

from .conftest import files_in, strict_json


@pytest.fixture
def place(tmp_path):
    """A folder with a regular file in it, and an empty sub-folder."""
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    return tmp_path


BAD_FILES = [  # (path relative to `place`, extension, needle)
    ("missing/x.{ext}", "does not exist"),
    ("afile/x.{ext}", "is a file, not a folder"),
    ("afile/deeper/x.{ext}", "is a file, not a folder"),
    ("adir", "extension must be"),
    ("adir.{ext}", None),  # made a folder below
    ("x.txt", "extension must be"),
    ("x.{ext}.tmp", "extension must be"),
    ("", "empty path"),
]


def _probe(rel: str, ext: str, place):
    path = place / rel.format(ext=ext) if rel else ""
    if rel == "adir.{ext}":
        path.mkdir()
        return path, "is a folder, not a file"
    return path, dict(BAD_FILES)[rel]


# command -> (argv before the output flag, the flag, its extension)
OUTPUTS = {
    "sudoku bench --json": (["sudoku", "bench", "--limit", "1"], "--json", "json"),
    "sudoku bench --plot": (["sudoku", "bench", "--limit", "1"], "--plot", "png"),
    "protein bench --json": (["protein", "bench", "--limit", "1"], "--json", "json"),
    "protein bench --plot": (["protein", "bench", "--limit", "1"], "--plot", "svg"),
    "arithmetic bench --json": (["arithmetic", "bench", "--limit", "1"], "--json", "json"),
    "mi map --out": (["mi", "map", "." * 81], "--out", "pdf"),
}


@pytest.mark.parametrize("rel", [r for r, _ in BAD_FILES])
@pytest.mark.parametrize("which", sorted(OUTPUTS))
def test_bad_output_files_are_refused_before_work(run, place, which, rel):
    argv, flag, ext = OUTPUTS[which]
    path, needle = _probe(rel, ext, place)
    before = files_in(place)
    line = run(*argv, flag, path).refused(needle)
    assert flag in line
    assert files_in(place) == before


@pytest.mark.parametrize("argv", [
    ["sudoku", "train", "--out"], ["mi", "label", "--contexts", "1", "--out"],
    ["mi", "train", "--labels", "x", "--out"], ["corrector", "train", "--out"],
    ["protein", "train", "--out"], ["arithmetic", "train", "--out"],
], ids=lambda a: " ".join(a[:2]))
@pytest.mark.parametrize("rel, needle", [("afile", "exists and is not a folder"),
                                         ("afile/run", "is a file, not a folder")])
def test_bad_run_folders_are_refused_before_work(run, place, argv, rel, needle):
    before = files_in(place)
    line = run(*argv, place / rel).refused(needle)
    assert "--out" in line and files_in(place) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders; the "
                    "not-a-folder probes above cover the refusal")
def test_a_read_only_folder_is_refused(run, place):
    ro = place / "ro"
    ro.mkdir(mode=0o555)
    run("sudoku", "bench", "--limit", "1", "--json", ro / "b.json").refused("not writable")


def test_the_same_file_for_two_outputs_is_refused(run, place):
    from unmask.commands.flags.paths import distinct_outputs
    from unmask.errors import UnmaskError

    run("sudoku", "bench", "--limit", "1", "--json", place / "x.json", "--plot",
        place / "x.json").refused("--plot")
    with pytest.raises(UnmaskError, match="--plot: same file as --json"):
        distinct_outputs(json=place / "x.json", plot=place / "sub" / ".." / "x.json")
    distinct_outputs(json=place / "x.json", plot=place / "x.png")  # different: fine


@pytest.mark.parametrize("ext, magic", [("png", b"\x89PNG"), ("pdf", b"%PDF"),
                                        ("svg", b"<?xml")])
def test_bench_plots_in_the_format_the_extension_names(run, tiny_model, place, ext, magic):
    plot = place / f"p.{ext}"
    assert run("sudoku", "bench", "--model", tiny_model, "--limit", "1", "--quiet",
               "--samplers", "topk:k=81", "--plot", plot).code == 0
    assert plot.read_bytes().startswith(magic)
    assert files_in(place) == {"afile", "adir", f"p.{ext}"}  # no temporary file left


def test_mi_map_json_is_strict_json(run, tiny_model, place, nearly_solved):
    from unmask.io import json_text

    assert json_text({"a": float("nan"), "b": [float("inf"), 1.5]}) == \
        '{"a": null, "b": [null, 1.5]}'
    puzzle = nearly_solved[0].replace("1", ".", 2)
    r = run("mi", "map", puzzle, "--model", tiny_model, "--out", place / "m.svg", "--json",
            "--source", "gt")
    assert r.code == 0, r.err
    obj = strict_json(r.out)
    assert set(obj) == {"cell", "out", "scores"}
    assert (place / "m.svg").read_bytes().startswith(b"<?xml")


def test_atomic_writes_leave_nothing_half_written(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old" and files_in(tmp_path) == {"r.json"}
    atomic_write_text(target, "new")
    assert target.read_text() == "new" and files_in(tmp_path) == {"r.json"}


TRAINERS = [["sudoku", "train"], ["mi", "train", "--labels", "x"], ["corrector", "train"],
            ["protein", "train"], ["arithmetic", "train"], ["reasoning", "train"],
            ["image", "train"]]


@pytest.mark.parametrize("argv", TRAINERS, ids=lambda a: " ".join(a[:2]))
@pytest.mark.parametrize("held", ["checkpoint.pt", "history.jsonl"])
def test_a_fresh_run_never_replaces_a_finished_one(run, tmp_path, argv, held):
    """An --out that holds a run needs --resume or --overwrite; nothing is touched."""
    out = tmp_path / "run"
    (out / "best").mkdir(parents=True)
    (out / held).write_bytes(b"a finished run")
    (out / "best" / "config.json").write_text('{"model_type": "mdm-transformer"}')  # its own
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    line = run(*argv, "--out", out).refused("holds a training run")
    assert "--resume" in line and "--overwrite" in line
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    run(*argv, "--out", out, "--resume", "--overwrite").refused("--overwrite")


def test_overwrite_starts_afresh_and_resume_continues(tmp_path):
    """``fit`` with overwrite replaces the run; without either flag the folder is refused."""
    import torch

    from unmask.errors import UnmaskError
    from unmask.training.loop import LoopConfig, fit

    model = torch.nn.Linear(2, 1)

    def go(**kw):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        return fit(lambda i: model(torch.ones(1, 2)).square().sum(), None,
                   LoopConfig(total_steps=2, eval_every=1, lr=0.1, warmup_steps=0),
                   tmp_path, model=model, optimizer=opt, log=lambda s: None, **kw)

    assert go().steps == 2
    with pytest.raises(UnmaskError, match="holds a training run"):
        go()
    assert go(overwrite=True).steps == 2
    assert go(resume=True).steps == 2  # already at total_steps: nothing more to do
