"""``unmask.mi.fit`` is the library form of ``unmask mi fit``; its budget refuses bad values
in one line before any work."""

import pytest

import unmask.mi
from unmask.errors import UnmaskError
from unmask.mi.fitting import FitBudget, fit


def test_the_package_names_the_pipeline():
    assert unmask.mi.fit is fit and unmask.mi.FitBudget is FitBudget


@pytest.mark.parametrize("field, value, message", [
    ("contexts", 0, "contexts: must be an integer >= 1"),
    ("shard_size", 2.5, "shard_size: must be an integer >= 1"),
    ("label_s", 0.0, "label_s, train_s: must be > 0"),
    ("held_out", 1.0, "held_out: must be in (0, 1)"),
])
def test_a_bad_budget_is_refused(field, value, message):
    with pytest.raises(UnmaskError, match=message.replace("(", r"\(").replace(")", r"\)")):
        FitBudget(**{field: value})
