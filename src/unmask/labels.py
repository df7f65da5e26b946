"""Deprecated: the label writer moved to :mod:`unmask.mi.labels` and each task's contexts to
its package (:mod:`unmask.sudoku.labels`, :mod:`unmask.protein.labels`,
:mod:`unmask.text.labels`); import them from there.

This alias keeps ``from unmask.labels import model_recipe, write_labels`` (the import the Ray
guide once showed) working, with a :class:`DeprecationWarning`.
"""

import warnings

from unmask.mi.labels import (  # noqa: F401 - re-exported
    CONTEXT_TASKS,
    ContextTask,
    LabelSpec,
    context_tasks,
    describe_model,
    get_task,
    register_task,
    write_labels,
)
from unmask.recipe import model_recipe  # noqa: F401
from unmask.sudoku.labels import sudoku_contexts  # noqa: F401
from unmask.text.labels import read_corpus, text_contexts, text_options  # noqa: F401

context_tasks()  # every packaged task in CONTEXT_TASKS, as this module had them on import
warnings.warn("unmask.labels is deprecated; import from unmask.mi.labels (the writer) and "
              "unmask.<task>.labels (a task's contexts)", DeprecationWarning, stacklevel=2)
