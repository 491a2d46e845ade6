"""Watching a run: `log` (metrics.jsonl and TensorBoard), `stats` (per-step metrics), `doctor`
(alarms with advice), `progress` (the console line), `trackers` (W&B, MLflow), `completions`
(completions.parquet)."""
