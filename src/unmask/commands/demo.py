"""``unmask demo``: decode with a few samplers on the shipped default model."""
