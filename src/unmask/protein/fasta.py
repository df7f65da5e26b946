"""A small FASTA reader (tested record for record against pyhmmer's parser).

A record is a ``>`` header line (name = first word, description = the rest, leading blanks
dropped) followed by any number of sequence lines; whitespace inside sequence lines is ignored
and letters are kept as written (case included). Blank lines are skipped. Text before the
first header is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from unmask.errors import UnmaskError


@dataclass(frozen=True)
class FastaRecord:
    name: str
    description: str
    sequence: str


def parse_fasta(text: str, source: str = "<text>") -> list[FastaRecord]:
    """Records of FASTA ``text`` in file order (empty records included: see ``clean``)."""
    records: list[FastaRecord] = []
    header: str | None = None
    chunks: list[str] = []

    def flush():
        if header is not None:
            parts = header.split(None, 1)  # name, then the rest minus its leading blanks
            records.append(FastaRecord(parts[0] if parts else "",
                                       parts[1] if len(parts) > 1 else "", "".join(chunks)))

    for lineno, line in enumerate(text.splitlines(), 1):
        if line.startswith(">"):
            flush()
            header, chunks = line[1:], []
        elif line.strip():
            if header is None:
                raise UnmaskError(f"fasta: {source} line {lineno}: sequence data before the "
                                  "first '>' header (not FASTA?)")
            chunks.append("".join(line.split()))
    flush()
    return records


def read_fasta(path: str | Path) -> list[FastaRecord]:
    """Records of the FASTA file at ``path``."""
    path = Path(path)
    if not path.is_file():
        raise UnmaskError(f"fasta: {path} is not a file")
    try:
        text = path.read_text(encoding="ascii")
    except UnicodeDecodeError:
        raise UnmaskError(f"fasta: {path} is not ASCII text (not FASTA?)") from None
    return parse_fasta(text, str(path))
