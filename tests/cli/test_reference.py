"""docs/cli.md is the argparse help of the commands as they are."""

import contextlib
import importlib.util
import io
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_cli_reference_is_up_to_date():
    spec = importlib.util.spec_from_file_location("cli_reference",
                                                  ROOT / "scripts" / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "cli.md").read_text() == module.render(), \
        "docs/cli.md is stale: run python scripts/cli_reference.py"


def test_every_command_of_the_grammar_is_registered():
    from unmask.cli import main
    from unmask.commands.registry import COMMAND_MODULES as COMMANDS

    assert {" ".join(p) for p in COMMANDS} >= {
        "sudoku solve", "sudoku train", "sudoku bench", "mi label", "mi train", "mi eval",
        "mi map", "corrector train", "protein train", "protein bench", "arithmetic train",
        "arithmetic bench", "demo"}
    assert not any(p[0] in ("train", "bench") for p in COMMANDS)  # the old spellings
    for path in COMMANDS:  # every command computes, and takes --threads
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main([*path, "--help"]) == 0
        assert "--threads N" in buf.getvalue(), path
