"""The files of an MI label set: its manifest and shards, checked by sha256 on every read.

A label set is a folder::

    manifest.json                 identity (task, model fingerprint, seed, eps, mask ratio,
                                  shard size, precision), versions, finished shards + sha256
    shard-00000.safetensors       tensors of contexts [0, S), metadata in the header
    shard-00001.safetensors       contexts [S, 2S), ...

Shards are :mod:`unmask.parallel.shard_store` files (content sha256 in the header) whose tensors are
:data:`LABEL_SCHEMA`'s. :mod:`unmask.mi.labels` writes them; this module reads and checks them.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import safetensors
import torch

import unmask
from unmask.errors import UnmaskError, require
from unmask.io import parse_json
from unmask.parallel.shard_store import Schema, ShardError, parse_shard
from unmask.validation import is_int

FORMAT = "unmask-mi-labels/1"
#: the tensors of a shard of S contexts of length N
LABEL_SCHEMA: Schema = {
    "tokens": (torch.int64, ("S", "N")), "masked": (torch.bool, ("S", "N")),
    "mi": (torch.float32, ("S", "N", "N")), "directed": (torch.float32, ("S", "N", "N")),
    "entropy": (torch.float32, ("S", "N")), "dropped_mass": (torch.float32, ("S", "N")),
    "sequences": (torch.int64, ("S",))}
MANIFEST = "manifest.json"
META_KEY = "unmask_mi_labels"
SHARD_RE = re.compile(r"^shard-(\d{5,})\.safetensors$")


def versions() -> dict:
    return {"unmask": unmask.__version__, "torch": torch.__version__,
            "safetensors": safetensors.__version__, "numpy": np.__version__}


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.safetensors"


def mismatch(found: dict, expected: dict) -> str | None:
    for key, value in expected.items():
        if found.get(key) != value:
            return f"{key}={found.get(key)!r}, not {value!r}"
    return None


SHA_RE = re.compile(r"^[0-9a-f]{64}$")


def checked_manifest(path: Path, where: str) -> dict:
    """The manifest at ``path``, refused with one line unless it has the structure
    :func:`write_labels` writes (identity dict, shard entries with file/start/count/sha256)."""
    try:
        manifest = parse_json(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UnmaskError(f"{where}: {path} is not valid JSON") from None
    except OSError as e:
        raise UnmaskError(f"{where}: cannot read {path} ({e.strerror})") from None
    ok = (isinstance(manifest, dict) and isinstance(manifest.get("identity"), dict)
          and isinstance(manifest.get("shards"), list))
    require(ok, f"{where}: {path} is not a label manifest (identity and shards expected)")
    for k, entry in enumerate(manifest["shards"]):
        good = (isinstance(entry, dict) and isinstance(entry.get("file"), str)
                and SHARD_RE.match(entry["file"]) is not None
                and all(is_int(entry.get(key)) for key in ("start", "count"))
                and entry["start"] >= 0 and entry["count"] >= 1
                and isinstance(entry.get("sha256"), str)
                and SHA_RE.match(entry["sha256"]) is not None)
        require(good, f"{where}: {path} has a damaged shard entry #{k}; restore the file or "
                      f"use another folder")
    return manifest


def check_label_shard(data: bytes, identity: dict, start: int, count: int
                      ) -> dict[str, torch.Tensor]:
    """The tensors of label shard file ``data`` (its bytes already checked against the
    manifest's sha256): :class:`~unmask.parallel.shard_store.ShardError` unless its content digest
    (when it has one: shards of earlier versions have none), tensors (:data:`LABEL_SCHEMA`,
    ``count`` contexts) and metadata (``identity``, ``start``, ``count``) are right."""
    tensors, meta = parse_shard(data, LABEL_SCHEMA, {"S": count}, digest_required=False)
    try:
        found = parse_json(meta.get(META_KEY, "{}"))
    except json.JSONDecodeError:
        raise ShardError("is not an unmask MI label shard") from None
    diff = mismatch(found, {**identity, "start": start, "count": count})
    if diff:
        raise ShardError(f"disagrees with {MANIFEST}: {diff}")
    return tensors


def read_labels(out: str | Path) -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors concatenated over the manifest's shards in order, manifest).

    Every shard must hash to its sha256 in the manifest and carry the manifest's identity,
    start and count; otherwise :class:`UnmaskError` names the shard (rerunning
    ``unmask mi label`` with the same arguments recomputes it).
    """
    out = Path(out)
    manifest_path = out / MANIFEST
    if not manifest_path.is_file():
        raise UnmaskError(f"labels: {out} has no {MANIFEST}")
    manifest = checked_manifest(manifest_path, "labels")
    parts: dict[str, list[torch.Tensor]] = {}
    expected_start = 0
    for entry in manifest["shards"]:
        require(entry["start"] == expected_start,
                f"labels: {out} is missing contexts from {expected_start}")
        path = out / entry["file"]
        require(path.is_file(), f"labels: {path} is missing")
        data = path.read_bytes()
        require(hashlib.sha256(data).hexdigest() == entry["sha256"],
                f"labels: {path} does not match its sha256 in {MANIFEST} (changed or "
                f"corrupted); rerun `unmask mi label` with the same arguments to recompute it")
        try:
            tensors = check_label_shard(data, manifest["identity"], entry["start"],
                                        entry["count"])
        except ShardError as e:
            raise UnmaskError(f"labels: {path} {e}") from None
        for key, value in tensors.items():
            parts.setdefault(key, []).append(value)
        expected_start += entry["count"]
    return {k: torch.cat(v) for k, v in parts.items()}, manifest
