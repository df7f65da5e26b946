import json

import pytest

from unmask.cli import main
from unmask.errors import UnmaskError
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


def _digits(n=96):
    from unmask.image.data import load_digits_split

    part, _ = load_digits_split()
    return part.images()[:n], part.labels[:n]


def test_classifier_batches_are_a_pure_function_of_the_step():
    import torch

    from unmask.image.classifier import ShiftedBatches

    images, labels = _digits()
    walked = ShiftedBatches(images, labels, 32, seed=3)
    seq = [walked(i) for i in range(8)]  # 3 steps an epoch: each epoch a new permutation
    assert walked.steps_per_epoch == 3
    for i in (5, 0, 7, 2):  # out of order, as a resumed run asks: the same batches
        x, y = ShiftedBatches(images, labels, 32, seed=3)(i)
        assert torch.equal(x, seq[i][0]) and torch.equal(y, seq[i][1])
        x, y = walked(i)
        assert torch.equal(x, seq[i][0]) and torch.equal(y, seq[i][1])
    # each epoch sees every image once
    epoch = torch.cat([seq[i][1] for i in range(3)])
    assert sorted(epoch.tolist()) == sorted(labels.tolist())
    assert not torch.equal(seq[0][1], seq[3][1])


def test_an_interrupted_classifier_run_resumes_to_the_uninterrupted_weights(tmp_path):
    import torch

    from unmask.image.classifier import train_classifier

    images, labels = _digits()
    full = train_classifier(images, labels, tmp_path / "a", epochs=3, batch_size=32,
                            log=lambda s: None)

    def stop_after_the_first_epoch(line):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_classifier(images, labels, tmp_path / "b", epochs=3, batch_size=32,
                         log=stop_after_the_first_epoch)
    assert torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)["step"] == 3
    lines = []
    resumed = train_classifier(images, labels, tmp_path / "b", epochs=3, batch_size=32,
                               resume=True, log=lines.append)
    assert lines[0].startswith("resumed at step 3 (96 samples)")
    for (k, a), (_, b) in zip(full.state_dict().items(), resumed.state_dict().items(),
                              strict=True):
        assert torch.equal(a, b), k
    # one history line per epoch; another number of epochs is another schedule: refused
    history = (tmp_path / "b" / "history.jsonl").read_text().splitlines()
    assert [json.loads(s)["epoch"] for s in history] == [1.0, 2.0, 3.0]
    with pytest.raises(UnmaskError, match="train_config.loop.total_steps 9 -> 12"):
        train_classifier(images, labels, tmp_path / "b", epochs=4, batch_size=32, resume=True)


def test_the_shipped_classifier_predicts_what_it_recorded():
    """The held-out accuracy the shipped classifier's config records is what its predictions
    on that held-out split give, exactly."""
    from unmask.image.data import load_digits_split
    from unmask.pretrained import pretrained_path

    clf = DigitClassifier.from_pretrained(pretrained_path("digit_classifier"))
    _, heldout = load_digits_split(clf.metadata["levels"])
    assert len(heldout) == clf.metadata["heldout_images"]
    _, probs = clf.embed(heldout.images())
    correct = int((probs.argmax(1) == heldout.labels).sum())
    assert correct / len(heldout) == clf.metadata["heldout_accuracy"]
    assert len(heldout) - correct == 1  # 0.99721 of 359


def test_train_classifier_keeps_a_run_unless_resumed_or_overwritten(tmp_path, capsys):
    out = tmp_path / "clf"
    args = ["image", "train-classifier", "--out", str(out), "--epochs", "1", "--threads", "1"]
    assert main(args) == 0
    assert (out / "classifier.safetensors").is_file() and (out / "checkpoint.pt").is_file()
    capsys.readouterr()
    assert main(args) == 2
    assert "holds a training run" in capsys.readouterr().err
    assert main([*args, "--overwrite"]) == 0
