"""Which problems each step trains on: `sampler` (dataset and task samplers) and `curriculum`
(pass-rate band, dynamic sampling)."""
