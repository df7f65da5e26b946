"""The ``unmask`` command line. Bad input prints one line and exits 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from unmask.errors import UnmaskError

#: name path (e.g. ("train", "sudoku")) -> (help, add_arguments, run)
COMMANDS: dict[tuple[str, ...], tuple[str, Callable, Callable]] = {}


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
            grp = groups[path[:-2]].add_parser(path[-2], help=f"{path[-2]} commands")
            parent = groups[path[:-1]] = grp.add_subparsers(dest=f"cmd_{len(path)}",
                                                            required=True, parser_class=_Parser)
        # help strings are %-formatted by argparse, descriptions are printed as they are
        p = parent.add_parser(path[-1], help=help_text,
                              description=help_text.replace("%%", "%"))
        add_args(p)
        p.set_defaults(_run=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except UnmaskError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
