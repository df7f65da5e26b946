"""Helpers shared by the commands."""

import pytest

from unmask import UnmaskError
from unmask.commands.common import bench_entries


def test_bench_entries_parse_specs_fall_back_to_defaults_and_route_the_estimator():
    entries = bench_entries(["eb:gamma=0.2,order=confidence", "mi-guided:gamma=0.3"],
                            ["confidence"], estimator="some/folder")
    assert [(e.name, e.params) for e in entries] == [
        ("eb", {"gamma": 0.2, "order": "confidence"}),
        ("mi-guided", {"gamma": 0.3, "estimator": "some/folder"})]
    assert [e.name for e in bench_entries(None, ["confidence", "topk:k=3"])] == ["confidence",
                                                                                "topk"]
    assert "estimator" not in bench_entries(["mi-guided"], [])[0].params
    with pytest.raises(UnmaskError, match="order"):
        bench_entries(["eb:order=sideways"], [])


def test_command_help_prints_percent_signs_once(capsys):
    from unmask.cli import main

    assert main(["sudoku", "bench", "--help"]) == 0
    out = capsys.readouterr().out
    assert "solved % vs forward passes" in out and "%%" not in out
