"""The infill template grammar and the prompt/template readers under generated input:
arbitrary Unicode (other scripts' digits in ``<mask:N>``, surrogates, NUL), bytes that are not
UTF-8 on the command line, huge counts, and JSON nested to any depth in ``--file`` (infill,
generate) and in a bench file (``results plot``). Each either works as the grammar says or is
one ``error:`` line."""

import json
import os

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from unmask.errors import UnmaskError
from unmask.infill import MASK_MARK, encode_residues, split_template
from unmask.protein.tokens import MASK_ID, PROTEIN_RESIDUES
from unmask.validation import text_problem

FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
FEW = settings(max_examples=12, deadline=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture])

COUNTS = (st.integers(-3, 10**12).map(str) | st.sampled_from(
    ["²", "①", "٣", "३", "１", "1.5", " 2 ", "0x3", "", "-1", "+2", "1e3", "\x00"])
    | st.text(max_size=4))
MARKS = st.sampled_from(["<mask>"]) | COUNTS.map(lambda c: f"<mask:{c}>")
CHUNKS = st.text(max_size=8) | st.sampled_from(["\ud800", "\udcff", "\x00", "<mask", ">",
                                                "EVQLV", "<", "mask:"])
TEMPLATES = st.lists(CHUNKS | MARKS, min_size=1, max_size=6).map("".join)


@FAST
@given(template=TEMPLATES, limit=st.integers(1, 300))
@example(template="EV<mask:²>QL", limit=300)
@example(template="<mask:1000000000>", limit=300)
@example(template="the \udcff<mask>", limit=300)
@example(template="<mask:0\x1f>", limit=1)
@example(template="<mask:\x1f3>", limit=10)
def test_any_template_splits_as_the_grammar_says_or_is_one_line(template, limit):
    try:
        pieces = split_template(template, 0, limit)
    except UnmaskError as e:
        line = str(e)
        assert "\n" not in line and line.startswith("template 0: ")
        return
    assert text_problem(template) is None  # no surrogate, no NUL
    counts = [m.group(1) for m in MASK_MARK.finditer(template)]
    assert all(c is None or c.strip(" \t").isascii() and c.strip(" \t").isdigit() for c in counts)
    assert sum(p for p in pieces if isinstance(p, int)) <= limit
    assert "".join(p for p in pieces if isinstance(p, str)) == MASK_MARK.sub("", template)
    assert sum(p for p in pieces if isinstance(p, int)) == sum(
        1 if c is None else int(c) for c in counts)


@FAST
@given(template=TEMPLATES)
def test_any_residue_template_encodes_to_residues_and_masks_or_one_line(template):
    try:
        ids = encode_residues(template, PROTEIN_RESIDUES, 3, 128)
    except UnmaskError as e:
        assert "\n" not in str(e) and str(e).startswith("template 3: ")
        return
    assert len(ids) <= 128 + len(template) and all(0 <= i <= MASK_ID for i in ids)


@FEW
@given(raw=st.binary(min_size=1, max_size=12))
@example(raw=b"MKV\xff\xfe<mask:2>L")
@example(raw=b"MKV<mask:\xc2\xb2>L")
def test_any_bytes_on_the_command_line_fill_or_are_one_line(run, raw):
    """A template given as bytes (argv decodes what is not UTF-8 as surrogate escapes)."""
    template = os.fsdecode(b"MK" + raw + b"<mask:2>")
    r = run("infill", "--model", "protein", "--template", template, "--threads", 1, "--json")
    if r.ok_or_refused():
        row = json.loads(r.out)
        assert row["text"].startswith("MK") and "<" not in row["text"]
    else:
        assert "template 0" in r.err


def _nested(depth: int, opener: str) -> str:
    if opener == "[":
        return "[" * depth + '"x <mask>"' + "]" * depth
    return '{"template": ' * depth + '"x <mask>"' + "}" * depth


@FEW
@given(depth=st.integers(1, 200_000), opener=st.sampled_from(["[", "{"]),
       command=st.sampled_from(["infill", "generate"]))
@example(depth=100_000, opener="{", command="infill")
@example(depth=100_000, opener="[", command="generate")
def test_json_lines_nested_to_any_depth_are_one_line(run, tmp_path_factory, depth, opener,
                                                     command):
    path = tmp_path_factory.mktemp("deep") / "in.jsonl"
    path.write_text(_nested(depth, opener) + "\n")
    # refused while reading the file, before any model is loaded (the model does not exist)
    line = run(command, "--model", "no-such-model", "--file", path).refused()
    # infill reads a line starting with '[' as a template itself, and one object as JSON
    plain = command == "infill" and (opener == "[" or depth == 1)
    assert ("no-such-model" in line) if plain else line.startswith("error: --file: line 1")


@FEW
@given(depth=st.integers(1, 200_000))
@example(depth=100_000)
def test_a_bench_file_nested_to_any_depth_is_one_line(run, tmp_path_factory, depth):
    folder = tmp_path_factory.mktemp("deep")
    (folder / "b.json").write_text("[" * depth + "]" * depth)
    line = run("results", "plot", folder / "b.json", "--out", folder / "p.png").refused()
    assert "bench file" in line and not (folder / "p.png").exists()


ROW_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.floats(),
                       st.text(max_size=3), st.lists(st.integers(), max_size=2),
                       st.just(float("inf")))


@FEW
@given(key=st.sampled_from(["label", "name", "nfe", "accuracy", "wall_s", "sequences",
                            "task", "temperature"]), value=ROW_VALUES)
@example(key="label", value=["a", "b"])
@example(key="label", value=None)
@example(key="nfe", value=float("inf"))
@example(key="accuracy", value=float("inf"))
def test_any_bench_row_value_plots_or_is_one_line(run, tmp_path_factory, key, value):
    folder = tmp_path_factory.mktemp("rows")
    rows = [{"label": "confidence", "name": "confidence", "accuracy": 0.5, "nfe": 10.0,
             "wall_s": 1.0}, {"label": "topk", "name": "topk", "accuracy": 0.6, "nfe": 5.0,
                              "wall_s": 0.5}]
    rows[1][key] = value
    text = json.dumps({"bench": "sudoku", "set": "medium", "puzzles": 2, "rows": rows})
    (folder / "b.json").write_text(text)  # 1e999 is written as Infinity: refused as such
    (folder / "c.json").write_text(text.replace("Infinity", "1e999"))
    for name in ("b.json", "c.json"):
        r = run("results", "plot", folder / name, "--out", folder / "p.png")
        if r.ok_or_refused():
            assert not isinstance(value, list) and value != float("inf")
            assert (folder / "p.png").read_bytes().startswith(b"\x89PNG")
            (folder / "p.png").unlink()
        else:
            assert not (folder / "p.png").exists()


@pytest.mark.parametrize("prompt, needle", [("the \udcff cat", r"not UTF-8 \(0xff\)"),
                                            ("the \ud800 cat", "lone surrogate"),
                                            ("the \x00 cat", "NUL")])
def test_a_prompt_that_is_not_text_is_one_line(prompt, needle):
    from unmask.generate import check_lengths

    with pytest.raises(UnmaskError, match=needle):
        check_lengths(["fine", prompt], 4, None, None, 0)
