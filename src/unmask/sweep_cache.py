"""Finished shards of a bench sweep kept in a folder, so that a killed sweep resumes.

Each shard's :class:`~unmask.decode.DecodeResult` is one safetensors file (tensors only, read
without executing anything) named by a key: the sha256 of everything that decides the shard's
result, so that a changed input never reuses a stale file:

* the library and torch versions, the model's weights fingerprint and device type, the
  shipped MI estimators' bytes (a spec may read one without naming it);
* the entry's spec (parameters; a tensor parameter by its bytes; a folder parameter such as
  ``estimator=`` by the bytes of its files) and, for a corrected entry, the corrector recipe
  and its folder's bytes (a corrected entry with hooks but no recipe is never kept);
* the decode settings, the run's extras (their repr), the run's seed, the shard's first
  item and its tokens' bytes.

A sweep with a cache decodes only the shards it lacks, writes each as it arrives (atomically:
a killed sweep leaves whole files), and reports the rows a sweep without one would, with each
shard's decode seconds as first measured.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

import unmask
from unmask.corrector import SHIPPED_CORRECTOR
from unmask.decode import DecodeResult
from unmask.errors import UnmaskError, require
from unmask.io import atomic_path
from unmask.pretrained import pretrained_path, shipped_names
from unmask.samplers.mi_guided import SHIPPED_ESTIMATORS

FORMAT = "unmask-shard/1"
RESULT_FIELDS = ("tokens", "nfe", "sequences", "steps", "cumulative_entropy", "reveal_step")


def _tensor_digest(t: torch.Tensor) -> str:
    head = f"{t.dtype}{tuple(t.shape)}".encode()
    flat = t.detach().cpu().contiguous().reshape(-1)
    return hashlib.sha256(head + flat.view(torch.uint8).numpy().tobytes()).hexdigest()


def folder_digest(folder: str | Path | None) -> str | None:
    """sha256 over the names and bytes of the files in ``folder``, a folder or a shipped name
    (None: None; anything else: its text, which the loader will refuse anyway)."""
    if folder is None:
        return None
    path = Path(folder)
    if not path.is_dir() and str(folder) in shipped_names():
        path = pretrained_path(str(folder))
    if not path.is_dir():
        return f"not a folder: {folder}"
    h = hashlib.sha256()
    for f in sorted(p for p in path.iterdir() if p.is_file()):
        h.update(f.name.encode() + b"\0" + hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def _value(v):
    """A JSON-able stand-in for a spec parameter: tensors by their bytes."""
    return {"tensor": _tensor_digest(v)} if isinstance(v, torch.Tensor) else repr(v)


class ShardCache:
    """The finished shards of sweeps in ``folder`` (created if missing).

    fingerprint: the model's weights fingerprint; device: the device type it decodes on;
    corrector: the :class:`~unmask.sweep.CorrectorRecipe` of corrected entries (None: such
    entries are decoded every time); path_params: spec parameters that name a folder.
    """

    def __init__(self, folder: str | Path, fingerprint: str, device: str,
                 corrector=None, path_params: tuple[str, ...] = ()):
        self.folder = Path(folder)
        if self.folder.exists() and not self.folder.is_dir():
            raise UnmaskError(f"cache: {folder} is not a folder")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UnmaskError(f"cache: cannot create {folder} ({e.strerror})") from None
        # the heads a spec may load without naming them: the shipped estimators
        shipped = {name: folder_digest(name) for name in sorted(SHIPPED_ESTIMATORS.values())}
        self.base = {"format": FORMAT, "unmask": unmask.__version__,
                     "torch": torch.__version__, "model": fingerprint, "device": device,
                     "shipped": shipped}
        self.corrector = None if corrector is None else {
            **{k: repr(v) for k, v in dataclasses.asdict(corrector).items()},
            "files": folder_digest(corrector.source or SHIPPED_CORRECTOR)}
        self.path_params = path_params
        self._folders: dict[str, str | None] = {}  # a folder parameter's digest, read once

    def key(self, shard) -> str | None:
        """The shard's file name stem, or None when it is not to be kept."""
        entry = shard.entry
        if entry.corrected and self.corrector is None:
            return None
        params = {k: self._folder(v) if k in self.path_params else _value(v)
                  for k, v in entry.params.items()}
        ident = {**self.base, "sampler": entry.name, "params": params,
                 "verify": entry.verify, "corrector": self.corrector if entry.corrected else None,
                 "config": {k: repr(v) for k, v in dataclasses.asdict(shard.config).items()},
                 "seed": shard.seed, "start": shard.start, "extras": repr(shard.extras),
                 "tokens": _tensor_digest(shard.tokens)}
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()

    def _folder(self, value) -> str | None:
        if str(value) not in self._folders:
            self._folders[str(value)] = folder_digest(value)
        return self._folders[str(value)]

    def load(self, key: str | None, rows: int) -> dict | None:
        """The output (as :func:`~unmask.sweep.decode_shard` gives it) of the shard of
        :meth:`key` ``key`` and ``rows`` items, or None when it is not kept."""
        if key is None or not (path := self.folder / f"{key}.safetensors").is_file():
            return None
        try:
            with safe_open(str(path), framework="pt") as f:
                meta = f.metadata() or {}
                tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (not a dict)
            seconds = float(meta["seconds"])
            result = DecodeResult(**{k: tensors.pop(k) for k in RESULT_FIELDS},
                                  stats={k.removeprefix("stats."): v
                                         for k, v in tensors.items()})
        except (SafetensorError, OSError, KeyError, ValueError, TypeError) as e:
            raise UnmaskError(f"cache: {path} is not a shard this sweep wrote "
                              f"({type(e).__name__}); delete it to decode the shard again"
                              ) from None
        require(meta.get("key") == key and len(result.tokens) == rows,
                f"cache: {path} holds another shard; delete it to decode the shard again")
        return {"result": result, "seconds": seconds, "fingerprint": meta.get("fingerprint")}

    def save(self, key: str | None, out: dict) -> None:
        """Keep a decoded shard's output under its :meth:`key` (nothing for None: a shard
        not to be kept)."""
        if key is None:
            return
        res = out["result"]
        tensors = {k: getattr(res, k).contiguous() for k in RESULT_FIELDS}
        tensors.update({f"stats.{k}": v.contiguous() for k, v in res.stats.items()})
        meta = {"key": key, "seconds": repr(out["seconds"]),
                "fingerprint": str(out["fingerprint"])}
        with atomic_path(self.folder / f"{key}.safetensors") as tmp:
            save_file(tensors, str(tmp), metadata=meta)
