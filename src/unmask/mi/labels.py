"""Ground-truth MI labels at scale: contexts from a task, probed, written in resumable shards.

A context task (:class:`ContextTask`) says where contexts come from; each task package
registers its own in its ``labels`` module (``unmask.sudoku.labels``, ``unmask.protein.labels``,
``unmask.text.labels``: named in :data:`unmask.tasks.TASKS`), and :func:`register_task` adds
others.

A label set is a folder::

    manifest.json                 identity (task, model fingerprint, seed, eps, mask ratio,
                                  shard size, precision; top_k and the task's options when
                                  set), versions, finished shards + sha256
    shard-00000.safetensors       tensors of contexts [0, S), metadata in the header
    shard-00001.safetensors       contexts [S, 2S), ...

Context c is a pure function of (task, seed, c), so every shard can be computed on its own, in
any order (in this process or on the workers of an engine, :mod:`unmask.parallel.workers`), and
a killed run resumed: finished shards (complete files, renamed into place atomically, listed in
the manifest with the sha256 of their bytes) are skipped and the rest recomputed, giving files
byte-identical to an uninterrupted run on the same machine and versions. A shard whose bytes
do not hash to the manifest's sha256 is recomputed on resume and refused on read. A folder
holding labels of another identity is an error, never a silent mix.

Shard tensors (S contexts of length N):
    tokens (S, N) int64 with MASK at the masked positions; masked (S, N) bool;
    mi (S, N, N) float32 symmetrised MI; directed (S, N, N) float32 raw directed MI (row i =
    probed position); entropy (S, N) float32; dropped_mass (S, N) float32 pruned mass per row;
    sequences (S,) int64 sequences evaluated per context.
The pruning bound is recomputed from these with :func:`unmask.mi.directed_error_bound`
(conditional entropy = entropy[:, None, :] - directed).
"""

from __future__ import annotations

import importlib
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from unmask.errors import UnmaskError, require
from unmask.io import file_sha256, parse_json
from unmask.mi.label_files import (
    FORMAT,
    LABEL_SCHEMA,
    MANIFEST,
    META_KEY,
    SHARD_RE,
    checked_manifest,
    mismatch,
    shard_name,
    versions,
)
from unmask.mi.probe import perturbation_mi
from unmask.models.base import MaskedModel
from unmask.parallel.shard_store import ShardError, ShardStore, shard_bytes
from unmask.parallel.workers import Engine, LocalEngine
from unmask.tasks import label_modules, task_family
from unmask.validation import is_int


@dataclass(frozen=True)
class ContextTask:
    """A source of label contexts.

    generate(seed, start, count, mask_ratio) -> (count, N) long tokens with MASK, context
        start + k depending only on (seed, start + k, mask_ratio).
    check(model) raises :class:`UnmaskError` if the model cannot read the task's tokens.
    load_model(name_or_path, trust_remote_code=False) loads a model for the task (None = the
        task's shipped model; trust_remote_code: as for :func:`unmask.models.auto.load_model`).
    symmetries(count, seed) -> (cell_perm (count, N) new position -> old position,
        token_map (count, V) old token -> new token): random elements of a group under which
        the task's joint distribution is invariant (None = no known symmetry). A context moved
        by one has the moved MI matrix, which lets an estimator train on more contexts than
        were probed.
    options: names of the task's own settings (``LabelSpec.options``, e.g. a corpus file).
        A task with options gets them as keywords, with the model as ``model=``:
        generate(seed, start, count, mask_ratio, model=..., **options).
    """

    name: str
    generate: Callable[[int, int, int, tuple[float, float]], torch.Tensor]
    check: Callable[[MaskedModel], None]
    load_model: Callable[..., MaskedModel]
    description: str = ""
    symmetries: Callable[[int, int], tuple[np.ndarray, np.ndarray]] | None = None
    options: tuple[str, ...] = ()

    def contexts(self, model: MaskedModel, spec: LabelSpec, start: int,
                 count: int) -> torch.Tensor:
        """(count, N) contexts [start, start + count) of ``spec`` for ``model``."""
        if self.options:
            return self.generate(spec.seed, start, count, spec.mask_ratio, model=model,
                                 **dict(spec.options))
        return self.generate(spec.seed, start, count, spec.mask_ratio)

    def check_options(self, options: dict) -> None:
        """Raise :class:`UnmaskError` unless ``options`` names exactly this task's options."""
        if set(options) != set(self.options):
            need = ", ".join(self.options) or "none"
            raise UnmaskError(f"options: the {self.name} task takes {need}, got "
                              f"{', '.join(sorted(options)) or 'none'}")


#: context tasks by name: a task package's own (its ``labels`` module in
#: :data:`unmask.tasks.TASKS`, imported when its name is first asked for) and any registered
#: with :func:`register_task`
CONTEXT_TASKS: dict[str, ContextTask] = {}


def register_task(task: ContextTask) -> ContextTask:
    """Add ``task`` to :data:`CONTEXT_TASKS`; it becomes a ``--task`` of ``unmask mi label``."""
    CONTEXT_TASKS[task.name] = task
    return task


def task_names() -> list[str]:
    """The names of every context task, packaged or registered, sorted."""
    return sorted({*CONTEXT_TASKS, *label_modules()})


def get_task(name: str) -> ContextTask:
    """The context task ``name``, its package's ``labels`` module imported if need be."""
    if name not in CONTEXT_TASKS and name in label_modules():
        importlib.import_module(label_modules()[name])
    if name not in CONTEXT_TASKS:
        raise UnmaskError(f"task: unknown {name!r} (known: {', '.join(task_names())})")
    return CONTEXT_TASKS[name]


def context_tasks() -> dict[str, ContextTask]:
    """Every context task by name (each package's ``labels`` module imported)."""
    return {name: get_task(name) for name in task_names()}


def random_masks(seed_key: tuple[int, ...], start: int, count: int, length: int,
                 mask_ratio: tuple[float, float]) -> np.ndarray:
    """(count, length) bool masks; mask k has round(r * length) (at least 1) cells masked,
    r uniform in [lo, hi), drawn from a generator keyed by (*seed_key, start + k)."""
    lo, hi = mask_ratio
    out = np.zeros((count, length), dtype=bool)
    for k in range(count):  # one small generator per context: contexts independent of shards
        rng = np.random.default_rng([*seed_key, start + k])
        ratio = lo + (hi - lo) * rng.random()
        n_masked = min(length, max(1, round(ratio * length)))
        out[k, np.argsort(rng.random(length), kind="stable")[:n_masked]] = True
    return out


# --- shards -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class LabelSpec:
    """What a label folder holds; two runs may share a folder only if these are equal."""

    task: str
    model_fingerprint: str
    seed: int
    eps: float
    mask_ratio: tuple[float, float]
    shard_size: int
    renormalize: bool = True
    precision: str = "fp32"
    top_k: int | None = None
    options: tuple[tuple[str, object], ...] = ()

    def __post_init__(self):
        lo, hi = self.mask_ratio
        require(0.0 <= lo < hi <= 1.0,
                f"mask_ratio: expected 0 <= LO < HI <= 1, got {lo}:{hi}")
        require(0.0 <= self.eps < 1.0, f"eps: must be in [0, 1), got {self.eps}")
        require(self.shard_size >= 1, f"shard_size: must be >= 1, got {self.shard_size}")
        require(self.precision in ("fp32", "bf16"),
                f"precision: expected fp32 or bf16, got {self.precision!r}")
        require(self.top_k is None or self.top_k >= 1,
                f"top_k: must be >= 1, got {self.top_k}")

    def identity(self) -> dict:
        """The manifest's identity; ``top_k`` and ``options`` only when set, so a folder
        written without them keeps its identity."""
        out = {"format": FORMAT, "task": self.task, "model_fingerprint": self.model_fingerprint,
               "seed": self.seed, "eps": self.eps, "mask_ratio": list(self.mask_ratio),
               "shard_size": self.shard_size, "renormalize": self.renormalize,
               "precision": self.precision}
        if self.top_k is not None:
            out["top_k"] = self.top_k
        if self.options:
            out["options"] = dict(self.options)
        return out


def _check_folder(out: Path) -> None:
    """Refuse with one line an ``out`` that cannot become a label folder; creates nothing."""
    if out.exists() and not out.is_dir():
        raise UnmaskError(f"out: {out} exists and is not a directory")
    existing = next(p for p in (out, *out.absolute().parents) if p.exists())
    if not existing.is_dir():
        raise UnmaskError(f"out: cannot create {out} ({existing} is not a directory)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UnmaskError(f"out: {out} is not writable" if existing == out else
                          f"out: cannot create {out} ({existing} is not writable)")


def _create_folder(out: Path) -> ShardStore:
    """The shard store of ``out``, created (after :func:`_check_folder`)."""
    return ShardStore(out, "out")


def _write_manifest(out: Path, manifest: dict) -> None:
    ShardStore(out, "out").write(MANIFEST, (json.dumps(manifest, indent=2) + "\n").encode())


def _open_folder(out: Path, spec: LabelSpec) -> dict:
    """Check or create the manifest of ``out``; remove temporary files a killed run left."""
    _check_folder(out)
    _create_folder(out)
    identity = spec.identity()
    manifest_path = out / MANIFEST
    if manifest_path.is_file():
        manifest = checked_manifest(manifest_path, "out")
        diff = mismatch(manifest["identity"], identity)
        if diff:
            raise UnmaskError(f"out: {out} holds labels with {diff}; use another folder")
    else:
        if any(SHARD_RE.match(p.name) for p in out.iterdir()):
            raise UnmaskError(f"out: {out} holds label shards but no {MANIFEST}")
        manifest = {"identity": identity, "versions": versions(), "contexts": 0, "shards": []}
        _write_manifest(out, manifest)
    for tmp in out.glob(".shard-*.tmp"):  # atomic_path's leftovers after a SIGKILL
        tmp.unlink()
    for tmp in out.glob(f".{MANIFEST}.*.tmp"):
        tmp.unlink()
    return manifest


def _verified_entry(path: Path, entry: dict | None, identity: dict, start: int,
                    count: int) -> tuple[dict | None, str]:
    """(the manifest entry if shard ``path`` is finished and intact, else None; why not).

    A shard counts as finished only when the manifest lists it, its bytes hash to the listed
    sha256, and its metadata carries this identity and the listed start and count. A shard
    file the manifest does not list (a run killed between writing the shard and the manifest)
    is not trusted either: it is recomputed.
    """
    if not path.is_file():
        return None, "listed in the manifest but missing" if entry else ""
    if entry is None:
        return None, "not listed in the manifest"
    if file_sha256(path) != entry["sha256"]:
        return None, f"does not match its sha256 in {MANIFEST}"
    try:  # the content digest (shards of earlier versions have none) and the tensors
        _, header = ShardStore(path.parent, "out").read(
            path.name, LABEL_SCHEMA, {"S": entry["count"]}, digest_required=False)
        meta = parse_json(header[META_KEY])
    except (ShardError, KeyError, json.JSONDecodeError) as e:
        return None, str(e) if isinstance(e, ShardError) else "is not an unmask MI label shard"
    diff = mismatch(meta, identity)
    if diff:
        raise UnmaskError(f"out: {path} was written with {diff}")
    if (meta.get("start"), meta.get("count")) != (entry["start"], entry["count"]):
        return None, f"disagrees with {MANIFEST} on its start or count"
    # a shorter last shard of an earlier, smaller run is recomputed at its new size; a longer
    # one (an earlier, larger run) already holds every context asked for
    if entry["start"] != start or entry["count"] < count:
        return None, ""
    return entry, ""


def compute_shard(model: MaskedModel, task: ContextTask, spec: LabelSpec, start: int,
                  count: int, batch_size: int) -> dict[str, torch.Tensor]:
    """Tensors of one shard (see the module docstring)."""
    tokens = task.contexts(model, spec, start, count)
    res = perturbation_mi(model, tokens.to(model.device), eps=spec.eps, batch_size=batch_size,
                          renormalize=spec.renormalize, top_k=spec.top_k)
    return {"tokens": tokens.long().cpu().contiguous(),
            "masked": (tokens == model.mask_id).cpu().contiguous(),
            "mi": res.mi.float().cpu().contiguous(),
            "directed": res.directed.float().cpu().contiguous(),
            "entropy": res.entropy.float().cpu().contiguous(),
            "dropped_mass": res.dropped_mass.float().cpu().contiguous(),
            "sequences": res.row_sequences.long().cpu().contiguous()}


@dataclass(frozen=True)
class ShardJob:
    """One shard to compute: contexts [start, start + count) of ``spec``."""

    spec: LabelSpec
    index: int
    start: int
    count: int
    batch_size: int


def label_shard(model: MaskedModel, job: ShardJob) -> dict:
    """Compute one shard where ``model`` lives.

    Returns:
        {"data": the shard file's bytes (safetensors, metadata in the header),
         "sequences": sequences evaluated, "seconds": compute time}.
    """
    t0 = time.perf_counter()
    tensors = compute_shard(model, get_task(job.spec.task), job.spec, job.start, job.count,
                            job.batch_size)
    meta = {**job.spec.identity(), "shard": job.index, "start": job.start, "count": job.count,
            "versions": versions()}
    data = shard_bytes(tensors, {META_KEY: json.dumps(meta, sort_keys=True)})
    return {"data": data, "sequences": int(tensors["sequences"].sum()),
            "seconds": time.perf_counter() - t0}


def describe_model(model: MaskedModel, task: str, options: dict | None = None) -> dict:
    """{"fingerprint", "precision"} of ``model``, after checking it reads ``task``'s tokens
    and, for a task with options, that they give it contexts (no context is drawn)."""
    context_task = get_task(task)
    context_task.check(model)
    if context_task.options:
        context_task.generate(0, 0, 0, (0.0, 1.0), model=model, **(options or {}))
    return {"fingerprint": model.fingerprint(),
            "precision": "bf16" if getattr(model, "autocast_bf16", False) else "fp32"}


def _describe(model: MaskedModel, request: tuple[str, dict]) -> dict:
    """:func:`describe_model` as an engine call: ``request`` = (task, options)."""
    return describe_model(model, *request)


@dataclass(frozen=True)
class _Given:
    """A model already in memory, as an engine ``setup`` (pickled to remote workers)."""

    model: MaskedModel

    def __call__(self) -> MaskedModel:
        return self.model


def write_labels(model: MaskedModel | Callable[[], MaskedModel], out: str | Path, *,
                 contexts: int, task: str | None = None, seed: int = 0, eps: float = 1e-3,
                 mask_ratio: tuple[float, float] = (0.05, 1.0), shard_size: int = 256,
                 batch_size: int = 4096, renormalize: bool = True,
                 top_k: int | None = None, options: dict | None = None,
                 engine: Engine | None = None,
                 log: Callable[[str], None] | None = None) -> dict:
    """Write (or finish) the label set of ``contexts`` contexts into folder ``out``.

    Args:
        model: the model, or a picklable callable loading it (e.g.
            :func:`unmask.bench.recipe.model_recipe`), which each of the engine's workers calls
            once.
        top_k: probe at most the top_k most likely tokens per position (None: no cap); with
            ``eps`` and ``batch_size`` (capped at ``MAX_LOGITS`` logits per model call, see
            :func:`unmask.mi.perturbation_mi`) it bounds cost and memory at large vocabularies.
        task: the context task (None: the one ``model`` records, :func:`unmask.tasks.task_family`;
            a loader callable must name it).
        options: the task's own settings (:attr:`ContextTask.options`; the text task:
            :func:`unmask.text.labels.text_options`).
        engine: where shards are computed (default: a
            :class:`unmask.parallel.workers.LocalEngine`, in
            this process). Results come back to this process, which writes each shard
            atomically and records its sha256 in the manifest after every shard.
        log: called with one line per shard.

    Returns the final manifest. The model's precision (``autocast_bf16``) is part of the
    identity, so fp32 and bf16 labels never share a folder. On resume a shard is kept only if
    the manifest lists it with the sha256 of its bytes; any other shard (changed, truncated,
    unlisted) is recomputed, which restores the bytes of an uninterrupted run.
    """
    require(is_int(contexts) and contexts >= 1,
            f"contexts: must be an integer >= 1, got {contexts}")
    require(is_int(batch_size) and batch_size >= 1,
            f"batch_size: must be an integer >= 1, got {batch_size}")
    require(is_int(shard_size) and shard_size >= 1,
            f"shard_size: must be >= 1, got {shard_size}")
    require(top_k is None or (is_int(top_k) and top_k >= 1),
            f"top_k: must be None or an integer >= 1, got {top_k}")
    if task is None:
        task = task_family(getattr(model, "task", None))
        require(task, "task: name the context task (the model records none)")
    options = dict(options or {})
    get_task(task).check_options(options)
    out = Path(out)
    _check_folder(out)  # before any worker starts; created once the inputs are checked
    engine = engine if engine is not None else LocalEngine()
    setup = model if not isinstance(model, torch.nn.Module) else _Given(model)
    if isinstance(engine, LocalEngine) and isinstance(model, torch.nn.Module):
        setup = lambda: model  # noqa: E731 - in-process: no copy
    try:
        engine.open(setup)
        info = engine.call(_describe, (task, options))
        spec = LabelSpec(task=task, model_fingerprint=info["fingerprint"], seed=int(seed),
                         eps=float(eps), mask_ratio=(float(mask_ratio[0]), float(mask_ratio[1])),
                         shard_size=int(shard_size), renormalize=bool(renormalize),
                         precision=info["precision"], top_k=top_k,
                         options=tuple(sorted(options.items())))
        return _write_shards(engine, spec, out, contexts, batch_size, log)
    finally:
        engine.close()


def _write_shards(engine: Engine, spec: LabelSpec, out: Path, contexts: int,
                  batch_size: int, log: Callable[[str], None] | None) -> dict:
    manifest = _open_folder(out, spec)
    identity, store = spec.identity(), ShardStore(out, "out")
    n_shards = math.ceil(contexts / spec.shard_size)
    listed = {s["file"]: s for s in manifest["shards"]}
    done: dict[str, dict] = {}
    jobs: list[ShardJob] = []
    for index in range(n_shards):
        start = index * spec.shard_size
        count = min(spec.shard_size, contexts - start)
        path = out / shard_name(index)
        entry, why = _verified_entry(path, listed.get(path.name), identity, start, count)
        if entry is not None:
            done[path.name] = entry
            if log:
                log(f"shard {index + 1}/{n_shards}: done already")
        else:
            if why and log:
                log(f"shard {index + 1}/{n_shards}: {path.name} {why}; recomputing it")
            if why:  # never list bytes that failed the check, even until they are replaced
                listed.pop(path.name, None)
            jobs.append(ShardJob(spec, index, start, count, batch_size))

    def record() -> dict:
        merged = sorted({**listed, **done}.values(), key=lambda s: s["file"])
        return {**manifest, "contexts": sum(s["count"] for s in merged), "shards": merged}

    manifest = record()
    _write_manifest(out, manifest)
    for k, result in engine.map_unordered(label_shard, jobs):
        job = jobs[k]
        path = out / shard_name(job.index)
        sha256 = store.write(path.name, result["data"])
        done[path.name] = {"file": path.name, "start": job.start, "count": job.count,
                           "sha256": sha256}
        manifest = record()
        _write_manifest(out, manifest)
        if log:
            seqs, seconds = result["sequences"], result["seconds"]
            log(f"shard {job.index + 1}/{n_shards}: {job.count} contexts, {seqs:,} sequences, "
                f"{seconds:.1f} s ({seqs / max(seconds, 1e-9):,.0f} sequences/s)")
    return manifest
