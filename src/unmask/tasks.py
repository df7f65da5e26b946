"""The task packages of unmask, named once: what the layers below them find by name (each
module named here is imported on use, so the core imports no task package). A new task adds
its line here; nothing is found by scanning folders.

Attributes of a :class:`TaskPackage`:
    name: the package (``unmask.<name>``) and the task's name (``--task``, ``check_task``).
    labels: its module registering the MI label context task of its name
        (:func:`unmask.mi.labels.register_task`), or None.
    recorded: the ``task`` its models' configs record, when other than ``name``: a value
        ending in ``-`` is a prefix (the arithmetic models record ``multiplication-AxB``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskPackage:
    name: str
    labels: str | None = None
    recorded: tuple[str, ...] = ()

    def records(self, task: str) -> bool:
        """Whether a model recording ``task`` is one of this task's."""
        return task == self.name or any(
            task.startswith(r) if r.endswith("-") else task == r for r in self.recorded)


#: every task package, by name
TASKS: dict[str, TaskPackage] = {t.name: t for t in (
    TaskPackage("sudoku", labels="unmask.sudoku.labels"),
    TaskPackage("protein", labels="unmask.protein.labels"),
    TaskPackage("text", labels="unmask.text.labels"),
    TaskPackage("arithmetic", recorded=("multiplication-",)),
    TaskPackage("image"),
    TaskPackage("reasoning"),
    TaskPackage("antibody"),
)}


def task_family(task: str | None) -> str:
    """The task a model's recorded ``task`` belongs to (``multiplication-2x1`` ->
    ``arithmetic``); the recorded value itself when no task claims it, '' when none."""
    task = task or ""
    return next((t.name for t in TASKS.values() if t.records(task)), task)


def label_modules() -> dict[str, str]:
    """The tasks with MI label contexts -> the module registering each."""
    return {t.name: t.labels for t in TASKS.values() if t.labels}
