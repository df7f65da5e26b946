"""`unmask bench protein` and `unmask mi label` on an ESM-C folder (tiny, random)."""

import json

import pytest

from unmask.cli import main
from unmask.mi.label_files import read_labels


@pytest.fixture(scope="module")
def esmc_dir(tmp_path_factory):
    import tiny_models

    return tiny_models.write_esmc(tmp_path_factory.mktemp("esmc") / "m", max_positions=130)


def test_bench_protein_with_an_esmc_folder(esmc_dir, tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["protein", "bench", "--model", str(esmc_dir), "--limit", "3", "--samplers",
                 "confidence", "eb", "--min-length", "20", "--max-length", "30", "--quiet",
                 "--no-natural", "--threads", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["name"] for r in rows] == ["confidence", "eb"]
    assert all(20 <= r["nfe"] <= 30 for r in rows)


def test_mi_label_with_an_esmc_folder(esmc_dir, tmp_path, capsys):
    out = tmp_path / "labels"
    assert main(["mi", "label", "--task", "protein", "--model", str(esmc_dir), "--contexts",
                 "2", "--out", str(out), "--threads", "1"]) == 0
    tensors, manifest = read_labels(out)
    assert tensors["tokens"].shape[0] == 2 and manifest["identity"]["task"] == "protein"
