"""Reports over bench JSON files (``unmask <task> bench --json``): Pareto plots and pooling.

A bench file is a JSON object with ``bench`` (the task; a file without it is a Sudoku bench's),
what it measured (Sudoku: ``set`` and ``puzzles``; other tasks: their item counts, seed,
temperatures, tasks) and ``rows``: :class:`unmask.bench.contract.BenchRow` s, each with ``label``,
``name``, ``accuracy`` (share; older Sudoku files: ``solved``), ``nfe`` (mean forward passes;
null on a reference row), ``wall_s`` (seconds for the whole set) and, for paired comparisons,
``solved_each`` ('0'/'1' per item). A row of a task part (``task``: an arithmetic or reasoning
task) is drawn as ``PART LABEL``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from unmask.bench.contract import load_bench_task
from unmask.bench.plot import pareto_plot
from unmask.bench.rows import paired_counts
from unmask.bench.table import render_table
from unmask.errors import UnmaskError
from unmask.io import IMAGE_SUFFIXES, JSON_SUFFIXES, atomic_write_text, output_path, parse_json
from unmask.samplers.spec import CORRECTOR, VERIFY

#: x-axis choices of :func:`plot_bench`: name -> (row key, axis label)
X_AXES = {"passes": ("nfe", "mean forward passes (NFE)"),
          "wall": ("wall_s", "wall-clock seconds for the set"),
          "sequences": ("sequences", "mean sequences evaluated per item")}
#: the fields of a (non-Sudoku) bench file that say which items it measured
ITEM_FIELDS = ("tasks", "limit", "n", "lengths", "factors", "seed", "temperatures",
               "confidence")
#: file types :func:`plot_bench` writes
PLOT_SUFFIXES = IMAGE_SUFFIXES
#: the row every pooled row is paired against
REFERENCE = "confidence"


def check_output(out: str | Path, inputs: list[str | Path], suffixes: tuple[str, ...],
                 what: str = "--out") -> Path:
    """``out`` checked by :func:`unmask.io.output_path` (folder exists and is writable, one
    of ``suffixes``, not a folder) and found to be none of ``inputs``; UnmaskError naming
    ``what`` otherwise."""
    out = output_path(out, what, suffixes)
    for path in inputs:
        if Path(path).resolve() == out.resolve():
            raise UnmaskError(f"{what}: {out} is also an input; write elsewhere")
    return out


def load_bench(path: str | Path) -> dict:
    """Read one bench JSON file of any task, checking its rows.

    Returns:
        The file's object (``bench``, ``rows``, ...), each row with ``accuracy`` (read from
        ``solved`` in older Sudoku files) and ``label`` made unique within the file (its task
        part and temperature prefixed or added where the file has several).
    """
    path = Path(path)
    if not path.is_file():
        raise UnmaskError(f"bench file {path}: not found")
    try:
        data = parse_json(path.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except _NonFinite as e:
        raise UnmaskError(f"bench file {path}: holds {e.args[0]}, not a finite number "
                          "(a bench writes finite numbers)") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UnmaskError(f"bench file {path}: not JSON ({e})") from None
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows:
        raise UnmaskError(f"bench file {path}: no 'rows' list")
    for r in rows:
        if isinstance(r, dict) and "accuracy" not in r and "solved" in r:
            r["accuracy"] = r["solved"]  # a Sudoku file from before the shared row
        missing = [k for k in ("label", "name", "accuracy", "nfe")
                   if not isinstance(r, dict) or k not in r]
        if missing:
            what = "solved" if missing[0] == "accuracy" else missing[0]
            raise UnmaskError(f"bench file {path}: a row lacks {what!r} (a bench row has "
                              "label, name, accuracy (or solved), nfe)")
        _check_row(path, r)
    if len({"task" in r for r in rows}) > 1:
        raise UnmaskError(f"bench file {path}: some rows name a task part and some do not")
    _unique_labels(rows)
    return data


def _check_row(path: Path, r: dict) -> None:
    """One line naming what is wrong with a bench row: a label, name or task that is not a
    string, a measure (or temperature) that is not a finite number."""
    for key in ("label", "name", "task"):
        if key in r and not isinstance(r[key], str):
            raise UnmaskError(f"bench file {path}: a row's {key} is {json.dumps(r[key])}, "
                              "not a string")
    for key in ("accuracy", "nfe", "wall_s", "sequences", "temperature"):
        if key == "temperature" and r.get(key) is None:
            continue
        value = r.get(key, 0.0)
        if key not in ("accuracy", "temperature") and value is None and r.get("nfe") is None:
            continue  # a reference row (natural proteins): no decoding, no cost
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not math.isfinite(value)):
            raise UnmaskError(f"bench file {path}: row {r['label']!r} {key} is "
                              f"{json.dumps(value)}, not a finite number")


def _unique_labels(rows: list[dict]) -> None:
    """Label the rows of a file with several task parts ``PART LABEL`` and, where a label
    recurs at several temperatures, ``LABEL T=t`` (in place)."""
    parts = {r.get("task") for r in rows}
    for r in rows:
        if len(parts) > 1:
            r["label"], r["name"] = f"{r['task']} {r['label']}", f"{r['task']} {r['name']}"
    temps = {r.get("temperature") for r in rows}
    if len(temps) > 1:
        for r in rows:
            if r.get("temperature") is None:
                continue
            if f"T={r['temperature']:g}" not in r["label"].split():
                r["label"] = f"{r['label']} T={r['temperature']:g}"


def measured(data: dict, count: bool = False) -> str:
    """What a bench file measured, in words: its puzzle set (with ``count``, and how many
    puzzles), or for other tasks its task and items (files to be drawn together or merged as
    one run must agree on it)."""
    bench = data.get("bench", "sudoku")
    if bench == "sudoku" or "set" in data:
        return f"{data.get('set')} x {data.get('puzzles')}" if count else str(data.get("set"))
    items = {k: data[k] for k in ITEM_FIELDS if k in data}
    return f"{bench} {json.dumps(items, sort_keys=True)}"

class _NonFinite(ValueError):
    pass


def _no_constant(name: str):
    """JSON's NaN / Infinity / -Infinity (Python's extension) refused while parsing."""
    raise _NonFinite(name)


def _flags(row: dict) -> dict:
    """The row's corrector/verify marks (older files record them in the label only)."""
    return {"corrected": row.get("corrected", CORRECTOR in row["label"]),
            "verified": row.get("verified", VERIFY in row["label"]),
            "verify_tolerance": row.get("verify_tolerance", 1.0)}


def plot_rows(files: list[dict], *, tags: list[str] | None = None,
              samplers: list[str] | None = None) -> tuple[list[dict], str]:
    """Rows to draw from several bench files of one puzzle set.

    Args:
        files: loaded bench files (:func:`load_bench`).
        tags: one per file; a file's rows are drawn on their own lines as ``TAG sampler``.
        samplers: only rows with these labels (default all).

    Returns:
        (rows, set description). A label already taken by an earlier file is skipped.
    """
    if tags is not None and len(tags) != len(files):
        raise UnmaskError(f"--tags: one per file ({len(files)}), got {len(tags)}")
    benches = {data.get("bench", "sudoku") for data in files}
    if len(benches) > 1:
        raise UnmaskError(f"the files are of different benches: {sorted(benches)}")
    sets = {measured(data, count=True) for data in files}
    if len(sets) > 1:
        raise UnmaskError(f"the files measure different puzzle sets: {sorted(sets)}; "
                          "pool them first (unmask results pool)")
    rows, seen = [], set()
    for i, data in enumerate(files):
        tag = f"{tags[i]} " if tags else ""
        for r in data["rows"]:
            label = tag + r["label"]
            if label in seen or (samplers and r["label"] not in samplers):
                continue
            seen.add(label)
            rows.append({**r, **_flags(r), "label": label, "name": tag + r["name"]})
    if not rows:
        raise UnmaskError("--samplers: no row has these labels")
    return rows, sets.pop()


def plot_bench(paths: list[str | Path], out: str | Path, *, x: str = "passes",
               xlim: tuple[float, float] | None = None,
               ylim: tuple[float, float] | None = None, target: float | None = None,
               references: bool = False, tags: list[str] | None = None,
               samplers: list[str] | None = None, title: str | None = None) -> int:
    """Draw accuracy (Sudoku: solved %) against passes or wall-clock time for the rows of
    bench files; reference rows without passes (natural proteins) are left out.

    Args:
        paths: bench JSON files of one bench and one set of items.
        out: the picture (.png, .pdf or .svg: the extension names the format), written
            atomically.
        x: ``passes`` (mean forward passes), ``wall`` (seconds for the set) or
            ``sequences`` (mean sequences evaluated per puzzle).
        xlim, ylim: axis ranges (a zoom; y in %).
        target: F > 1 draws the ``confidence`` row's solved % and its x / F as guide lines.
        references: also draw the bench's published points (:attr:`BenchTask.references`;
            passes only).
        tags, samplers: see :func:`plot_rows`.
        title: the plot's title (default: the set and the number of rows).

    Returns:
        The number of rows drawn.
    """
    if x not in X_AXES:
        raise UnmaskError(f"--x: choose from {', '.join(X_AXES)}, got {x!r}")
    out = check_output(out, paths, PLOT_SUFFIXES)
    for name, lim in (("--xlim", xlim), ("--ylim", ylim)):
        if lim is not None and not lim[0] < lim[1]:
            raise UnmaskError(f"{name}: LO must be below HI, got {lim[0]:g} {lim[1]:g}")
    if target is not None and not target > 0:
        raise UnmaskError(f"--target: a factor above 0, got {target:g}")
    if references and x != "passes":
        raise UnmaskError("--references: the published points are in passes; use --x passes")
    key, xlabel = X_AXES[x]
    files = [load_bench(p) for p in paths]
    bench = files[0].get("bench", "sudoku")
    task = load_bench_task(bench)
    if references and not task.references:
        raise UnmaskError(f"--references: the {bench} bench has no published points")
    rows, sets = plot_rows(files, tags=tags, samplers=samplers)
    rows = [r for r in rows if r["nfe"] is not None]
    bad = [r["label"] for r in rows if not isinstance(r.get(key), (int, float))
           or r[key] <= 0]
    if bad:
        raise UnmaskError(f"--x {x}: row {bad[0]!r} has no positive {key!r}")
    guides = []
    if target is not None:
        seq = next((r for r in rows if r["label"] == REFERENCE), None)
        if seq is None:
            raise UnmaskError(f"--target: no {REFERENCE!r} row among the rows drawn")
        unit = "passes" if x == "passes" else "s"
        guides = [("h", 100 * seq["accuracy"], f"sequential {100 * seq['accuracy']:.1f}%"),
                  ("v", seq[key] / target,
                   f"1/{target:g} of sequential's {seq[key]:.1f} {unit}")]
    default_title = (f"Sudoku '{sets}' puzzles: {len(rows)} rows" if bench == "sudoku"
                     else f"{bench} bench: {len(rows)} rows")
    pareto_plot(rows, out, x=key, xlabel=xlabel, ylabel=task.accuracy_label,
                title=title or default_title,
                references=task.references if references else (), xlim=xlim, ylim=ylim,
                guides=guides)
    return len(rows)


def noise_widths(gained: int, lost: int) -> float:
    """(gained - lost) / sqrt(gained + lost): a paired difference in noise widths."""
    return (gained - lost) / math.sqrt(gained + lost) if gained + lost else 0.0


def pooled_rows(files: list[dict]) -> list[dict]:
    """One row per label present in every puzzle set of ``files``.

    Files of the same set (their ``set`` field) are one run: their rows are merged, the first
    row of each label kept. A pooled row concatenates its sets' ``solved_each`` and weights
    ``nfe`` (and ``sequences``) by each set's puzzle count; ``wall_s`` is summed.

    Returns:
        Rows with label, name, corrected, verified, solved, solved_pct, solved_each, nfe,
        and sequences / wall_s where every part has them.
    """
    by_set: dict[str, dict[str, dict]] = {}
    for data in files:
        first = by_set.setdefault(measured(data), {})
        for r in data["rows"]:
            first.setdefault(r["label"], r)
    sets = list(by_set.values())
    rows = []
    for label in sets[0]:
        parts = [s.get(label) for s in sets]
        if any(p is None or "solved_each" not in p for p in parts):
            continue
        each = "".join(p["solved_each"] for p in parts)
        counts = [len(p["solved_each"]) for p in parts]
        row = {"label": label, "name": parts[0]["name"], **_flags(parts[0]),
               "solved_each": each, "accuracy": each.count("1") / len(each),
               "solved": each.count("1") / len(each),
               "solved_pct": 100 * each.count("1") / len(each)}
        for k in ("nfe", "sequences", "steps"):
            if all(k in p for p in parts):
                row[k] = sum(p[k] * c for p, c in zip(parts, counts, strict=True)) / len(each)
        if all("wall_s" in p for p in parts):
            row["wall_s"] = sum(p["wall_s"] for p in parts)
        rows.append(row)
    return rows


def compare_pooled(rows: list[dict]) -> None:
    """Add paired columns to pooled rows, in place.

    Every row gets ``vs_seq`` (+gained/-lost against the ``confidence`` row) and
    ``seq_widths``; every row but plain EB's gets ``eb_at`` (EB's plain frontier interpolated
    at its passes), ``eb_diff``, ``vs_eb`` (paired against the plain EB row nearest in
    passes) and ``eb_widths``.
    """
    ref = next((r for r in rows if r["label"] == REFERENCE), None)
    if ref is None:
        raise UnmaskError(f"no {REFERENCE!r} row with solved_each in every puzzle set: "
                          "nothing to pair against")
    eb = sorted((r for r in rows if r["name"] == "eb" and not r["corrected"]
                 and not r["verified"]), key=lambda r: r["nfe"])
    for r in rows:
        gained, lost = paired_counts(r["solved_each"], ref["solved_each"])
        r["vs_seq"] = f"+{gained}/-{lost}"
        r["seq_widths"] = noise_widths(gained, lost)
    for r in rows:
        if r in eb or r is ref or not eb:
            continue
        if eb[0]["nfe"] <= r["nfe"] <= eb[-1]["nfe"]:
            r["eb_at"] = float(np.interp(r["nfe"], [e["nfe"] for e in eb],
                                         [e["solved_pct"] for e in eb]))
            r["eb_diff"] = r["solved_pct"] - r["eb_at"]
        near = min(eb, key=lambda e: abs(e["nfe"] - r["nfe"]))
        gained, lost = paired_counts(r["solved_each"], near["solved_each"])
        r["vs_eb"] = f"+{gained}/-{lost} vs {near['label']} ({near['nfe']:.1f})"
        r["eb_widths"] = noise_widths(gained, lost)


def pool_bench(paths: list[str | Path], out: str | Path, *, quiet: bool = False) -> dict:
    """Pool bench files of different puzzle sets into one bench file, written atomically.

    Args:
        paths: bench JSON files; at least two puzzle sets among them.
        out: the pooled file (.json); it can be plotted like a bench file.
        quiet: do not print the table.

    Returns:
        The pooled object: ``set`` (the sets joined by ``+``), ``puzzles``, ``sources``,
        ``rows`` (:func:`pooled_rows` with :func:`compare_pooled`'s columns).
    """
    out = check_output(out, paths, JSON_SUFFIXES)
    files = [load_bench(p) for p in paths]
    benches = list(dict.fromkeys(f.get("bench", "sudoku") for f in files))
    if len(benches) > 1:
        raise UnmaskError(f"the files are of different benches: {benches}")
    sets = list(dict.fromkeys(measured(f) for f in files))
    if len(sets) < 2:
        raise UnmaskError(f"the files measure one puzzle set ({sets[0]}); pooling needs two "
                          "or more")
    rows = pooled_rows(files)
    if not rows:
        raise UnmaskError("no label has solved_each in every puzzle set")
    compare_pooled(rows)
    pooled = {"bench": benches[0], "set": "+".join(sets),
              "puzzles": len(rows[0]["solved_each"]),
              "sources": [str(p) for p in paths], "rows": rows}
    atomic_write_text(out, json.dumps(pooled, indent=1))
    if not quiet:
        render_table(rows, [("sampler", "label", "s"), ("solved %", "solved_pct", ".2f"),
                            ("mean NFE", "nfe", ".2f"), ("vs seq. +/-", "vs_seq", "s"),
                            ("widths", "seq_widths", "+.1f"), ("EB at NFE", "eb_at", ".2f"),
                            ("diff", "eb_diff", "+.2f"),
                            ("paired vs nearest EB", "vs_eb", "s"),
                            ("widths", "eb_widths", "+.1f")],
                     f"{pooled['puzzles']} puzzles pooled from {len(sets)} sets")
    return pooled
