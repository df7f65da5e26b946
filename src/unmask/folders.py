"""The one guard for every folder unmask writes: a command (or a library call such as
:func:`unmask.mi.fitting.fit`) claims it before any work.

The folder must be new, empty, or the writer's own run (a marker file :data:`RUN_MARKER` it
wrote there, or the files its earlier versions left); anything else is refused in one line
unless the writer is told to overwrite, and a folder that holds a model (``config.json``,
weights) that is not the writer's own output is never written into, overwrite or not. A
marker is a claim, not a proof: a folder whose config.json unmask did not write
(:func:`foreign_models`) is a model from elsewhere, whatever marker lies beside it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from unmask.errors import UnmaskError
from unmask.io import atomic_write_text


def folder_problem(path: str | Path) -> str | None:
    """What keeps ``path`` from being a folder a command creates or fills (None: nothing): it
    must be a folder or not exist yet, and the nearest existing folder above it writable."""
    if str(path) == "":
        return "empty path"
    path = Path(path)
    if path.exists() and not path.is_dir():
        return f"{path} exists and is not a folder"
    above = next(p for p in (path, *path.parents) if p.exists())
    if not above.is_dir():
        return f"{above} is a file, not a folder"
    if not os.access(above, os.W_OK | os.X_OK):
        return f"folder {above} is not writable"
    return None


#: the file a command writes into a folder it claims: {"command": "mi fit"}
RUN_MARKER = ".unmask-run.json"
#: names that make a folder a model folder: a config, weights in any format
MODEL_FILE_PATTERNS = ("config.json", "*.safetensors", "*.bin", "*.pt", "*.pth", "*.ckpt",
                       "*.gguf", "*.h5", "*.msgpack", "*.onnx", "*.npz", "*.pkl")
#: what a training run holds (:func:`unmask.training.loop.fit`)
TRAINING_RUN_FILES = ("checkpoint.pt", "history.jsonl")


def run_marker(path: str | Path) -> str | None:
    """The command that claimed the folder ``path`` (its :data:`RUN_MARKER`), or None."""
    try:
        data = json.loads((Path(path) / RUN_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    command = data.get("command") if isinstance(data, dict) else None
    return command if isinstance(command, str) else None


def model_files(path: str | Path) -> list[str]:
    """The files in ``path`` and its sub-folders (one level down) that make it a model
    folder (:data:`MODEL_FILE_PATTERNS`), as paths relative to it, sorted."""
    path = Path(path)
    found: set[str] = set()
    for folder in (path, *(p for p in _entries(path) if p.is_dir() and not p.is_symlink())):
        for entry in _entries(folder):
            if any(entry.match(pattern) for pattern in MODEL_FILE_PATTERNS):
                found.add(str(entry.relative_to(path)))
    return sorted(found)


#: the ``model_type`` of every config.json unmask writes (its models, estimators, correctors,
#: classifiers): a config.json that names none of them is a model from elsewhere
OWN_MODEL_TYPES = ("mdm-transformer", "mi-estimator", "corrector", "digit-classifier")


def foreign_models(path: str | Path) -> list[str]:
    """The config.json files in ``path`` and one level down (:func:`model_files`) that unmask
    did not write (not a JSON object whose ``model_type`` is one of
    :data:`OWN_MODEL_TYPES`): a model from elsewhere, whatever run marker lies beside it."""
    out = []
    for name in model_files(path):
        if Path(name).name != "config.json":
            continue
        try:
            meta = json.loads((Path(path) / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = None
        if not (isinstance(meta, dict) and meta.get("model_type") in OWN_MODEL_TYPES):
            out.append(name)
    return out


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:
        return []


def holds_nothing(path: str | Path) -> bool:
    """True when the folder ``path`` is new or holds nothing but a :data:`RUN_MARKER` (any
    command may claim it)."""
    return not any(p.name != RUN_MARKER for p in _entries(Path(path)))


def claim_problem(path: str | Path, command: str, *, overwrite: bool | None = None,
                  own_files: tuple[str, ...] = ()) -> str | None:
    """Why ``command`` may not write into the folder ``path`` (None: it may): see
    :func:`claim_folder`."""
    problem = folder_problem(path)
    if problem or not Path(path).is_dir():
        return problem
    path = Path(path)
    marker = run_marker(path)
    if holds_nothing(path):
        return None  # new or empty
    own = marker == command or (
        marker is None and any(any(path.glob(pattern)) for pattern in own_files))
    foreign = foreign_models(path)
    if own and not foreign:
        return None  # this command's own run (a marker does not make a model from elsewhere
        # one: its config.json says what it is)
    whose = f"a run of `{marker}`" if marker else "files"
    models = model_files(path)
    if models:
        shown = foreign[0] if own else models[0]
        return (f"{path} holds a model ({shown}), not a run of `{command}`; a model "
                "folder is never written into (not even with --overwrite): give a new or "
                "empty folder")
    if overwrite:
        return None
    held = next(p.name for p in _entries(path) if p.name != RUN_MARKER)
    advice = ", or add --overwrite" if overwrite is not None else ""
    return (f"{path} holds {whose} that `{command}` did not write ({held}); give a new or "
            f"empty folder{advice}")


def claim_folder(path: str | Path, what: str, command: str, *, overwrite: bool | None = None,
                 own_files: tuple[str, ...] = ()) -> Path:
    """Check, before any work, that ``command`` may write into the folder ``path``; one line
    ``"{what}: ..."`` (:class:`UnmaskError`) otherwise. Nothing is created here (the command
    calls :func:`mark_folder` when it starts writing).

    It may when the folder is new or empty, or is this command's own run: its
    :data:`RUN_MARKER` names ``command``, or (no marker) it holds a file matching one of
    ``own_files`` (glob patterns: what the command wrote before it left a marker), and it
    holds no config.json unmask did not write (:func:`foreign_models`).
    Otherwise it is refused, unless ``overwrite`` is True (None: the command has no
    ``--overwrite``) and the folder holds no model (:func:`model_files`): a model folder is
    never written into.
    """
    problem = claim_problem(path, command, overwrite=overwrite, own_files=own_files)
    if problem:
        raise UnmaskError(f"{what}: {problem}")
    return Path(path)


def mark_folder(path: str | Path, command: str) -> Path:
    """Create the folder ``path`` if needed and record ``command`` as its writer
    (:data:`RUN_MARKER`, written atomically), after :func:`claim_folder`."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if run_marker(path) != command:
        atomic_write_text(path / RUN_MARKER, json.dumps({"command": command}) + "\n")
    return path
