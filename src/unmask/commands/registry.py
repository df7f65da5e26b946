"""The registry of ``unmask`` subcommands, by name: :data:`COMMAND_MODULES` says which module
defines each command and its one-line help, so that ``unmask --help``, ``unmask NOUN --help``
and a mistyped command answer without importing any command module (nor torch); a module is
imported when its command runs. A command's flags are added by ``VERB(parser)`` in
``unmask.commands.flags.<module>`` (:func:`flags_of`); its module registers its ``run(args)``
under its name path with :func:`command` (:func:`run_of`)."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

#: name path -> (module under unmask.commands, help); one line per command
COMMAND_MODULES: dict[tuple[str, ...], tuple[str, str]] = {
    ("antibody", "bench"): ("antibody", "benchmark every sampler on antibody heavy chains: CDR infilling, random masking, generation"),  # noqa: E501
    ("arithmetic", "bench"): ("arithmetic", "benchmark every sampler on multiplication: accuracy, NFE, sequences, entropy"),  # noqa: E501
    ("arithmetic", "train"): ("arithmetic", "train the multiplication MDM (checkpoints, --resume)"),  # noqa: E501
    ("corrector", "train"): ("corrector", "train the corrector (finds wrong decoded tokens) on the states a decoder visits"),  # noqa: E501
    ("demo",): ("demo", "solve hard Sudokus with several samplers on the shipped model"),
    ("generate",): ("generate", "generate text with a Hugging Face masked or diffusion LM folder"),  # noqa: E501
    ("infill",): ("infill", "fill the masked positions of templates (<mask>, <mask:N>) with any model"),  # noqa: E501
    ("image", "bench"): ("image", "benchmark every sampler on class-conditional digits: FID, IS, class accuracy, NFE, wall time"),  # noqa: E501
    ("image", "train"): ("image", "train the class-conditional digits MDM (checkpoints, --resume)"),  # noqa: E501
    ("image", "train-classifier"): ("image", "train the digit classifier whose features the image metrics use"),  # noqa: E501
    ("mi", "eval"): ("mi", "score the MI estimator against ground-truth labels, and its cost"),  # noqa: E501
    ("mi", "fit"): ("mi", "label, train and evaluate an MI estimator for any model within a CPU budget (read by mi-guided:estimator=OUT)"),  # noqa: E501
    ("mi", "label"): ("mi", "write ground-truth pairwise MI labels (perturbation probing)"),
    ("mi", "map"): ("mi", "draw the pairwise MI map of a Sudoku puzzle (ground truth and/or estimator) with its structure score"),  # noqa: E501
    ("mi", "train"): ("mi", "train the neural MI estimator on ground-truth labels"),
    ("protein", "bench"): ("protein", "composition JSD vs forward passes for every sampler on protein generation"),  # noqa: E501
    ("protein", "train"): ("protein", "train the protein MDM (checkpoints, --resume)"),
    ("reasoning", "bench"): ("reasoning", "benchmark samplers on the reasoning tasks: accuracy by each task's verifier, NFE, tokens per pass, cumulative entropy, wall time, AUP"),  # noqa: E501
    ("reasoning", "train"): ("reasoning", "train the character-level text MDM on the reasoning tasks (checkpoints, --resume)"),  # noqa: E501
    ("results", "plot"): ("results", "Pareto plot (solved %% against passes or wall-clock time) of bench JSON files"),  # noqa: E501
    ("results", "pool"): ("results", "pool bench JSON files of different puzzle sets: outcomes concatenated, paired against sequential decoding and EB's frontier"),  # noqa: E501
    ("serve",): ("serve", "serve every decoder behind an OpenAI-compatible API (completions, chat, infill; streaming, exact dynamic batching)"),  # noqa: E501
    ("sudoku", "bench"): ("sudoku", "solved %% vs forward passes for every sampler on Sudoku"),
    ("sudoku", "solve"): ("sudoku", "solve Sudoku puzzles with the MDM and a sampler"),
    ("sudoku", "train"): ("sudoku", "train the Sudoku MDM (checkpoints every few minutes)"),
}

#: name path (e.g. ("sudoku", "train")) -> run(args), for the commands whose modules are
#: loaded (:func:`run_of`)
RUNS: dict[tuple[str, ...], Callable] = {}

#: help of each noun (the first word of ``unmask NOUN VERB``)
GROUPS = {
    "sudoku": "Sudoku: solve puzzles, train the MDM, benchmark samplers",
    "mi": "pairwise mutual information: label by probing, train/evaluate the estimator, maps",
    "corrector": "the corrector that finds wrong decoded tokens",
    "protein": "protein generation: train the MDM, benchmark samplers",
    "arithmetic": "the multiplication task: train the MDM, benchmark samplers",
    "image": "class-conditional digits: train the MDM and its classifier, benchmark samplers",
    "reasoning": "text reasoning tasks: train the text MDM, benchmark samplers",
    "results": "bench result files: plot, pool",
    "antibody": "antibody heavy chains: benchmark samplers",
}


def flags_of(path: tuple[str, ...]) -> Callable[[argparse.ArgumentParser], None]:
    """The function adding the flags of command ``path``: ``VERB`` (``-`` read as ``_``) of
    ``unmask.commands.flags.<module>``; only that flags module is imported."""
    module = importlib.import_module(f"unmask.commands.flags.{COMMAND_MODULES[path][0]}")
    return getattr(module, path[-1].replace("-", "_"))


def run_of(path: tuple[str, ...]) -> Callable:
    """The ``run(args)`` of command ``path``, its command module imported."""
    importlib.import_module(f"unmask.commands.{COMMAND_MODULES[path][0]}")
    return RUNS[path]


def command(*path: str):
    """Register ``run(args)`` as the command ``path`` (its help is in
    :data:`COMMAND_MODULES`, its flags in ``unmask.commands.flags``)."""
    if path not in COMMAND_MODULES:
        raise RuntimeError(f"command {' '.join(path)!r} is not in COMMAND_MODULES")

    def wrap(run: Callable) -> Callable:
        RUNS[path] = run
        return run

    return wrap
