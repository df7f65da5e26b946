"""``unmask mi label --trust-remote-code``: a folder that runs its own modelling code."""

from unmask.bench.recipe import model_recipe
from unmask.cli import main
from unmask.commands import mi as mi_command
from unmask.mi.label_files import read_labels

CORPUS = "the cat sat on the mat . a big red dog ran on the moon and the sun . " * 4


def test_mi_label_runs_a_remote_code_folder_only_with_the_flag(llada_dir, tmp_path, capsys,
                                                               monkeypatch):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS)
    base = ["mi", "label", "--task", "text", "--model", str(llada_dir), "--text", str(corpus),
            "--length", "8", "--contexts", "2", "--threads", "1"]
    # refused, in one line, without the flag; nothing is written
    assert main([*base, "--out", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "--trust-remote-code" in err and "\n" not in err
    assert not (tmp_path / "refused" / "manifest.json").exists()
    # with it, the loader is told so and the labels are written
    recipes = []

    def recording(*args, **kwargs):
        recipes.append(model_recipe(*args, **kwargs))
        return recipes[-1]

    monkeypatch.setattr(mi_command, "model_recipe", recording)
    out = tmp_path / "labels"
    assert main([*base, "--out", str(out), "--trust-remote-code"]) == 0
    assert recipes and all(recipe.trust_remote_code for recipe in recipes)
    tensors, manifest = read_labels(out)
    assert manifest["identity"]["task"] == "text" and tensors["tokens"].shape == (2, 8)


def test_trust_remote_code_is_refused_for_a_model_that_runs_no_code(tmp_path, capsys):
    # the shipped Sudoku model is no transformers folder: the flag cannot apply to it
    assert main(["mi", "label", "--contexts", "1", "--out", str(tmp_path / "o"),
                 "--trust-remote-code", "--threads", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "trust_remote_code apply only to those" in err and "\n" not in err
    assert not (tmp_path / "o" / "manifest.json").exists()
