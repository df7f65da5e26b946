"""Helpers shared by the commands."""

import pytest

from unmask import UnmaskError
from unmask.commands.flags.sampler import bench_entries


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


def test_check_task_refuses_a_task_less_model_only_where_a_command_requires_one():
    """One task check: load_model passes a model that records no task, a Sudoku command
    (required=True) refuses it; a model of another task is refused either way."""
    from types import SimpleNamespace

    from unmask.models.auto import check_task

    task_less, protein = SimpleNamespace(task=""), SimpleNamespace(task="protein")
    check_task(task_less, "sudoku", "m")
    check_task(SimpleNamespace(task="multiplication-2x1"), "arithmetic", required=True)
    check_task(protein, None, required=True)
    with pytest.raises(UnmaskError) as e:
        check_task(task_less, "sudoku", "m", required=True)
    assert str(e.value) == "model: m is a task-less model, not a sudoku model"
    for required in (False, True):
        with pytest.raises(UnmaskError) as e:
            check_task(protein, "sudoku", "m", required=required)
        assert str(e.value) == "model: m is a protein model, not a sudoku model"


def test_folder_flags_give_one_reason_as_an_argument_type_or_a_command_error(tmp_path):
    """--cache (an argparse type) and --out (checked by the command) refuse a folder for the
    same reasons, in the same words."""
    import argparse

    from unmask.commands.flags.paths import folder_problem, folder_to_keep, output_folder

    a_file = tmp_path / "f"
    a_file.write_text("")
    cases = {"": "empty path", str(a_file): f"{a_file} exists and is not a folder",
             str(a_file / "sub"): f"{a_file} is a file, not a folder"}
    for text, reason in cases.items():
        assert folder_problem(text) == reason
        with pytest.raises(argparse.ArgumentTypeError, match=f"^{reason}$"):
            folder_to_keep(text)
        with pytest.raises(UnmaskError) as e:
            output_folder(text, "--out")
        assert str(e.value) == f"--out: {reason}"
    new = tmp_path / "new" / "deeper"
    assert folder_to_keep(str(new)) == str(new) and output_folder(new, "--out") == new
    assert not new.exists()
