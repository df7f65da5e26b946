"""The command line answers ``--help``, ``--version``, ``NOUN --help`` and a mistyped command
before torch (or any command module) is imported; commands are registered by name and their
module is imported when they run."""

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import unmask

SRC = str(Path(unmask.__file__).resolve().parents[1])

PROBE = """
import contextlib, io, json, sys
import unmask.cli
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    rc = unmask.cli.main(json.loads(sys.argv[1]))
heavy = sorted(m for m in sys.modules if m == "torch" or m.startswith("unmask.commands.")
               and m != "unmask.commands.registry")
print(json.dumps({"rc": rc, "heavy": heavy, "out": out.getvalue(), "err": err.getvalue()}))
"""


def probe(argv: list[str]) -> dict:
    """Run ``unmask.cli.main(argv)`` in a fresh interpreter: its status, output, and which of
    torch and the command modules it imported."""
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], capture_output=True,
                          text=True, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("argv, rc, needle", [
    (["--help"], 0, "Dependency-aware decoding"),
    (["--version"], 0, f"unmask {unmask.__version__}"),
    (["sudoku", "--help"], 0, "solve Sudoku puzzles with the MDM and a sampler"),
    (["mi", "--help"], 0, "write ground-truth pairwise MI labels"),
    (["sudok", "solve"], 2, "invalid choice: 'sudok'"),
    (["sudoku"], 2, "required"),
    ([], 2, "required"),
])
def test_help_version_and_bad_commands_do_not_import_torch(argv, rc, needle):
    got = probe(argv)
    assert got["rc"] == rc and got["heavy"] == []
    assert needle in got["out"] + got["err"]
    if rc == 2:
        assert len(got["err"].strip().splitlines()) == 1


def test_a_command_imports_its_own_module_only():
    got = probe(["generate", "--help"])
    assert got["rc"] == 0 and "--sampler" in got["out"]
    assert [m for m in got["heavy"] if not m.startswith("unmask.commands.flags")] == []


LEAVES_PROBE = """
import contextlib, io, json, sys
from unmask.cli import build_parser
from unmask.commands.registry import COMMAND_MODULES
paths = list(COMMAND_MODULES)
with contextlib.redirect_stdout(io.StringIO()):
    build_parser(paths)  # every such leaf's flags added
print(json.dumps({"n": len(paths), "heavy": sorted(m for m in sys.modules if m.split(".")[0] in
                  ("torch", "numpy", "numba") or m.startswith("unmask.commands.")
                  and not m.startswith(("unmask.commands.flags", "unmask.commands.registry")))}))
"""


def test_every_leaf_parser_builds_without_torch_numpy_or_its_command_module():
    """Building the parser of every leaf command (all their flags added, as --help does)
    imports neither torch, numpy nor numba, nor any command module (only the flags
    modules)."""
    done = subprocess.run([sys.executable, "-c", LEAVES_PROBE],
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["n"] == 25 and got["heavy"] == []


@pytest.mark.parametrize("noun", ["antibody", "arithmetic", "image", "protein", "reasoning",
                                  "sudoku"])
def test_a_bench_runs_the_task_its_flags_were_declared_by(noun):
    """``unmask NOUN bench`` parses with the declared bench's flags and runs the bench:
    the bench is that declaration's subclass, so both have the same flags and defaults."""
    import importlib

    declared = importlib.import_module(f"unmask.{noun}.bench_task").DECLARED
    task = importlib.import_module(f"unmask.{noun}.bench").BENCH_TASK
    assert isinstance(task, type(declared)) and type(task) is not type(declared)
    assert task.name == declared.name == noun


@pytest.mark.parametrize("where, name", [("unmask.decode:DecodeConfig", "temperature"),
                                         ("unmask.hooks:corrector_hooks", "threshold"),
                                         ("unmask.hooks:corrector_hooks", "max_remasks"),
                                         ("unmask.reasoning.train:ReasoningData", "pool")])
def test_a_default_read_from_source_is_the_imported_one(where, name):
    import dataclasses
    import importlib
    import inspect

    from unmask.commands.flags.types import default_of

    module, attr = where.split(":")
    target = getattr(importlib.import_module(module), attr)
    if dataclasses.is_dataclass(target):
        want = next(f.default for f in dataclasses.fields(target) if f.name == name)
    else:
        want = inspect.signature(target).parameters[name].default
    assert default_of(where, name) == want


def test_a_constant_read_from_source_is_the_imported_one():
    from unmask.bench.report import X_AXES
    from unmask.commands.flags.types import literal_of
    from unmask.decode import CONFIDENCE

    assert literal_of("unmask.decode:CONFIDENCE") == CONFIDENCE
    assert literal_of("unmask.bench.report:X_AXES") == X_AXES


def test_the_registry_names_every_command_with_its_flags_and_run():
    """Every command module's commands are in COMMAND_MODULES, under that module; every
    entry has its flags function (``VERB`` in ``unmask.commands.flags.<module>``) and its
    registered run."""
    import unmask.commands as package
    from unmask.commands.registry import COMMAND_MODULES, RUNS, flags_of, run_of

    for path in COMMAND_MODULES:
        assert callable(flags_of(path)) and callable(run_of(path)), path
    for mod in pkgutil.iter_modules(package.__path__):  # modules the table may have missed
        __import__(f"unmask.commands.{mod.name}")
    assert set(RUNS) == set(COMMAND_MODULES)
    for path, run in RUNS.items():
        assert COMMAND_MODULES[path][0] == run.__module__.rsplit(".", 1)[1], path
