"""rlvr: reinforcement learning from verifiable rewards (GRPO and its variants) for reasoning LMs."""

__version__ = "0.1.0"
