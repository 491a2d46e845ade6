"""Evaluation: `metrics` (greedy accuracy, pass@k, maj@k over groups) and `ttc` (test-time compute:
budget forcing, temperature and vote curves)."""
