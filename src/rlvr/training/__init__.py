"""The training loop's plumbing: `run` (the `Run` that `train()` drives, a composition of parts),
`state` (policy, optimizer, scheduler and the update), `source` / `rollouts` (generate and verify,
at the step or ahead of it), `runlog` (metrics, alarms, progress), `checkpoint` / `resume`
(atomic save, exact resume as one loop over the parts), `setup` (builders), `update` (batches and
the policy update), `schedule` (learning-rate shape), `seeds` (per-step seeds), `sft` (supervised
cold start and distillation)."""
