"""Shared bench-table helpers: the NFE reference row and the Pareto front."""

from unmask.bench import add_nfe_vs_sequential, pareto_front


def test_nfe_reference_prefers_confidence_then_any_sequential_sampler():
    rows = [{"label": "natural", "nfe": None}, {"label": "entropy", "nfe": 75.0},
            {"label": "topk k=12", "nfe": 7.5}, {"label": "confidence", "nfe": 50.0}]
    assert add_nfe_vs_sequential(rows)["label"] == "confidence"
    assert [r["nfe_vs_sequential"] for r in rows] == [None, 1.5, 0.15, 1.0]
    rows = [{"label": "entropy", "nfe": 75.0}, {"label": "mi-guided gamma=30", "nfe": 7.5}]
    assert add_nfe_vs_sequential(rows)["label"] == "entropy"
    assert rows[1]["nfe_vs_sequential"] == 0.1
    rows = [{"label": "entropy k=2", "nfe": 30.0}]  # not run with default settings
    assert add_nfe_vs_sequential(rows) is None and rows[0]["nfe_vs_sequential"] is None


def test_pareto_front_drops_dominated_rows():
    rows = [{"x": 10, "y": 0.7}, {"x": 12, "y": 0.7}, {"x": 5, "y": 0.5}, {"x": 57, "y": 0.76}]
    assert pareto_front(rows, "x", "y") == [rows[0], rows[2], rows[3]]
