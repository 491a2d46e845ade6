"""Runnable miniature experiments: `python -m experiments.<name>` (see experiments/README.md)."""
