"""Write the corpus the shipped text model's MI estimator is labelled on.

Each problem is its prompt followed directly by its answer (the row layout the model was
trained on), problems separated by a blank line. Problems come from the training pools
(generator seed TRAIN_SEED + task index), so none is a bench problem.

    python experiments/text_mi_estimator/make_corpus.py OUT.txt [--per-task N]
"""

import argparse

from unmask.reasoning.tasks import TASKS
from unmask.reasoning.train import TRAIN_SEED

#: the tasks the model solves at all (gsm_symbolic: 0% for every sampler)
CORPUS_TASKS = ("basic_arithmetic", "chain_sum", "countdown", "mini_sudoku")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--per-task", type=int, default=1500)
    a = p.parse_args()
    names = list(TASKS)
    lines = []
    for name in CORPUS_TASKS:
        items = TASKS[name].items(a.per_task, TRAIN_SEED + names.index(name))
        lines += [it.prompt + it.answer for it in items]
    # interleave tasks so that any stretch of the corpus mixes them
    order = sorted(range(len(lines)), key=lambda i: (i % a.per_task, i // a.per_task))
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("\n\n".join(lines[i] for i in order) + "\n")


if __name__ == "__main__":
    main()
