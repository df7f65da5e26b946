"""A module that moved keeps its documented old import path, with a DeprecationWarning naming
the new one, and the old path gives the very same objects."""

import importlib
import sys

import pytest

MOVED = [
    ("unmask.engine", "unmask.workers", ["Engine", "LocalEngine", "RayEngine", "make_engine",
                                         "worker_path"]),
    ("unmask.labels", "unmask.mi.labels", ["ContextTask", "get_task", "register_task",
                                           "write_labels"]),
]


@pytest.mark.parametrize("old, new, names", MOVED)
def test_a_moved_module_warns_and_gives_the_same_objects(old, new, names, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = importlib.import_module(old)
    target = importlib.import_module(new)
    for name in names:
        assert getattr(module, name) is getattr(target, name), name


def test_the_old_labels_module_still_lists_every_task(monkeypatch):
    monkeypatch.delitem(sys.modules, "unmask.labels", raising=False)
    with pytest.warns(DeprecationWarning):
        from unmask.labels import CONTEXT_TASKS, sudoku_contexts, text_options  # noqa: F401
    assert {"protein", "sudoku", "text"} <= set(CONTEXT_TASKS)
