"""``unmask generate|infill --regex / --json-schema / --choice``: outputs in the language,
one-line refusals naming the flag (exit 2) before any pass."""

import json
import re

import pytest

from unmask.cli import main

pytest.importorskip("outlines_core")
PROMPT = ["--prompt", "Is 7 odd? Answer yes or no:", "--gen-length", "16", "--json"]


def _run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.startswith("{")], err


def test_generate_and_infill_under_each_flag(capsys, tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"n": {"type": "integer"}},
                                  "required": ["n"]}))
    code, [row], _ = _run(capsys, ["generate", *PROMPT, "--choice", "yes", "no"])
    assert code == 0 and row["text"] in ("yes", "no") and row["constraint"]["kind"] == "choice"
    code, [row], _ = _run(capsys, ["generate", *PROMPT, "--json-schema", str(schema)])
    assert code == 0 and isinstance(json.loads(row["text"])["n"], int)
    code, [row], _ = _run(capsys, ["infill", "--model", "text", "--template",
                                   "7 + 5 = <mask:3>.", "--regex", r"7 \+ 5 = [0-9]+\.",
                                   "--json"])
    assert code == 0 and re.fullmatch(r"7 \+ 5 = [0-9]+\.", row["text"])


@pytest.mark.parametrize("flags, message", [
    (["--regex", "("], "error: --regex: invalid pattern '('"),
    (["--regex", "a{40}"], "error: --regex: its shortest string takes 40 tokens"),
    (["--json-schema", "/no/such/file"], "error: --json-schema: cannot read"),
    (["--choice", "yes", "--min-new-tokens", "1"], "error: --min-new-tokens: not with"),
])
def test_refusals(capsys, flags, message):
    code, rows, err = _run(capsys, ["generate", *PROMPT, *flags])
    assert code == 2 and rows == [] and err.startswith(message) and err.count("\n") == 1


def test_a_schema_file_nested_past_the_parser_is_one_line(capsys, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    code, rows, err = _run(capsys, ["generate", *PROMPT, "--json-schema", str(deep)])
    assert code == 2 and rows == [] and err.count("\n") == 1
    assert err.startswith("error: --json-schema: ") and "is not JSON: nested too deep" in err
