"""Quiet transformers' per-load progress bars and advisory warnings (they drown the console)."""


def quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
