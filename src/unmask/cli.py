"""The ``unmask`` command line. Bad input prints one line and exits 2.

Commands are registered by name (:mod:`unmask.commands.registry`): ``unmask --help``,
``--version``, ``unmask NOUN --help`` and a mistyped command answer before any command module
(or torch) is imported; the flags module of the command named (``unmask.commands.flags``) is
imported to parse its arguments, and its command module to run it.
"""

from __future__ import annotations

import argparse
import sys

from unmask import __version__
from unmask.commands.registry import COMMAND_MODULES, GROUPS, flags_of, run_of
from unmask.errors import UnmaskError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser(paths=None, *, listed=None) -> argparse.ArgumentParser:
    """The parser of every command, with the flags of the commands ``paths`` (their flags
    modules imported; None: every command); the others are listed by name and help only.

    listed: the commands the parser holds (None: every one); a noun none of them is under is
    listed by its help alone (the command line builds what its words can reach:
    :func:`reachable`)."""
    paths = set(COMMAND_MODULES if paths is None else paths)
    listed = set(COMMAND_MODULES if listed is None else listed)
    parser = _Parser(prog="unmask", description="Dependency-aware decoding of masked "
                     "diffusion models.")
    parser.add_argument("--version", action="version", version=f"unmask {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    groups: dict[tuple[str, ...], argparse._SubParsersAction] = {(): sub}
    reached = {p[0] for p in listed if len(p) > 1}
    for path in sorted(COMMAND_MODULES, key=len):  # the registry's order within a length
        if path not in listed:
            if len(path) > 1 and path[0] not in reached:  # a noun by its help alone
                reached.add(path[0])
                sub.add_parser(path[0], help=GROUPS.get(path[0], f"{path[0]} commands"))
            continue
        help_text = COMMAND_MODULES[path][1]
        parent = groups.get(path[:-1])
        if parent is None:
            text = GROUPS.get(path[-2], f"{path[-2]} commands")
            grp = groups[path[:-2]].add_parser(path[-2], help=text, description=text)
            parent = groups[path[:-1]] = grp.add_subparsers(dest=f"cmd_{len(path)}",
                                                            required=True, parser_class=_Parser)
        # help strings are %-formatted by argparse, descriptions are printed as they are
        p = parent.add_parser(path[-1], help=help_text,
                              description=help_text.replace("%%", "%"))
        if path in paths:
            flags_of(path)(p)
            p.set_defaults(_command=path)
    return parser


def named_command(argv: list[str]) -> list[tuple[str, ...]]:
    """The command ``argv`` names (its first one or two words), as a list of zero or one
    name paths."""
    words = tuple(argv[:2])
    return [p for p in (words[:1], words[:2]) if p in COMMAND_MODULES][:1]


def reachable(argv: list[str]) -> list[tuple[str, ...]]:
    """The commands the parser of ``argv`` needs: the one it names; the verbs of the noun it
    starts with; else the commands of one word (the nouns are listed by their help)."""
    named = named_command(argv)
    if named:
        return named
    verbs = [p for p in COMMAND_MODULES if len(p) > 1 and argv[:1] == [p[0]]]
    return verbs or [p for p in COMMAND_MODULES if len(p) == 1]


def main(argv: list[str] | None = None) -> int:
    """Run one command; the exit status: 0 done, 2 refused (one line on stderr), 130
    interrupted. Argument errors and ``--help`` return their status instead of exiting."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(named_command(argv), listed=reachable(argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) or a bad argument (2, already printed)
        return e.code if isinstance(e.code, int) else 2
    from unmask.commands.flags.threads import apply_threads, thread_counts

    before = thread_counts()
    try:
        if hasattr(args, "threads"):  # before any work: numba's pool must not reset torch's
            apply_threads(args.threads)
        return int(run_of(args._command)(args) or 0)
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
