"""`unmask results plot|pool` and `unmask.bench.report`: pooled numbers, pictures, bad input."""

from __future__ import annotations

import json

import pytest

from unmask.bench.report import plot_bench, pool_bench, pooled_rows
from unmask.cli import main
from unmask.errors import UnmaskError

pytest.importorskip("matplotlib")


def row(label: str, each: str, nfe: float, wall: float, **extra) -> dict:
    name = label.split(":")[0].split()[0]
    return {"label": label, "name": name, "solved_each": each,
            "solved": each.count("1") / len(each), "nfe": nfe, "wall_s": wall, **extra}


def bench_file(tmp_path, name: str, set_name: str, rows: list[dict]) -> str:
    path = tmp_path / name
    puzzles = len(rows[0]["solved_each"])
    path.write_text(json.dumps({"set": set_name, "puzzles": puzzles, "rows": rows}))
    return str(path)


@pytest.fixture
def two_sets(tmp_path):
    a = bench_file(tmp_path, "a.json", "hard", [
        row("confidence", "1101", 57.0, 40.0),
        row("eb gamma=0.1", "1001", 10.0, 8.0),
        row("eb gamma=0.3", "1000", 6.0, 5.0),
        row("mi-guided gamma=0.3", "1100", 8.0, 7.0),
        row("only-in-a", "1111", 3.0, 1.0),
    ])
    b = bench_file(tmp_path, "b.json", "val", [
        row("confidence", "11", 55.0, 20.0),
        row("eb gamma=0.1", "10", 12.0, 4.0),
        row("eb gamma=0.3", "00", 8.0, 3.0),
        row("mi-guided gamma=0.3", "11", 11.0, 3.5),
    ])
    return a, b


def test_pool_concatenates_outcomes_and_weights_passes(two_sets, tmp_path):
    out = tmp_path / "pooled.json"
    pooled = pool_bench(list(two_sets), out, quiet=True)
    assert json.loads(out.read_text()) == pooled
    assert pooled["set"] == "hard+val" and pooled["puzzles"] == 6
    rows = {r["label"]: r for r in pooled["rows"]}
    assert "only-in-a" not in rows  # a label must be in every set
    seq, mi = rows["confidence"], rows["mi-guided gamma=0.3"]
    assert seq["solved_each"] == "110111" and seq["solved"] == pytest.approx(5 / 6)
    assert seq["nfe"] == pytest.approx((57.0 * 4 + 55.0 * 2) / 6)
    assert seq["wall_s"] == pytest.approx(60.0)
    # mi-guided 110011 against sequential 110111: gains none, loses puzzle 4
    assert mi["vs_seq"] == "+0/-1" and mi["seq_widths"] == pytest.approx(-1.0)
    # pooled EB frontier: gamma=0.3 (6.67 passes, 16.7%) and gamma=0.1 (10.67, 50%)
    mi_nfe = (8.0 * 4 + 11.0 * 2) / 6
    eb03, eb01 = (6.0 * 4 + 8.0 * 2) / 6, (10.0 * 4 + 12.0 * 2) / 6
    expect = 100 / 6 + (mi_nfe - eb03) / (eb01 - eb03) * (50 - 100 / 6)
    assert mi["eb_at"] == pytest.approx(expect)
    assert mi["eb_diff"] == pytest.approx(mi["solved_pct"] - expect)
    # nearest EB row is gamma=0.1 (10.67 passes): 110011 vs 100110 -> +2/-1
    assert mi["vs_eb"].startswith("+2/-1 vs eb gamma=0.1")
    assert "eb_at" not in rows["eb gamma=0.1"]  # EB's own rows make the frontier


def test_pool_merges_files_of_one_set_first_row_wins(two_sets, tmp_path):
    a, b = two_sets
    extra = bench_file(tmp_path, "a2.json", "hard", [row("confidence", "0000", 1.0, 1.0),
                                                     row("topk k=7", "0001", 9.0, 2.0)])
    rows = {r["label"]: r for r in pooled_rows(
        [json.loads(open(p).read()) for p in (a, extra, b)])}
    assert rows["confidence"]["solved_each"] == "110111"  # a.json's row, not a2.json's
    assert "topk k=7" not in rows  # not measured on the second set


def test_pool_cli_writes_and_refuses_one_set(two_sets, tmp_path, capsys):
    a, b = two_sets
    out = tmp_path / "p.json"
    assert main(["results", "pool", a, b, "--out", str(out), "--quiet"]) == 0
    assert "6 puzzles" in capsys.readouterr().out and out.is_file()
    out2 = tmp_path / "one.json"
    assert main(["results", "pool", a, "--out", str(out2)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "one puzzle set" in err and not out2.exists()


@pytest.mark.parametrize("x", ["passes", "wall"])
def test_plot_writes_a_png(two_sets, tmp_path, x):
    out = tmp_path / f"{x}.png"
    n = plot_bench([two_sets[0]], out, x=x, target=5, xlim=(1, 60), ylim=(0, 100))
    assert n == 5 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("suffix, magic", [(".pdf", b"%PDF"), (".svg", b"<?xml")])
def test_plot_format_follows_the_extension(two_sets, tmp_path, capsys, suffix, magic):
    out = tmp_path / f"p{suffix}"
    assert main(["results", "plot", two_sets[0], "--out", str(out), "--threads", "1"]) == 0
    assert out.read_bytes().startswith(magic)


def test_plot_of_a_pooled_file(two_sets, tmp_path, capsys):
    pooled = tmp_path / "pooled.json"
    pool_bench(list(two_sets), pooled, quiet=True)
    out = tmp_path / "pooled.png"
    assert main(["results", "plot", str(pooled), "--out", str(out), "--x", "wall"]) == 0
    assert "4 rows" in capsys.readouterr().out and out.is_file()


def test_plot_tags_keep_both_files_rows(tmp_path):
    a = bench_file(tmp_path, "a.json", "hard", [row("confidence", "10", 57.0, 4.0)])
    b = bench_file(tmp_path, "b.json", "hard", [row("confidence", "11", 57.0, 4.0)])
    assert plot_bench([a, b], tmp_path / "one.png") == 1  # same label: the first file's
    assert plot_bench([a, b], tmp_path / "two.png", tags=["old", "new"]) == 2


@pytest.mark.parametrize("out, argv, message", [
    ("p.bmp", [], "the extension must be .png, .pdf or .svg"),
    ("missing/p.png", [], "does not exist"),
    ("a.json", [], "the extension must be .png, .pdf or .svg"),
    ("p.png", ["--target", "5", "--samplers", "eb gamma=0.1"], "no 'confidence' row"),
    ("p.png", ["--xlim", "10", "1"], "--xlim"),
    ("p.png", ["--x", "wall", "--references"], "--references"),
    ("p.png", ["--tags", "one", "two"], "--tags"),
])
def test_plot_bad_input_one_line_no_file(two_sets, tmp_path, capsys, out, argv, message):
    a = two_sets[0]
    target = tmp_path / out
    assert main(["results", "plot", a, "--out", str(target), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not target.exists() or target == tmp_path / "a.json"


def test_output_equal_to_an_input_is_refused(two_sets):
    a, b = two_sets
    with pytest.raises(UnmaskError, match="also an input"):
        pool_bench([a, b], a)


def test_plot_refuses_mixed_sets_and_bad_files(two_sets, tmp_path):
    a, b = two_sets
    with pytest.raises(UnmaskError, match="different puzzle sets"):
        plot_bench([a, b], tmp_path / "x.png")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rows": [{"label": "x", "name": "x", "nfe": 1}]}))
    with pytest.raises(UnmaskError, match="lacks 'solved'"):
        plot_bench([str(bad)], tmp_path / "x.png")
    with pytest.raises(UnmaskError, match="not found"):
        plot_bench([str(tmp_path / "nope.json")], tmp_path / "x.png")
    with pytest.raises(UnmaskError, match="no positive 'wall_s'"):
        bench = bench_file(tmp_path, "nowall.json", "hard", [
            {k: v for k, v in row("confidence", "1", 57.0, 1.0).items() if k != "wall_s"}])
        plot_bench([bench], tmp_path / "x.png", x="wall")


@pytest.mark.parametrize("command", ["plot", "pool"])
@pytest.mark.parametrize("field, value", [("nfe", "NaN"), ("wall_s", "Infinity"),
                                          ("solved", "-Infinity"), ("nfe", '"57"'),
                                          ("wall_s", "true")])
def test_non_finite_or_non_numeric_values_are_one_line(two_sets, tmp_path, capsys, command,
                                                       field, value):
    """A bench file holding NaN or Infinity (Python's JSON extension) or a non-number is
    refused in one line naming the file, never drawn or pooled."""
    a, b = two_sets
    text = json.loads(open(a).read())
    text["rows"][1][field] = "__X__"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(text).replace('"__X__"', value))
    out = tmp_path / ("p.png" if command == "plot" else "p.json")
    files = [str(bad)] if command == "plot" else [str(bad), b]
    assert main(["results", command, *files, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and "Traceback" not in err
    assert not out.exists()
