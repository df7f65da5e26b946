"""One store for work kept in shards (MI label sets, bench sweep caches): safetensors files that
check themselves.

A shard is one safetensors file (tensors only, read without executing anything) whose header
metadata holds, beside the writer's own keys, ``content_sha256``: the sha256 of the metadata
and of every tensor's name, dtype, shape and bytes. Files are written atomically (a temporary
file renamed into place), so a killed run leaves whole files or none. On read a shard must
hash to its ``content_sha256``, hold exactly the tensors the reader expects with their dtypes
and shapes, and carry the metadata the reader expects; otherwise :class:`ShardError` says why,
and the caller recomputes the shard (never believes it).

Shapes are checked by named dimensions: ``{"tokens": (torch.int64, ("S", "N"))}`` with
``dims={"S": 4}`` asks for a (4, N) int64 tensor, N the same wherever it appears.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from unmask.errors import UnmaskError
from unmask.io import atomic_path, parse_json

DIGEST_KEY = "content_sha256"
#: tensor name -> (dtype, or None for any; shape as named dimensions or ints)
Schema = dict[str, tuple[torch.dtype | None, tuple[str | int, ...]]]


class ShardError(Exception):
    """Why a shard file cannot be believed (one phrase, e.g. "does not match its sha256")."""


def content_digest(tensors: dict[str, torch.Tensor], meta: dict[str, str]) -> str:
    """sha256 of ``meta`` (without its digest) and each tensor's name, dtype, shape and bytes."""
    h = hashlib.sha256(json.dumps({k: v for k, v in meta.items() if k != DIGEST_KEY},
                                  sort_keys=True).encode())
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        h.update(f"\0{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def shard_bytes(tensors: dict[str, torch.Tensor], meta: dict[str, str]) -> bytes:
    """The file of a shard: ``tensors`` and ``meta`` (str -> str) with its content digest."""
    from safetensors.torch import save

    tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    data = save(tensors, metadata={**meta, DIGEST_KEY: content_digest(tensors, meta)})
    # safetensors writes the metadata keys in no fixed order: sort them, so that the same
    # shard is the same bytes (a resumed run's files equal an uninterrupted run's)
    n = int.from_bytes(data[:8], "little")
    header = parse_json(data[8:8 + n])
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data[8 + n:]


def parse_shard(data: bytes, schema: Schema | None = None, dims: dict | None = None,
                meta: dict | None = None, *, digest_required: bool = True
                ) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """(tensors, metadata) of the shard file ``data``, checked: its content digest
    (``digest_required=False`` accepts a file without one, for shards whose bytes the caller
    checked itself), the tensors against ``schema`` and ``dims``, the metadata against
    ``meta`` (key -> expected value). :class:`ShardError` on any failure."""
    from safetensors import SafetensorError
    from safetensors.torch import load

    try:
        n = int.from_bytes(data[:8], "little")
        header = parse_json(data[8:8 + n])
        found_meta = header.get("__metadata__") or {}
        tensors = load(data)
    except (SafetensorError, ValueError, UnicodeDecodeError, AttributeError, OverflowError):
        raise ShardError("is not a readable shard") from None
    if DIGEST_KEY in found_meta or digest_required:
        if found_meta.get(DIGEST_KEY) != content_digest(tensors, found_meta):
            raise ShardError("does not match its sha256 (changed or corrupted)")
    if schema is not None:
        check_schema(tensors, schema, dict(dims or {}))
    for key, value in (meta or {}).items():
        if found_meta.get(key) != value:
            raise ShardError(f"holds {key}={found_meta.get(key)!r}, not {value!r}")
    return tensors, found_meta


def check_schema(tensors: dict[str, torch.Tensor], schema: Schema, dims: dict) -> None:
    """ShardError unless ``tensors`` are exactly ``schema``'s (names, dtypes, shapes; named
    dimensions in ``dims``, bound on first use when not given)."""
    if set(tensors) != set(schema):
        odd = sorted(set(tensors) ^ set(schema))[0]
        raise ShardError(f"{'lacks' if odd in schema else 'has an unexpected'} tensor {odd!r}")
    for name, (dtype, shape) in schema.items():
        t = tensors[name]
        if dtype is not None and t.dtype != dtype:
            raise ShardError(f"holds {name} as {t.dtype}, not {dtype}")
        ok = t.dim() == len(shape)
        for size, dim in zip(t.shape, shape, strict=False):
            want = dims.setdefault(dim, size) if isinstance(dim, str) else dim
            ok = ok and size == want
        if not ok:
            raise ShardError(f"holds {name} of shape {tuple(t.shape)}, not {shape} "
                             f"with {dims}")


class ShardStore:
    """A folder of shard files, created if missing (``where`` names it in messages: ``out``,
    ``cache``)."""

    def __init__(self, folder: str | Path, where: str):
        self.folder, self.where = Path(folder), where
        if self.folder.exists() and not self.folder.is_dir():
            raise UnmaskError(f"{where}: {folder} is not a folder")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UnmaskError(f"{where}: cannot create {folder} ({e.strerror})") from None

    def path(self, name: str) -> Path:
        return self.folder / name

    def write(self, name: str, data: bytes) -> str:
        """Write ``data`` as file ``name`` atomically; returns the sha256 of its bytes."""
        path = self.path(name)
        try:
            with atomic_path(path) as tmp:
                tmp.write_bytes(data)
        except OSError as e:
            raise UnmaskError(f"{self.where}: cannot write {path} ({e.strerror})") from None
        return hashlib.sha256(data).hexdigest()

    def read(self, name: str, schema: Schema | None = None, dims: dict | None = None,
             meta: dict | None = None, *, sha256: str | None = None,
             digest_required: bool = True
             ) -> tuple[dict[str, torch.Tensor], dict[str, str]] | None:
        """The checked shard ``name`` (:func:`parse_shard`), None when there is no such file;
        with ``sha256``, its bytes must hash to it too. :class:`ShardError` when it cannot be
        believed."""
        path = self.path(name)
        if not path.is_file():
            return None
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ShardError(f"cannot be read ({e.strerror})") from None
        if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
            raise ShardError("does not match its sha256 in the manifest (changed or corrupted)")
        return parse_shard(data, schema, dims, meta, digest_required=digest_required)
