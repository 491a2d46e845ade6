"""The worker pool: hard wall-clock budgets, kill and replace, memory caps, use from threads."""

from __future__ import annotations

import threading
import time

import pytest

from rlvr.verifiers.workers import WorkerPool


@pytest.fixture(scope="module")
def pool():
    p = WorkerPool(2, memory_mb=512)
    yield p
    p.close()


def test_answers_come_back(pool):
    out = pool.run("builtins:len", ("abcd",), 5.0)
    assert (out.status, out.value) == ("ok", 4)


def test_overrun_is_killed_within_budget_and_replaced(pool):
    t0 = time.perf_counter()
    out = pool.run("time:sleep", (30,), 0.5)
    assert out.status == "timeout" and time.perf_counter() - t0 < 2.0
    assert 450 <= out.ms <= 1000
    assert pool.run("builtins:len", ("ab",), 30.0).value == 2  # a replacement took its place


def test_exceptions_and_memory_blowups_are_verdicts(pool):
    assert pool.run("builtins:int", ("not a number",), 5.0).status == "crash"
    out = pool.run("builtins:bytearray", (2 * 2**30,), 5.0)
    assert (out.status, out.value) == ("crash", "MemoryError()")


def test_budget_holds_from_other_threads(pool):
    results = []

    def work(seconds):
        results.append(pool.run("time:sleep", (seconds,), 0.5).status)

    threads = [threading.Thread(target=work, args=(s,)) for s in (0.0, 30.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(results) == ["ok", "timeout"]
