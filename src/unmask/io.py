"""File helpers: atomic writing (a temporary path in the same folder, then a rename), the
sha256 of a file read in blocks, and strict JSON (undefined numbers as null)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from unmask.errors import UnmaskError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it onto ``path``.

    A crash or exception leaves ``path`` untouched (never half-written).
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # mkstemp creates 0600, and a writer may replace the file with its own (safetensors
        # does): give the final file the usual permissions (0666 less the umask)
        os.chmod(tmp_path, 0o666 & ~_umask())
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def _umask() -> int:
    """The process's umask (read by setting it, then setting it back)."""
    umask = os.umask(0)
    os.umask(umask)
    return umask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


#: the formats an output flag may write, by the extensions that name them
JSON_SUFFIXES = (".json",)
JSONL_SUFFIXES = (".jsonl", ".json")
IMAGE_SUFFIXES = (".png", ".pdf", ".svg")


def output_path(path: str | Path | None, what: str,
                suffixes: tuple[str, ...] | None = None) -> Path | None:
    """``path`` checked as a file the command will write (before any work): its folder
    exists, is a folder and is writable, the path is not a folder, and its extension is one
    of ``suffixes`` (None: any); otherwise :class:`UnmaskError` naming ``what``. None (the
    flag not given) stays None; an empty path is refused."""
    if path is None:
        return None
    if str(path).strip() == "":
        raise UnmaskError(f"{what}: empty path")
    path = Path(path)
    if path.name in ("", ".", ".."):
        raise UnmaskError(f"{what}: {str(path)!r} is not a file name")
    if suffixes is not None and path.suffix.lower() not in suffixes:
        names = ", ".join(suffixes[:-1]) + (" or " if len(suffixes) > 1 else "") + suffixes[-1]
        raise UnmaskError(f"{what}: {path}: the extension must be {names} (the format "
                          "written)")
    folder = path.parent
    for above in (folder, *folder.parents):  # the nearest part of the path that exists
        if above.exists():
            break
    if above.exists() and not above.is_dir():
        raise UnmaskError(f"{what}: {above} is a file, not a folder")
    if above != folder or not folder.is_dir():
        raise UnmaskError(f"{what}: folder {folder} does not exist")
    if path.is_dir():
        raise UnmaskError(f"{what}: {path} is a folder, not a file")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UnmaskError(f"{what}: folder {folder} is not writable")
    return path


def file_sha256(path: str | os.PathLike) -> str:
    """Hex sha256 of the file at ``path``, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def parse_json(text: str | bytes, **options):
    """``json.loads(text, **options)``, with a text nested too deep for the parser (Python's
    recursion limit) raised as :class:`json.JSONDecodeError` like any other malformed text,
    so every reader's one-line refusal covers it."""
    try:
        return json.loads(text, **options)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text if isinstance(text, str)
                                   else "", 0) from None


def json_safe(value):
    """``value`` with every NaN or infinite float (and 0-d tensor/array) as None: JSON has
    no NaN, and a metric without data (a constant column, no pairs) is undefined."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_text(value) -> str:
    """One line of strict JSON (NaN and infinities as null)."""
    return json.dumps(json_safe(value), allow_nan=False)
