"""Text: the masked-LM task over a corpus (its MI label contexts, :mod:`unmask.text.labels`)."""
