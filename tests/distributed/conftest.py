import sys

import pytest


@pytest.fixture(scope="session")
def one_process_run(tmp_path_factory, cold_start_model) -> tuple[float, float]:
    """(accuracy of the cold start, accuracy after the short one-process HF run)."""
    from quickrun import start_accuracy, train_accuracy

    tmp = tmp_path_factory.mktemp("single")
    return start_accuracy(cold_start_model), train_accuracy(tmp, "single", cold_start_model)
