"""Bench tables, printed with rich."""

from __future__ import annotations


def wide_console(table):
    """A rich Console at least as wide as ``table``'s natural width. Rich squeezes a table
    into the terminal's width (80 columns when the output is a file or a pipe), and a long
    unwrapped first column then leaves the number columns no room at all."""
    from rich.console import Console

    console = Console()
    need = console.measure(table, options=console.options.update_width(10_000)).maximum
    return Console(width=need) if need > console.width else console


def render_table(rows: list[dict], columns: list[tuple[str, str, str]], title: str) -> None:
    """Print ``rows`` with rich. columns: (header, key, format spec) e.g. ("NFE", "nfe", ".1f")."""
    from rich.table import Table

    table = Table(title=title)
    for i, (header, _, _) in enumerate(columns):
        table.add_column(header, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for r in rows:
        table.add_row(*[("-" if r.get(key) is None else format(r[key], fmt))
                        for _, key, fmt in columns])
    wide_console(table).print(table)
