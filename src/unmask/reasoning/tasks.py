"""The reasoning tasks: reasoning-gym generators at sizes a small model can learn, each with a
short prompt, an answer length, and the generator's own verifier.

A task's prompt is the problem without reasoning-gym's answer-format instructions (the model
is trained on this format, so the instructions would only lengthen every row). Problems are a
pure function of (task, seed, index); training and evaluation draw from disjoint seeds.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from unmask.errors import UnmaskError, require
from unmask.validation import is_int


def _import_gym():
    try:
        import reasoning_gym
    except ImportError:
        raise UnmaskError("reasoning: the tasks need reasoning-gym; pip install "
                          "'unmask[reasoning]'") from None
    return reasoning_gym


@dataclass(frozen=True)
class Item:
    """One problem: the prompt given to the model, a reference answer, and the generator's
    entry (what its verifier scores an answer against)."""

    task: str
    prompt: str
    answer: str
    entry: dict = field(repr=False, compare=False)


def _first_line(entry: dict) -> str:
    return entry["question"].split("\n", 1)[0].strip()


def _chain_sum_prompt(entry: dict) -> str:
    return entry["metadata"]["expression"].strip() + " ="


def _sudoku_prompt(entry: dict) -> str:
    grid = entry["question"].split("puzzle:\n", 1)[1].split("\nFormat", 1)[0]
    return "Solve this Mini Sudoku:\n" + grid.strip()


def _gsm_prompt(entry: dict) -> str:
    text = entry["question"]
    for tail in (" Give the result as your final answer.", " Give your final answer",
                 " Do not include units."):
        text = text.split(tail, 1)[0]
    return text.strip()


@dataclass(frozen=True, eq=False)
class ReasoningTask:
    """name: ours (also reasoning-gym's); config: the generator's settings; gen_length: masked
    positions after the prompt (longest answer + at least one EOS); prompt: entry -> prompt."""

    name: str
    config: dict
    gen_length: int
    prompt: Callable[[dict], str]
    description: str

    def dataset(self, seed: int, size: int):
        return _import_gym().create_dataset(self.name, seed=seed, size=size, **self.config)

    def items(self, n: int, seed: int) -> list[Item]:
        """Problems 0..n-1 of this task's generator at ``seed``."""
        require(is_int(n) and n >= 1, f"n: must be an integer >= 1, got {n!r}")
        data = self.dataset(seed, n)
        out = []
        for i in range(n):
            e = data[i]
            out.append(Item(self.name, self.prompt(e), str(e["answer"]), e))
        return out

    def correct(self, answer: str, item: Item) -> bool:
        """The generator's verifier gives full credit (any valid answer, not only the
        reference; partial credit for a wrong answer in the right format counts as wrong)."""
        return float(_scorer(self).score_answer(answer, item.entry)) >= 1.0


@functools.cache
def _scorer(task: ReasoningTask):
    return task.dataset(0, 1)


TASKS: dict[str, ReasoningTask] = {t.name: t for t in (
    ReasoningTask("basic_arithmetic",
                  dict(min_terms=2, max_terms=3, min_digits=1, max_digits=2,
                       operators=("+", "-", "*"), allow_parentheses=False,
                       allow_negation=False),
                  8, lambda e: e["question"].strip(),
                  "2-3 terms of 1-2 digits with + - * ('Calculate 4 - 1.')"),
    ReasoningTask("chain_sum", dict(min_terms=2, max_terms=4, min_digits=1, max_digits=2),
                  8, _chain_sum_prompt, "a chain of 2-4 additions/subtractions ('4 - 1 =')"),
    ReasoningTask("countdown",
                  dict(min_numbers=3, max_numbers=3, min_value=1, max_value=20,
                       min_target=10, max_target=99),
                  16, _first_line,
                  "reach a target with three numbers; any valid expression counts"),
    ReasoningTask("mini_sudoku", dict(min_empty=4, max_empty=8), 32, _sudoku_prompt,
                  "4x4 Sudoku with 4-8 blanks; the answer is the whole grid"),
    ReasoningTask("gsm_symbolic", {}, 8, _gsm_prompt,
                  "GSM8K-style word problems from templates; the answer is a number"),
)}


def get_tasks(names, flag: str = "tasks") -> list[ReasoningTask]:
    """The tasks named (all when ``names`` is None); an unknown name is refused (the message
    names ``flag``)."""
    if names is None:
        return list(TASKS.values())
    names = list(names)
    require(names, f"{flag}: none given")
    for n in names:
        require(n in TASKS, f"{flag}: unknown task {n!r}; expected some of {', '.join(TASKS)}")
    return [TASKS[n] for n in dict.fromkeys(names)]
