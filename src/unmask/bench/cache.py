"""Finished shards of a bench sweep kept in a folder, so that a killed sweep resumes.

Each shard's :class:`~unmask.decode.DecodeResult` is one shard file of a
:class:`~unmask.parallel.shard_store.ShardStore` (safetensors with its content sha256) named
by a key:
the sha256 of everything that decides the shard's result, so that a changed input never
reuses a stale file:

* the library and torch versions, the model's weights fingerprint and device type, the
  shipped MI estimators' bytes (a spec may read one without naming it);
* the entry's whole spec (its canonical text: sampler, parameters, ``+verify`` and its
  options, hook modifiers; a tensor parameter by its bytes; a folder parameter such as
  ``estimator=`` by the bytes of its files) and, for a corrected entry, the corrector recipe
  and its folder's bytes (a corrected entry with hooks but no recipe is never kept);
* the decode settings, the run's extras (their repr), the run's seed, the shard's first
  item and its tokens' bytes.

A sweep with a cache decodes only the shards it lacks, writes each as it arrives (atomically:
a killed sweep leaves whole files), and reports the rows a sweep without one would, with each
shard's decode seconds as first measured. A kept shard that does not hash to its sha256, or
whose tensors are not the shapes and dtypes of the shard's rows, is decoded again with one
warning line, never believed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path

import torch

import unmask
from unmask.corrector import Corrector
from unmask.decode import DecodeResult
from unmask.parallel.shard_store import Schema, ShardError, ShardStore, check_schema, shard_bytes
from unmask.pretrained import pretrained_path, shipped_head, shipped_names
from unmask.samplers.mi_guided import SHIPPED_ESTIMATORS

FORMAT = "unmask-shard/2"
#: the per-row tensors of a :class:`~unmask.decode.DecodeResult` a shard keeps, with their
#: dtypes and shapes (S rows of N positions); ``stats.NAME`` (S,) tensors come beside them
RESULT_SCHEMA: Schema = {
    "tokens": (torch.int64, ("S", "N")), "nfe": (torch.int64, ("S",)),
    "sequences": (torch.int64, ("S",)), "steps": (torch.int64, ("S",)),
    "cumulative_entropy": (torch.float64, ("S",)), "reveal_step": (torch.int64, ("S", "N"))}
RESULT_FIELDS = tuple(RESULT_SCHEMA)


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
    corrector: the :class:`~unmask.bench.sweep.CorrectorRecipe` of corrected entries (None: such
    entries are decoded every time); path_params: spec parameters that name a folder.
    """

    def __init__(self, folder: str | Path, fingerprint: str, device: str,
                 corrector=None, path_params: tuple[str, ...] = ()):
        self.store = ShardStore(folder, "cache")
        # the heads a spec may load without naming them: the shipped estimators
        shipped = {name: folder_digest(name) for name in sorted(SHIPPED_ESTIMATORS.values())}
        self.base = {"format": FORMAT, "unmask": unmask.__version__,
                     "torch": torch.__version__, "model": fingerprint, "device": device,
                     "shipped": shipped}
        self.corrector = None if corrector is None else {
            **{k: repr(v) for k, v in dataclasses.asdict(corrector).items()},
            "files": folder_digest(corrector.source or shipped_head(Corrector.KIND))}
        self.path_params = path_params
        self._folders: dict[str, str | None] = {}  # a folder parameter's digest, read once

    def key(self, shard) -> str | None:
        """The shard's file name stem, or None when it is not to be kept."""
        entry = shard.entry
        if entry.corrected and self.corrector is None:
            return None
        params = {k: self._folder(v) if k in self.path_params else _value(v)
                  for k, v in entry.params.items()}
        ident = {**self.base, "spec": entry.text, "params": params,
                 "verify": [entry.verify, {k: repr(v) for k, v in entry.verify_options.items()}],
                 "hooks": {k: {p: repr(v) for p, v in o.items()} for k, o in entry.hooks.items()},
                 "corrector": self.corrector if entry.corrected else None,
                 "config": {k: repr(v) for k, v in dataclasses.asdict(shard.config).items()},
                 "seed": shard.seed, "start": shard.start, "extras": repr(shard.extras),
                 "tokens": _tensor_digest(shard.tokens)}
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()

    def _folder(self, value) -> str | None:
        if str(value) not in self._folders:
            self._folders[str(value)] = folder_digest(value)
        return self._folders[str(value)]

    def load(self, key: str | None, shape: tuple[int, int]) -> dict | None:
        """The output (as :func:`~unmask.bench.sweep.decode_shard` gives it) of the shard of
        :meth:`key` ``key`` whose tokens have ``shape`` (S, N), or None when it is not kept
        or cannot be believed (one warning line: it is decoded again)."""
        if key is None:
            return None
        name = f"{key}.safetensors"
        try:
            found = self.store.read(name, meta={"key": key})
            if found is None:
                return None
            tensors, meta = found
            stats = {k: (None, ("S",)) for k in tensors if k.startswith("stats.")}
            check_schema(tensors, {**RESULT_SCHEMA, **stats}, {"S": shape[0], "N": shape[1]})
            seconds = float(meta["seconds"])
        except (ShardError, KeyError, ValueError) as e:
            why = str(e) if isinstance(e, ShardError) else "lacks its decode seconds"
            print(f"warning: cache: {self.store.path(name)} {why}; decoding the shard again",
                  file=sys.stderr, flush=True)
            return None
        result = DecodeResult(**{k: tensors.pop(k) for k in RESULT_FIELDS},
                              stats={k.removeprefix("stats."): v for k, v in tensors.items()})
        return {"result": result, "seconds": seconds, "fingerprint": meta.get("fingerprint")}

    def save(self, key: str | None, out: dict) -> None:
        """Keep a decoded shard's output under its :meth:`key` (nothing for None: a shard
        not to be kept)."""
        if key is None:
            return
        res = out["result"]
        tensors = {k: getattr(res, k) for k in RESULT_FIELDS}
        tensors.update({f"stats.{k}": v for k, v in res.stats.items()})
        meta = {"key": key, "seconds": repr(out["seconds"]),
                "fingerprint": str(out["fingerprint"])}
        self.store.write(f"{key}.safetensors", shard_bytes(tensors, meta))
