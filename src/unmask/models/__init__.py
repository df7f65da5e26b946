"""Models: the :class:`MaskedModel` contract, our transformer, and the exact toy MDM."""

from unmask.models.base import MaskedModel, ModelOutput
from unmask.models.toy import ExactJointMDM
from unmask.models.transformer import MDMTransformer, TransformerConfig

__all__ = ["ExactJointMDM", "MDMTransformer", "MaskedModel", "ModelOutput", "TransformerConfig"]
