"""Every command that writes a folder claims it (:func:`unmask.commands.flags.paths.claim_folder`):
an ``--out`` (or bench ``--cache``) that holds anything but the command's own run is refused
in one line before any work, unless ``--overwrite``; a folder holding a model (a config,
weights) that is not the command's own output is never written into, ``--overwrite`` or not.
The folder contents are generated; whatever is refused is left byte for byte as it was."""

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unmask.commands.flags.paths import (
    RUN_MARKER,
    TRAINING_RUN_FILES,
    claim_problem,
    foreign_models,
    holds_nothing,
    mark_folder,
    model_files,
    run_marker,
)

MODEL_NAMES = ["config.json", "model.safetensors", "pytorch_model.bin", "weights.pt",
               "model.gguf", "best/config.json", "m/model.safetensors", "ckpt.pth"]
OTHER_NAMES = ["notes.txt", "README.md", ".hidden", "data/a.csv", "eval.json", "x",
               "labels/readme", "é ü.txt"]
MARKERS = [None, "sudoku train", "mi label", "bench cache", "not json"]
OWN_CONFIG = json.dumps({"model_type": "mi-estimator", "config": {}})

# command -> (argv before the folder flag, the flag, has --overwrite, its own files)
COMMANDS = {
    "mi fit": (["mi", "fit", "--model", "sudoku"], "--out", True, ("labels/manifest.json",)),
    "mi label": (["mi", "label", "--contexts", "1"], "--out", False, ("manifest.json",)),
    "mi train": (["mi", "train", "--labels", "x"], "--out", True, TRAINING_RUN_FILES),
    "sudoku train": (["sudoku", "train"], "--out", True, TRAINING_RUN_FILES),
    "protein train": (["protein", "train"], "--out", True, TRAINING_RUN_FILES),
    "arithmetic train": (["arithmetic", "train"], "--out", True, TRAINING_RUN_FILES),
    "reasoning train": (["reasoning", "train"], "--out", True, TRAINING_RUN_FILES),
    "image train": (["image", "train"], "--out", True, TRAINING_RUN_FILES),
    "image train-classifier": (["image", "train-classifier"], "--out", True,
                               TRAINING_RUN_FILES),
    "corrector train": (["corrector", "train"], "--out", True, TRAINING_RUN_FILES),
    "bench cache": (["sudoku", "bench", "--limit", "1"], "--cache", False,
                    ("?" * 64 + ".safetensors",)),
}


@st.composite
def foreign_folders(draw, with_model: bool | None = None):
    """(relative file names, the marker's command or None): a folder that is nobody's run
    of the commands above unless its marker says so."""
    models = draw(st.lists(st.sampled_from(MODEL_NAMES), unique=True,
                           min_size=1 if with_model else 0, max_size=0 if with_model is False
                           else 3))
    others = draw(st.lists(st.sampled_from(OTHER_NAMES), unique=True,
                           min_size=0 if models else 1, max_size=3))
    marker = draw(st.sampled_from(MARKERS))
    return models + others, marker


def build(root: Path, names, marker) -> dict:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"content of {name}".encode())
    if marker == "not json":
        (root / RUN_MARKER).write_text("{not json")
    elif marker is not None:
        (root / RUN_MARKER).write_text(f'{{"command": "{marker}"}}')
    return snapshot(root)


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


FAST = settings(max_examples=12, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("name", sorted(COMMANDS))
@FAST
@given(folder=foreign_folders(), overwrite=st.booleans())
def test_a_folder_that_is_not_the_commands_own_run_is_refused_and_untouched(
        run, name, folder, overwrite):
    argv, flag, has_overwrite, _ = COMMANDS[name]
    names, marker = folder
    if marker == name:
        marker = None
    overwrite = overwrite and has_overwrite
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        before = build(out, names, marker)
        models = model_files(out)
        extra = ["--overwrite"] if overwrite else []
        if overwrite and not models:
            return  # allowed: writes its files beside the others (checked below, in-process)
        line = run(*argv, flag, out, *extra).refused(flag)
        if models:
            assert "never written into" in line and models[0] in line
        else:
            assert ("--overwrite" in line) == has_overwrite
        assert snapshot(out) == before


@FAST
@given(folder=foreign_folders(), overwrite=st.booleans(), own=st.booleans(),
       command=st.sampled_from(sorted(COMMANDS)))
def test_the_claim_rule(folder, overwrite, own, command):
    """New, empty, own (marker, or own files and no marker) -> allowed; otherwise allowed
    only with overwrite and without a model anywhere one level down."""
    names, marker = folder
    _, _, _, own_files = COMMANDS[command]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        assert claim_problem(out, command, overwrite=overwrite) is None  # new
        out.mkdir()
        assert claim_problem(out, command, overwrite=overwrite) is None  # empty
        build(out, names, marker if not own else command)
        problem = claim_problem(out, command, overwrite=overwrite, own_files=own_files)
        mine = own or marker == command
        if mine and foreign_models(out):  # a config.json unmask did not write: a model
            assert "never written into" in problem
        elif mine:
            assert problem is None
        elif model_files(out):
            assert "never written into" in problem
        else:
            assert (problem is None) == overwrite
        assert not (out / "new").exists()  # nothing created


def test_marking_records_the_writer_once(tmp_path):
    out = mark_folder(tmp_path / "a" / "b", "mi fit")
    assert run_marker(out) == "mi fit" and sorted(p.name for p in out.iterdir()) == [RUN_MARKER]
    assert claim_problem(out, "mi fit") is None
    (out / "config.json").write_text(OWN_CONFIG)  # its own output: still its own run
    assert claim_problem(out, "mi fit", overwrite=False) is None
    assert "never written into" in claim_problem(out, "sudoku train", overwrite=True)


def test_a_legacy_training_run_is_still_the_trainers_own(run, tmp_path):
    """A run folder from before the marker (checkpoint.pt, best/) is a run to resume."""
    out = tmp_path / "run"
    (out / "best").mkdir(parents=True)
    (out / "checkpoint.pt").write_bytes(b"x")
    (out / "best" / "config.json").write_text(json.dumps({"model_type": "mdm-transformer"}))
    assert claim_problem(out, "sudoku train", own_files=TRAINING_RUN_FILES) is None
    run("sudoku", "train", "--out", out).refused("holds a training run")
    line = run("mi", "fit", "--model", "sudoku", "--out", out, "--overwrite").refused("--out")
    assert "never written into" in line


def test_the_library_fit_claims_its_folder_too(tmp_path):
    """``unmask.mi.fitting.fit`` refuses a model folder before labelling anything."""
    from unmask.errors import UnmaskError
    from unmask.mi.fitting import fit

    out = tmp_path / "model"
    out.mkdir()
    (out / "config.json").write_text("{}")
    with pytest.raises(UnmaskError, match="never written into"):
        fit(None, out, "sudoku", overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == ["config.json"]


def test_a_training_run_stopped_before_its_first_checkpoint_is_still_its_own(run, tmp_path):
    """A trainer marks its folder when it claims it: files it writes before its first
    checkpoint (the Sudoku pool's cache) do not make its own folder foreign."""
    out = tmp_path / "run"
    run("sudoku", "train", "--out", out, "--decay-by-time").refused("--decay-by-time")
    assert run_marker(out) == "sudoku train"
    (out / "cache").mkdir()
    (out / "cache" / "sudoku-pool-10-1000.npz").write_bytes(b"x")
    run("sudoku", "train", "--out", out, "--decay-by-time").refused("--decay-by-time")
    run("protein", "train", "--out", out, "--decay-by-time").refused("--out")


def test_a_folder_holding_only_another_commands_marker_becomes_the_trainers(run, tmp_path):
    """Nothing but a marker is nothing to keep: the claim allows it (:func:`holds_nothing`)
    and the trainer marks it as its own, as it does a new or empty folder."""
    out = mark_folder(tmp_path / "run", "mi label")
    assert holds_nothing(out) and claim_problem(out, "sudoku train") is None
    run("sudoku", "train", "--out", out, "--decay-by-time").refused("--decay-by-time")
    assert run_marker(out) == "sudoku train"
    assert sorted(p.name for p in out.iterdir()) == [RUN_MARKER]
    (out / "cache").mkdir()
    assert not holds_nothing(out) and holds_nothing(tmp_path / "new")


@pytest.fixture
def bert_copy(tmp_path):
    """A copy of a Hugging Face model folder (its config.json, weights, tokenizer)."""
    out = tmp_path / "M"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"model_type": "bert", "vocab_size": 30}))
    (out / "model.safetensors").write_bytes(b"weights")
    (out / "vocab.txt").write_text("[PAD]\n")
    return out


@pytest.mark.parametrize("command,own", [("mi fit", "labels/manifest.json"),
                                         ("mi label", "manifest.json")])
def test_a_forged_marker_does_not_open_a_model_folder(run, bert_copy, command, own):
    """`cp -r bert M; echo '{"command": "mi fit"}' > M/.unmask-run.json`: still a model."""
    (bert_copy / RUN_MARKER).write_text(json.dumps({"command": command}))
    (bert_copy / own).parent.mkdir(exist_ok=True)
    (bert_copy / own).write_text("{}")  # and its own files forged too
    before = snapshot(bert_copy)
    argv, flag, has_overwrite, _ = COMMANDS[command]
    line = run(*argv, flag, bert_copy, *(["--overwrite"] if has_overwrite else [])
               ).refused(flag)
    assert "holds a model (config.json)" in line and "never written into" in line
    assert snapshot(bert_copy) == before
    (bert_copy / RUN_MARKER).unlink()  # nor do its own files alone
    assert "never written into" in claim_problem(bert_copy, command, own_files=(own,))


def test_every_config_unmask_writes_is_its_own(tmp_path):
    """The configs unmask's own writers leave are not foreign (OWN_MODEL_TYPES is whole)."""
    from unmask.corrector import Corrector
    from unmask.image.classifier import MODEL_TYPE as CLASSIFIER
    from unmask.mi.estimator import MIEstimator
    from unmask.models.transformer import MDMTransformer, TransformerConfig

    MDMTransformer(TransformerConfig(vocab_size=8, mask_id=7, max_length=4, d_model=8,
                                     n_heads=2, n_layers=1, d_ff=8)).save_pretrained(tmp_path / "m")
    assert foreign_models(tmp_path / "m") == []
    for kind in (MIEstimator.MODEL_TYPE, Corrector.MODEL_TYPE, CLASSIFIER):
        shutil.rmtree(tmp_path / "m")
        (tmp_path / "m").mkdir()
        (tmp_path / "m" / "config.json").write_text(json.dumps({"model_type": kind}))
        assert foreign_models(tmp_path / "m") == []
