"""Each task package owns its MI label contexts: the writer (unmask.mi.labels) imports no task,
finds the packaged ones by their ``labels`` module, and loads one when its name is asked for."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import unmask
from unmask.errors import UnmaskError
from unmask.mi.labels import ContextTask, context_tasks, get_task, register_task, task_names

SRC = str(Path(unmask.__file__).resolve().parents[1])

PROBE = """
import json, sys
import unmask.mi.labels as labels
before = sorted(m for m in sys.modules if m.split(".")[1:2] in (["sudoku"], ["protein"], ["text"]))
names = labels.task_names()
task = labels.get_task("sudoku")
after = sorted(m for m in sys.modules if m.endswith(".labels"))
print(json.dumps({"before": before, "names": names, "module": task.generate.__module__,
                  "after": after}))
"""


def test_the_writer_names_no_task_and_loads_one_on_demand():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"}, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["before"] == []
    assert got["names"] == ["protein", "sudoku", "text"]
    assert got["module"] == "unmask.sudoku.labels"
    assert got["after"] == ["unmask.mi.labels", "unmask.sudoku.labels"]


def test_every_packaged_task_registers_under_its_package_name():
    tasks = context_tasks()
    assert sorted(tasks) == ["protein", "sudoku", "text"]
    for name, task in tasks.items():
        assert task.name == name and task.generate.__module__ == f"unmask.{name}.labels"
    assert tasks["text"].options == ("text", "text_sha256", "length")


def test_a_registered_task_joins_the_names_and_an_unknown_one_is_one_line(monkeypatch):
    from unmask.mi import labels

    monkeypatch.setattr(labels, "CONTEXT_TASKS", dict(labels.CONTEXT_TASKS))
    toy = register_task(ContextTask("toy", lambda *a: None, lambda m: None, lambda *a: None))
    assert "toy" in task_names() and get_task("toy") is toy
    with pytest.raises(UnmaskError, match=r"^task: unknown 'nope' \(known: protein, sudoku, "
                                          r"text, toy\)$"):
        get_task("nope")
