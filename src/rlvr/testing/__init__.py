"""Harnesses for rlvr's own tests and benchmarks, not part of the library's API.

`zoo`: tiny random-init checkpoints of the decoder families rlvr supports, and the checks the
architecture tests and `bench/architectures.py` run on them (log-prob parity between sampling and
the update, a short GRPO run). It sits in the top layer because it drives the engine, the update
and `train()`; nothing in the library imports it, and what it reaches into may change without notice.
"""
