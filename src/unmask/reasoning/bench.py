"""Decoding the reasoning tasks with any sampler and scoring each answer by its task's
verifier."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from unmask.bench import BenchEntry, add_paired_vs, aup
from unmask.errors import require
from unmask.generate import generate
from unmask.reasoning.tasks import Item, ReasoningTask

#: bench problems lie below this generator seed (training and weight selection start there)
SELECT_SEED = 900_000


@dataclass(frozen=True)
class Solved:
    """One decoded problem: the answer text, whether the verifier accepts it, and the cost."""

    item: Item
    answer: str
    correct: bool
    nfe: int
    sequences: int
    cumulative_entropy: float
    wall_s: float


def solve(model, task: ReasoningTask, items: list[Item], sampler="confidence", *,
          temperature: float = 0.0, seed: int = 0, batch_size: int = 32,
          confidence: str = "draw") -> list[Solved]:
    """Decode ``items`` (problems of ``task``) with ``sampler``, ``batch_size`` prompts at a
    time in order of prompt length (less padding); the batch of the k-th shortest prompts
    decodes with seed ``seed + k // batch_size * batch_size``. wall_s is each item's share of
    its batch's wall time. Results are in the order of ``items``."""
    order = sorted(range(len(items)), key=lambda i: (len(items[i].prompt), i))
    gens = generate(model, prompts=[items[i].prompt for i in order], sampler=sampler,
                    gen_length=task.gen_length, temperature=temperature, seed=seed,
                    batch_size=batch_size, confidence=confidence)
    out: list[Solved | None] = [None] * len(items)
    for k, (i, g) in enumerate(zip(order, gens, strict=True)):
        rows = min(batch_size, len(items) - k // batch_size * batch_size)
        text = g.text.strip()
        out[i] = Solved(items[i], text, task.correct(text, items[i]), g.nfe, g.sequences,
                        g.cumulative_entropy, g.wall_s / rows)
    return out


#: every sampler that needs no extra file, at its usual settings, fixed-count parallel
#: decoding, and verified drafts (``mi-guided`` needs an MI estimator of the model: add it with
#: ``--samplers mi-guided:estimator=DIR``)
DEFAULT_SPECS = [
    "confidence", "entropy", "margin", "uniform", "klass", "info-gain", "lookum",
    "eb:gamma=0.1", "eb:gamma=1.0", "threshold:tau=0.9", "dus", "topk:k=2", "topk:k=4",
    "topk:k=4+verify", "eb:gamma=1.0,order=confidence+verify=0.002",
]
#: the pooled rows' task name
POOLED = "pooled"


def _row(entry, task: str, temperature: float, gen_length: float, solved: list[Solved],
         confidence: str = "draw") -> dict:
    n = len(solved)
    nfe = float(np.mean([s.nfe for s in solved]))
    return {
        "label": entry.label + (" conf=max" if confidence == "max" else ""),
        "name": entry.name, "verified": entry.verified, "confidence": confidence,
        "task": task, "temperature": temperature, "n_items": n,
        "accuracy": float(np.mean([s.correct for s in solved])),
        "solved_each": "".join("1" if s.correct else "0" for s in solved),
        "nfe": nfe, "sequences": float(np.mean([s.sequences for s in solved])),
        "gen_length": gen_length, "tokens_per_forward": gen_length / nfe,
        "cumulative_entropy": float(np.mean([s.cumulative_entropy for s in solved])),
        "wall_s": float(sum(s.wall_s for s in solved)),
    }


def run_reasoning_bench(model, tasks: list[ReasoningTask], entries: list[BenchEntry],
                        limit: int, temperatures: tuple[float, ...] = (0.0,), seed: int = 0,
                        progress=None, confidence: str = "draw") -> list[dict]:
    """Decode ``limit`` problems of every task (generator seed ``seed``) with every entry at
    every temperature (``confidence``: :class:`~unmask.decode.DecodeConfig`; rows decoded
    with ``"max"`` say so in their label and ``confidence``).

    Returns one row per (entry, temperature, task), then per (entry, temperature) the
    ``pooled`` row over the tasks: accuracy (the verifier's full credit), solved_each (a
    '0'/'1' per problem), nfe and sequences (means per problem), tokens_per_forward
    (gen_length / nfe; the gen_length positions count, trailing EOS included),
    cumulative_entropy (mean nats), wall_s (total), and gained_vs_ref / lost_vs_ref against
    sequential ``confidence`` at the same temperature when it is among the entries.
    """
    require(isinstance(limit, int) and limit >= 1, f"limit: must be an integer >= 1, got "
                                                   f"{limit!r}")
    require(0 <= seed and seed + limit <= SELECT_SEED,
            f"seed: problems {seed}..{seed + limit - 1} must lie in [0, {SELECT_SEED}) "
            "(the training and selection problems start there)")
    require(len(temperatures) >= 1, "temperatures: need at least one")
    for t in temperatures:
        require(t >= 0, f"temperatures: must be >= 0, got {t}")
    problems = {t.name: t.items(limit, seed) for t in tasks}
    solve(model, tasks[0], problems[tasks[0].name][:2])  # one-off set-up costs, untimed
    rows, done = [], 0
    for temperature in temperatures:
        group = []
        for entry in entries:
            parts = []
            for task in tasks:
                solved = solve(model, task, problems[task.name], entry.build(),
                               temperature=temperature, seed=seed, confidence=confidence)
                parts.append(_row(entry, task.name, temperature, task.gen_length, solved,
                                  confidence))
                done += 1
                if progress is not None:
                    progress(done)
            group += parts + [pool_rows(parts)]
        ref = {r["task"]: r for r in group
               if r["label"].removesuffix(" conf=max") == "confidence"}
        for task in [t.name for t in tasks] + [POOLED]:
            add_paired_vs([r for r in group if r["task"] == task], ref.get(task))
        rows += group
    return rows


def pool_rows(parts: list[dict]) -> dict:
    """One entry's rows over several tasks as one: solved_each concatenated, nfe, sequences
    and cumulative entropy weighted by problem count, gen_length likewise (so
    tokens_per_forward is total positions over total passes), wall_s summed."""
    n = sum(p["n_items"] for p in parts)
    each = "".join(p["solved_each"] for p in parts)

    def mean(key: str) -> float:
        return sum(p[key] * p["n_items"] for p in parts) / n

    nfe, gen = mean("nfe"), mean("gen_length")
    return {**{k: parts[0][k] for k in ("label", "name", "verified", "confidence",
                                        "temperature")},
            "task": POOLED, "n_items": n, "accuracy": each.count("1") / n,
            "solved_each": each, "nfe": nfe, "sequences": mean("sequences"),
            "gen_length": gen, "tokens_per_forward": gen / nfe,
            "cumulative_entropy": mean("cumulative_entropy"),
            "wall_s": sum(p["wall_s"] for p in parts)}


def aup_by_temperature(rows: list[dict]) -> dict[float, float | None]:
    """The AUP (:func:`unmask.bench.aup`) of the pooled rows at each temperature."""
    temps = dict.fromkeys(r["temperature"] for r in rows)
    return {t: aup([r for r in rows if r["task"] == POOLED and r["temperature"] == t],
                   x="tokens_per_forward", y="accuracy") for t in temps}
