"""Models: the :class:`MaskedModel` contract, the handle the decode loop runs them through,
our transformer, and the exact toy MDM."""

from unmask.models.base import MaskedModel, ModelOutput
from unmask.models.handle import ModelHandle
from unmask.models.toy import ExactJointMDM
from unmask.models.transformer import MDMTransformer, TransformerConfig

__all__ = ["ExactJointMDM", "MDMTransformer", "MaskedModel", "ModelHandle",
           "ModelOutput", "TransformerConfig"]
