"""A module that moved keeps its documented old import path, with a DeprecationWarning naming
the new one, and the old path gives the very same objects."""

import importlib
import sys

import pytest

MOVED = [
    ("unmask.engine", "unmask.workers", ["Engine", "LocalEngine", "RayEngine", "make_engine",
                                         "worker_path"]),
]


@pytest.mark.parametrize("old, new, names", MOVED)
def test_a_moved_module_warns_and_gives_the_same_objects(old, new, names, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = importlib.import_module(old)
    target = importlib.import_module(new)
    for name in names:
        assert getattr(module, name) is getattr(target, name), name
