import json

import pytest

from unmask.cli import main


@pytest.fixture(scope="module")
def tiny(tiny_digits):
    return tiny_digits


def _bench(tiny, *extra):
    return ["image", "bench", "--model", str(tiny / "mdm"), "--classifier", str(tiny / "clf"),
            "--quiet", "--rounds", "5", *extra]


def test_bench_end_to_end_writes_json_and_grid(tiny, tmp_path, capsys):
    out, grid = tmp_path / "bench.json", tmp_path / "grid.png"
    rc = main(_bench(tiny, "--limit", "6", "--samplers", "topk:k=16", "topk:k=64+verify",
                     "info-gain:k=16", "--temperatures", "0,1",
                     "--json", str(out), "--grid", str(grid)))
    assert rc == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    floor = next(line for line in printed.splitlines() if "(real floor)" in line)
    cells = [c.strip() for c in floor.split("│")[1:-1]]
    assert cells[2] == "-"  # no FID difference for real data; IS in its own column
    assert cells[3].startswith(f"{data['real']['floor']['inception_score']:.2f}")
    rows = data["rows"]
    assert [r["label"] for r in rows[:3]] == ["topk k=16 T=0", "topk k=64 +verify T=0",
                                              "info-gain k=16 T=0"]
    assert len(rows) == 6
    for r in rows:
        for key in ("fid", "inception_score", "class_accuracy", "nfe", "tokens_per_forward",
                    "wall_s", "fid_se"):
            assert key in r
        assert r["fid"] >= 0 and 1.0 <= r["inception_score"] <= 10.0
        assert 0.0 <= r["class_accuracy"] <= 1.0
        assert r["tokens_per_forward"] == pytest.approx(64 / r["nfe"])
    for t in ("T=0", "T=1"):  # FID minus the first row's at the same temperature
        first, other = [r for r in rows if r["label"].endswith(t)][:2]
        assert first["fid_vs_first"] == 0.0 and first["fid_vs_first_se"] == 0.0
        assert other["fid_vs_first"] == pytest.approx(other["fid"] - first["fid"], abs=1e-9)
    by = {r["label"]: r for r in rows}
    assert by["topk k=16 T=1"]["nfe"] == 4 and by["info-gain k=16 T=1"]["nfe"] <= 5
    assert by["info-gain k=16 T=1"]["sequences"] > by["info-gain k=16 T=1"]["nfe"]
    assert data["real"]["ceiling"]["fid"] >= 0
    assert grid.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_confidence_max_labels_its_rows_and_leaves_margin_unchanged(tiny, tmp_path):
    rows = {}
    for confidence in ("draw", "max"):
        out = tmp_path / f"{confidence}.json"
        assert main(_bench(tiny, "--limit", "4", "--samplers", "margin", "confidence",
                           "--confidence", confidence, "--json", str(out))) == 0
        rows[confidence] = json.loads(out.read_text())["rows"]
    assert [r["label"] for r in rows["max"]] == ["margin conf=max", "confidence conf=max"]
    assert [r["confidence"] for r in rows["max"]] == ["max", "max"]
    # margin never reads the confidence score: the same images either way
    assert rows["max"][0]["fid"] == rows["draw"][0]["fid"]


@pytest.mark.parametrize("extra, field", [
    (["--limit", "1"], "--limit"),
    (["--samplers", "nope"], "--samplers"),
    (["--grid", "missing/g.png"], "--grid"),
    (["--grid", "."], "--grid"),
    (["--grid", "g.jpg"], "--grid"),
    (["--temperatures", "x"], "--temperatures"),
])
def test_bench_refuses_bad_input(tiny, tmp_path, monkeypatch, capsys, extra, field):
    monkeypatch.chdir(tmp_path)
    assert main(_bench(tiny, "--limit", "2", "--json", "out.json", *extra)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and field in err and "\n" not in err
    assert not (tmp_path / "out.json").exists()
