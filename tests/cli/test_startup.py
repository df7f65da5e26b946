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
    assert [m for m in got["heavy"] if m.startswith("unmask.commands.")] == [
        "unmask.commands.arg_types", "unmask.commands.engine_flags", "unmask.commands.generate",
        "unmask.commands.paths", "unmask.commands.threads"]


def test_the_registry_names_every_command_of_every_module_with_its_help():
    """A command module's commands are all in COMMAND_MODULES, under that module, with the
    help the module gives (the table is what --help lists before importing anything)."""
    import unmask.commands as package
    from unmask.commands.registry import COMMAND_MODULES, COMMANDS, load_commands

    load_commands()
    for mod in pkgutil.iter_modules(package.__path__):  # modules the table may have missed
        __import__(f"unmask.commands.{mod.name}")
    assert set(COMMANDS) == set(COMMAND_MODULES)
    for path, (help_text, _, run) in COMMANDS.items():
        assert COMMAND_MODULES[path] == (run.__module__.rsplit(".", 1)[1], help_text), path
