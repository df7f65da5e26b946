"""Training: one loop for every trainer (:mod:`~unmask.training.loop`: schedule, evaluation,
budgets, checkpoints and resume, history) and the MDM's training over it
(:mod:`~unmask.training.mdm`)."""
