"""Any ``transformers`` ``EsmForMaskedLM`` checkpoint (ESM-2 and ESM-1b/1v layouts) or
``EsmcForMaskedLM`` checkpoint (ESM-C, arXiv 2024 EvolutionaryScale; ``transformers`` >= 5)
as a :class:`MaskedModel` over a residue vocabulary it is given (a
:class:`~unmask.models.base.ResidueAlphabet`: the protein task's, ``unmask.protein.tokens``,
when :func:`unmask.models.auto.load_model` loads one).

The adapter speaks that vocabulary (the residues in its order, then its MASK and PAD ids), so
a checkpoint drops into everything built for a model of it: rows of ``max_length`` slots
whose first L are residues or MASK and whose rest is PAD. Each forward maps a row to ESM's own
ids as ``<cls> residues <eos> <pad>...`` with an attention mask that stops at ``<eos>``, runs
the model once, and returns logits restricted to our ids (the residues, ESM's ``<mask>`` and
``<pad>`` columns) and the final hidden states (after ESM's last layer norm) of the residue
slots, for the MI estimator. ESM's extra letters (X, B, U, Z,
O, gaps) are never emitted. ESM-C checkpoints in the ``esm`` package's own format (not a
``transformers`` folder) are not read here.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import SafetensorError

from unmask.errors import UnmaskError, require
from unmask.models.base import MaskedModel, ModelOutput, ResidueAlphabet, check_padded_tokens
from unmask.models.files import read_json_object
from unmask.models.hf import check_unexpected_weights, load_failure

#: the ESM-2 alphabet in id order, used when a checkpoint folder has no vocab.txt
ESM2_ALPHABET = ("<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R", "T",
                 "I", "D", "P", "K", "Q", "N", "F", "Y", "M", "H", "W", "C", "X", "B", "U",
                 "Z", "O", ".", "-", "<null_1>", "<mask>")
#: the ESM-C alphabet (ids 0-32; its checkpoints pad the embedding to 64 rows)
ESMC_ALPHABET = ESM2_ALPHABET[:31] + ("|", "<mask>")


def _import_esm(kind: str = "esm"):
    try:
        import transformers
    except ImportError:
        raise UnmaskError("model: ESM checkpoints need transformers; pip install transformers "
                          "(the 'esm' extra)") from None
    name = "EsmcForMaskedLM" if kind == "esmc" else "EsmForMaskedLM"
    if not hasattr(transformers, name):
        raise UnmaskError(f"model: {name} needs a newer transformers (installed: "
                          f"{transformers.__version__})")
    return getattr(transformers, name)


def _max_residues(config, base_name: str) -> int:
    """The residues a row may hold: the position table less <cls> and <eos>; with absolute
    position embeddings (ESM-2's fairseq layout) positions also start at ``pad_token_id`` + 1,
    so the table holds that many fewer."""
    positions = int(config.max_position_embeddings) - 2  # <cls> and <eos>
    if base_name == "esm" and getattr(config, "position_embedding_type", None) == "absolute":
        positions -= int(config.pad_token_id or 0) + 1
    require(positions >= 1, f"model: max_position_embeddings {config.max_position_embeddings} "
                            "leaves no position for a residue")
    return positions


class EsmMaskedModel(MaskedModel):
    """``EsmForMaskedLM`` behind the :class:`MaskedModel` contract on residue tokens.

    esm: the loaded ``EsmForMaskedLM``; vocab: its token strings in id order; residues: the
    vocabulary it speaks (our ids: the letters in order, then its MASK and PAD); task: what
    the model records (``"protein"``).
    """

    def __init__(self, esm, vocab: list[str] | tuple[str, ...], residues: ResidueAlphabet,
                 task: str | None = None):
        super().__init__()
        letters = residues.letters
        require({residues.mask_id, residues.pad_id} == {len(letters), len(letters) + 1},
                "residues: the MASK and PAD ids must follow the letters")
        self.residues = residues
        vocab = list(vocab)
        # ESM-C pads its embedding beyond the alphabet; ESM-2 does not
        self.base_name = "esmc" if hasattr(esm, "esmc") else "esm"
        fits = (len(vocab) <= esm.config.vocab_size if self.base_name == "esmc"
                else len(vocab) == esm.config.vocab_size)
        require(fits, f"vocab: {len(vocab)} tokens but the model's vocab_size is "
                      f"{esm.config.vocab_size}")
        for tok in ("<cls>", "<eos>", "<pad>", "<mask>", *letters):
            require(tok in vocab, f"vocab: the checkpoint's vocabulary has no {tok!r}")
        self.esm = esm.eval()
        self.task = task
        self.vocab_size = len(letters) + 2
        self.mask_id = residues.mask_id
        self.real_token_ids = tuple(range(len(letters)))
        self.max_length = _max_residues(esm.config, self.base_name)
        self.hidden_size = int(esm.config.hidden_size)
        self.autocast_bf16 = False
        self.cls_id, self.eos_id = vocab.index("<cls>"), vocab.index("<eos>")
        self.esm_pad_id = vocab.index("<pad>")
        # our id -> ESM id (residues, MASK, PAD); the same list picks our logit columns
        ours = [vocab.index(a) for a in letters] + [0, 0]
        ours[residues.mask_id], ours[residues.pad_id] = vocab.index("<mask>"), self.esm_pad_id
        self.register_buffer("to_esm", torch.tensor(ours, dtype=torch.long), persistent=False)

    def check_tokens(self, tokens: torch.Tensor) -> None:
        check_padded_tokens(tokens, super().check_tokens, self.residues)

    def esm_inputs(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(input_ids (B, N+2), attention_mask (B, N+2)) in ESM's ids for tokens (B, N)."""
        b, n = tokens.shape
        # PAD is a suffix, so the residue count is where <eos> goes
        length = (tokens != self.residues.pad_id).sum(1)
        ids = torch.full((b, n + 2), self.esm_pad_id, dtype=torch.long, device=tokens.device)
        ids[:, 0] = self.cls_id
        ids[:, 1:n + 1] = self.to_esm.to(tokens.device)[tokens]
        ids.scatter_(1, (length + 1)[:, None], self.eos_id)
        attention = torch.arange(n + 2, device=tokens.device)[None, :] <= (length + 1)[:, None]
        return ids, attention.long()

    def forward(self, tokens: torch.Tensor, output_hidden_layers: bool = False) -> ModelOutput:
        n = tokens.shape[1]
        ids, attention = self.esm_inputs(tokens)
        with torch.autocast("cpu", dtype=torch.bfloat16,
                            enabled=self.autocast_bf16 and tokens.device.type == "cpu"):
            out = getattr(self.esm, self.base_name)(input_ids=ids, attention_mask=attention,
                               output_hidden_states=output_hidden_layers, return_dict=True)
            h = out.last_hidden_state
            logits = self.esm.lm_head(h)
        logits = logits[:, 1:n + 1].index_select(-1, self.to_esm.to(tokens.device))
        layers = None
        if output_hidden_layers and out.hidden_states is not None:
            layers = tuple(t[:, 1:n + 1].float() for t in out.hidden_states)
        return ModelOutput(logits=logits.float(), hidden=h[:, 1:n + 1].float(),
                           hidden_layers=layers)

    @classmethod
    def from_pretrained(cls, directory: str | Path, map_location: str = "cpu", *,
                        residues: ResidueAlphabet, task: str | None = None,
                        meta: dict | None = None) -> EsmMaskedModel:
        """Load an ``EsmForMaskedLM`` or ``EsmcForMaskedLM`` folder (config.json + weights;
        vocab.txt if present, else the ESM-2 / ESM-C alphabet) speaking ``residues``
        (``unmask.protein.tokens.PROTEIN_RESIDUES``), recording ``task``. Nothing is
        downloaded. ``meta``: the folder's config.json when the caller has read it."""
        directory = Path(directory)
        meta = read_json_object(directory / "config.json") if meta is None else meta
        kind = "esmc" if meta.get("model_type") == "esmc" else "esm"
        esm_cls = _import_esm(kind)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # one line per failure is the CLI's contract
        hf_logging.set_verbosity_error()  # no load report before that line
        try:
            esm, info = esm_cls.from_pretrained(str(directory), local_files_only=True,
                                                output_loading_info=True)
        except (OSError, ValueError, RuntimeError, KeyError, TypeError, SafetensorError) as e:
            if "mismatch" in str(e):  # a shape the config does not imply: named, both shapes
                config = esm_cls.config_class.from_pretrained(str(directory))
                raise UnmaskError(load_failure(directory, config, esm_cls, e)) from None
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise UnmaskError(f"model: {directory} is not a readable EsmForMaskedLM "
                              f"checkpoint ({first})") from None
        check_unexpected_weights(directory, esm, info)
        esm = esm.to(map_location)
        vocab_file = directory / "vocab.txt"
        default = ESMC_ALPHABET if kind == "esmc" else ESM2_ALPHABET
        vocab = vocab_file.read_text().split() if vocab_file.is_file() else default
        model = cls(esm, vocab, residues, task)
        model.source = str(directory)
        return model
