"""The FASTA reader against pyhmmer's parser, and cleaning with counted skips."""

import pytest

from unmask import UnmaskError
from unmask.protein.data import clean_records, default_proteome_path
from unmask.protein.fasta import parse_fasta, read_fasta

pyhmmer_easel = pytest.importorskip("pyhmmer.easel")


def pyhmmer_records(path):
    with pyhmmer_easel.SequenceFile(str(path), format="fasta") as f:
        return [(s.name, s.description, s.sequence) for s in f]


def ours(path):
    return [(r.name, r.description, r.sequence) for r in read_fasta(path)]


def test_matches_pyhmmer_on_the_bundled_proteome():
    path = default_proteome_path()
    mine = ours(path)
    assert len(mine) == 2100
    assert mine == pyhmmer_records(path)


def test_matches_pyhmmer_on_awkward_formatting(tmp_path):
    text = (">a desc one\r\nMKV\r\nlli\r\n\r\n>b\nMK V*\n>c  two  spaces \n>d\tx\nACD\n"
            ">e\n\n\nWWW\nY\n")
    path = tmp_path / "odd.fa"
    path.write_bytes(text.encode())
    assert ours(path) == pyhmmer_records(path)
    assert [r.sequence for r in read_fasta(path)] == ["MKVlli", "MKV*", "", "ACD", "WWWY"]


def test_bad_files_raise_one_line_errors(tmp_path):
    with pytest.raises(UnmaskError, match="fasta: .* is not a file"):
        read_fasta(tmp_path / "missing.fa")
    with pytest.raises(UnmaskError, match="line 1: sequence data before the first"):
        parse_fasta("MKV\n>a\nMKV\n")
    binary = tmp_path / "bin.fa"
    binary.write_bytes(b">a\n\xff\xfe\n")
    with pytest.raises(UnmaskError, match="not ASCII"):
        read_fasta(binary)


def test_clean_counts_every_skip_reason():
    records = parse_fasta(">ok\nmkvl*\n>empty\n>star\n*\n>x\nMKXV\n>internal\nMK*V\n"
                          ">gap\nMK-V\n>short\nMK\n>long\nMKVLMKVL\n>fine\nACDEF\n")
    cleaned = clean_records(records, min_length=3, max_length=6)
    assert cleaned.names == ["ok", "fine"]
    assert ["".join("ACDEFGHIKLMNPQRSTVWY"[t] for t in s) for s in cleaned.sequences] == [
        "MKVL", "ACDEF"]
    assert cleaned.skipped == {"empty": 2, "nonstandard": 3, "short": 1, "long": 1}
    assert "2 proteins kept" in cleaned.summary()
    with pytest.raises(UnmaskError, match="min_length"):
        clean_records(records, min_length=0)
