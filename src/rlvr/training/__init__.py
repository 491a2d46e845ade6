"""The training loop's plumbing: `run` (the `Run` object `train()` drives), `setup` (builders),
`update` (batches and the policy update), `checkpoint` / `resume` (atomic save, exact resume),
`schedule` (learning-rate shape), `sft` (supervised cold start and distillation)."""
