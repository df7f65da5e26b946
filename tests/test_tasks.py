"""The one registry of task packages (unmask.tasks): what the core finds by name, no folder
scan."""

import importlib
import pkgutil
from pathlib import Path

import pytest

import unmask
from unmask.tasks import TASKS, label_modules, task_family


def test_every_task_package_is_registered_and_every_registered_one_exists():
    root = Path(unmask.__file__).parent
    with_labels = {p.name for p in pkgutil.iter_modules([str(root)]) if p.ispkg
                   and (root / p.name / "labels.py").is_file() and p.name != "mi"}
    assert {n for n, m in label_modules().items()} == with_labels
    for name, module in label_modules().items():
        assert module == f"unmask.{name}.labels"
    from unmask.commands.registry import COMMAND_MODULES

    benched = {path[0] for path in COMMAND_MODULES if path[1:] == ("bench",)}
    assert benched <= set(TASKS)
    for name in TASKS:
        assert importlib.util.find_spec(f"unmask.{name}") is not None


@pytest.mark.parametrize("recorded, family", [
    ("multiplication-2x1", "arithmetic"), ("multiplication-12x3", "arithmetic"),
    ("sudoku", "sudoku"), ("protein", "protein"), ("digits-9", "digits-9"), ("", ""),
    (None, ""), ("multiplication", "multiplication"),
])
def test_a_recorded_task_belongs_to_its_family(recorded, family):
    assert task_family(recorded) == family


def test_the_label_tasks_are_the_registered_ones():
    from unmask.mi.labels import get_task, task_names

    assert set(label_modules()) <= set(task_names())
    assert get_task("sudoku").name == "sudoku"


def test_a_shipped_head_is_the_one_of_the_model_s_task():
    """The shipped heads are named in one table (unmask.pretrained.SHIPPED_HEADS); a head
    loaded without a name is the one shipped for the model's task."""
    from types import SimpleNamespace

    from unmask.corrector import Corrector
    from unmask.mi.estimator import SHIPPED_ESTIMATOR, MIEstimator, load_estimator
    from unmask.models.auto import load_model
    from unmask.pretrained import shipped_head

    assert shipped_head(MIEstimator.KIND, SimpleNamespace(task="protein")) == \
        "protein_mi_estimator"
    assert shipped_head(MIEstimator.KIND) == SHIPPED_ESTIMATOR == "sudoku_mi_estimator"
    assert shipped_head(Corrector.KIND, SimpleNamespace(task="sudoku")) == "sudoku_corrector"
    protein = load_model("protein")
    est = load_estimator(model=protein)  # trained on it: the fingerprint check passes
    assert est.config.model_fingerprint == protein.fingerprint()
