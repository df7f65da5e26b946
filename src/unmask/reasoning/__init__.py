"""Text reasoning: procedural tasks with verifiers (reasoning-gym), a character-level text MDM
saved as a ``transformers`` checkpoint, and the benchmark of samplers on them."""
