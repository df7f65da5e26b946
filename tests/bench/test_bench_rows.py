"""Shared bench-table helpers: the NFE reference row and the Pareto front."""

import pytest

from unmask.bench.contract import BenchRow
from unmask.bench.plot import pareto_front, plot_family
from unmask.bench.rows import add_nfe_vs_sequential, add_paired_vs, paired_counts
from unmask.bench.table import render_table


def _rows(*pairs) -> list[BenchRow]:
    return [BenchRow(label, label.split()[0], None, nfe=nfe) for label, nfe in pairs]


def test_nfe_reference_prefers_confidence_then_any_sequential_sampler():
    rows = _rows(("natural", None), ("entropy", 75.0), ("topk k=12", 7.5),
                 ("confidence", 50.0))
    assert add_nfe_vs_sequential(rows).label == "confidence"
    assert [r.columns["nfe_vs_sequential"] for r in rows] == [None, 1.5, 0.15, 1.0]
    rows = _rows(("entropy", 75.0), ("mi-guided gamma=30", 7.5))
    assert add_nfe_vs_sequential(rows).label == "entropy"
    assert rows[1].columns["nfe_vs_sequential"] == 0.1
    rows = _rows(("entropy k=2", 30.0))  # not run with default settings
    assert add_nfe_vs_sequential(rows) is None
    assert rows[0].columns["nfe_vs_sequential"] is None


def test_plot_family_keeps_the_rule_form_and_drops_the_sweep_values():
    def row(label, corrected=False):
        return {"label": label, "name": label.split()[0], "corrected": corrected}

    assert plot_family(row("eb gamma=0.1")) == "eb"
    assert plot_family(row("eb gamma=0.1 order=confidence")) == "eb order=confidence"
    assert plot_family(row("mi-guided gamma=0.05 lam=0.3 free_max=True order=confidence")) \
        == "mi-guided free_max=True order=confidence"
    assert plot_family(row("topk k=9 +corrector", corrected=True)) == "topk +corrector"


def test_pareto_front_drops_dominated_rows():
    rows = [{"x": 10, "y": 0.7}, {"x": 12, "y": 0.7}, {"x": 5, "y": 0.5}, {"x": 57, "y": 0.76}]
    assert pareto_front(rows, "x", "y") == [rows[0], rows[2], rows[3]]


def test_paired_counts_against_the_reference_row():
    def row(label, each=None):
        return BenchRow(label, label, None, columns={} if each is None
                        else {"solved_each": each})

    seq = row("confidence", "110010")
    rows = [seq, row("eb", "101011"), row("mi")]
    add_paired_vs(rows, seq)
    assert (seq.columns["gained_vs_ref"], seq.columns["lost_vs_ref"]) == (0, 0)
    # eb solved items 2 and 5 that the reference failed, and failed item 1 that it solved
    assert (rows[1].columns["gained_vs_ref"], rows[1].columns["lost_vs_ref"]) == (2, 1)
    assert paired_counts("101011", "110010") == (2, 1)
    assert rows[2].columns["gained_vs_ref"] is None
    # the counts are columns of the file, after the task's own
    assert list(rows[1].to_dict())[-3:] == ["solved_each", "gained_vs_ref", "lost_vs_ref"]
    add_paired_vs(rows, None)
    assert rows[1].columns["gained_vs_ref"] is None and rows[1].columns["lost_vs_ref"] is None
    with pytest.raises(ValueError, match="items"):
        add_paired_vs([row("a", "10")], row("b", "101"))


def test_render_table_keeps_every_column_when_output_is_not_a_terminal(capsys):
    # a pipe or file gets rich's default 80 columns; a long unwrapped first column used to
    # squeeze the number columns to nothing there
    label = "mi-guided gamma=0.05 lam=0.3 free_max=True stop_at_first_miss=True order=confidence"
    rows = [{"label": label, "solved_pct": 79.1, "nfe": 10.714}]
    render_table(rows, [("sampler", "label", "s"), ("solved %", "solved_pct", ".1f"),
                        ("mean NFE", "nfe", ".2f")], "title")
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if label in x)
    assert "79.1" in line and "10.71" in line


def test_pareto_plot_zoom_and_guides(tmp_path, monkeypatch):
    import matplotlib.figure

    from unmask.bench.plot import pareto_plot

    seen = {}
    save = matplotlib.figure.Figure.savefig

    def capture(fig, fname, **kw):
        ax = fig.axes[0]
        seen["xlim"], seen["ylim"] = ax.get_xlim(), ax.get_ylim()
        seen["lines"] = [(tuple(line.get_xdata()), tuple(line.get_ydata()))
                         for line in ax.get_lines() if line.get_linestyle() == ":"]
        seen["texts"] = [t.get_text() for t in ax.texts]
        renderer = fig.canvas.get_renderer()
        seen["legend"] = ax.get_legend().get_window_extent(renderer)
        seen["axes"] = ax.get_window_extent(renderer)
        seen["bbox_inches"] = kw.get("bbox_inches")
        return save(fig, fname, **kw)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", capture)
    rows = [{"label": "confidence", "name": "confidence", "nfe": 57.0, "accuracy": 0.8},
            {"label": "eb gamma=0.1", "name": "eb", "nfe": 8.5, "accuracy": 0.76},
            {"label": "eb gamma=0.03", "name": "eb", "nfe": 11.3, "accuracy": 0.79}]
    out = tmp_path / "zoom.png"
    pareto_plot(rows, out, xlim=(8.0, 14.0), ylim=(75.0, 81.0),
                guides=[("h", 80.0, "sequential"), ("v", 11.4, "1/5")])
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert seen["xlim"] == (8.0, 14.0) and seen["ylim"] == (75.0, 81.0)
    assert ((0, 1), (80.0, 80.0)) in seen["lines"] and ((11.4, 11.4), (0, 1)) in seen["lines"]
    assert {"sequential", "1/5"} <= set(seen["texts"])
    # the legend sits beside the axes, covering no point, and the saved image holds it
    assert seen["legend"].x0 >= seen["axes"].x1 and not seen["legend"].overlaps(seen["axes"])
    assert seen["bbox_inches"] == "tight"


def test_pareto_plot_legend_of_many_rows_leaves_the_axes_clear(tmp_path, monkeypatch):
    import matplotlib.figure

    from unmask.bench.plot import pareto_plot

    seen = {}
    save = matplotlib.figure.Figure.savefig

    def capture(fig, fname, **kw):
        ax, renderer = fig.axes[0], fig.canvas.get_renderer()
        seen["legend"] = ax.get_legend().get_window_extent(renderer)
        seen["axes"] = ax.get_window_extent(renderer)
        seen["figure"] = fig.bbox
        return save(fig, fname, **kw)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", capture)
    rows = [{"label": f"rule{k}", "name": f"rule{k}", "nfe": 5.0 + k, "accuracy": 0.5}
            for k in range(30)]
    pareto_plot(rows, tmp_path / "many.png")
    # 31 entries (30 rules and the front) beside the axes, within the figure's height
    assert seen["figure"].y0 <= seen["legend"].y0 and seen["legend"].y1 <= seen["figure"].y1
    assert seen["legend"].x0 >= seen["axes"].x1 and not seen["legend"].overlaps(seen["axes"])


def test_default_sudoku_specs_parse_and_hold_the_target_rows():
    from unmask.samplers.spec import parse_spec
    from unmask.sudoku.bench_task import DEFAULT_SPECS

    entries = [parse_spec(s) for s in DEFAULT_SPECS]
    assert len({e.label for e in entries}) == len(entries)
    verified = {(e.name, e.verify) for e in entries if e.verified}
    assert verified == {("mi-guided", 0.002), ("eb", 0.002)}
    assert entries[0].name == "confidence" and not entries[0].verified
