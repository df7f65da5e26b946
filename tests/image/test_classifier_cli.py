import pytest

from unmask.cli import main
from unmask.image.classifier import DigitClassifier


@pytest.mark.slow
def test_train_classifier_command_writes_a_loadable_classifier(tmp_path, capsys):
    out = tmp_path / "clf"
    assert main(["image", "train-classifier", "--out", str(out), "--epochs", "1"]) == 0
    assert "held-out accuracy" in capsys.readouterr().out
    clf = DigitClassifier.from_pretrained(out)
    assert clf.metadata["epochs"] == 1 and 0.0 <= clf.metadata["heldout_accuracy"] <= 1.0


def test_train_classifier_refuses_zero_epochs(tmp_path, capsys):
    assert main(["image", "train-classifier", "--out", str(tmp_path / "c"),
                 "--epochs", "0"]) == 2
    assert "--epochs" in capsys.readouterr().err
