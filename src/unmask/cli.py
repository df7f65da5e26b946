"""The ``unmask`` command line. Bad input prints one line and exits 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from unmask.errors import UnmaskError

#: name path (e.g. ("sudoku", "train")) -> (help, add_arguments, run)
COMMANDS: dict[tuple[str, ...], tuple[str, Callable, Callable]] = {}

#: help of each noun (the first word of ``unmask NOUN VERB``)
GROUPS = {
    "sudoku": "Sudoku: solve puzzles, train the MDM, benchmark samplers",
    "mi": "pairwise mutual information: label by probing, train/evaluate the estimator, maps",
    "corrector": "the corrector that finds wrong decoded tokens",
    "protein": "protein generation: train the MDM, benchmark samplers",
    "arithmetic": "the multiplication task: train the MDM, benchmark samplers",
    "results": "bench result files: plot, pool",
}


def command(*path: str, help: str):
    """Register ``run(args)`` as a subcommand; ``add_arguments(parser)`` is set via .args."""

    def wrap(run: Callable) -> Callable:
        COMMANDS[path] = (help, getattr(run, "_add_args", lambda p: None), run)
        return run

    return wrap


def arguments(add: Callable[[argparse.ArgumentParser], None]):
    def wrap(run: Callable) -> Callable:
        run._add_args = add
        return run

    return wrap


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    from unmask import commands  # noqa: F401  (registers the subcommands)

    parser = _Parser(prog="unmask", description="Dependency-aware decoding of masked "
                     "diffusion models.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    groups: dict[tuple[str, ...], argparse._SubParsersAction] = {(): sub}
    for path in sorted(COMMANDS, key=len):
        help_text, add_args, run = COMMANDS[path]
        parent = groups.get(path[:-1])
        if parent is None:
            text = GROUPS.get(path[-2], f"{path[-2]} commands")
            grp = groups[path[:-2]].add_parser(path[-2], help=text, description=text)
            parent = groups[path[:-1]] = grp.add_subparsers(dest=f"cmd_{len(path)}",
                                                            required=True, parser_class=_Parser)
        # help strings are %-formatted by argparse, descriptions are printed as they are
        p = parent.add_parser(path[-1], help=help_text,
                              description=help_text.replace("%%", "%"))
        add_args(p)
        p.set_defaults(_run=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; the exit status: 0 done, 2 refused (one line on stderr), 130
    interrupted. Argument errors and ``--help`` return their status instead of exiting."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) or a bad argument (2, already printed)
        return e.code if isinstance(e.code, int) else 2
    from unmask.commands.common import apply_threads, thread_counts

    before = thread_counts()
    try:
        if hasattr(args, "threads"):  # before any work: numba's pool must not reset torch's
            apply_threads(args.threads)
        return int(args._run(args) or 0)
    except UnmaskError as e:
        print(f"error: {_one_line(str(e))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `unmask ... | head`: the reader left
        sys.stderr.close()
        return 0
    except OSError as e:  # a user path the system refused (disk full, permissions, ...)
        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {_one_line(where + (e.strerror or str(e)))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:  # a caller in the same process keeps its own thread counts
        thread_counts(before)


def _one_line(text: str) -> str:
    """``text`` with its line breaks folded, so a refusal is always one line."""
    return " ".join(text.split()) if "\n" in text or "\r" in text else text


if __name__ == "__main__":
    sys.exit(main())
