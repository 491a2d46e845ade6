"""The CPU heap is trimmed only when it holds enough free memory (`models.device.trim_host_heap`).

Trimming a small heap every step made the tiny model's training step 10-15 % slower (fresh zeroed
pages after each trim); the smollm2 preset's heap, tens of MB to GB free after an update, still
needs it (its RSS crept 5.4 -> 7.4 GB without). The heap is fragmented here on purpose with the C
allocator itself: blocks in pairs, every other one freed, so the free space cannot merge into the
top of the heap (which glibc returns by itself)."""

import ctypes
import ctypes.util
import subprocess
import sys

import pytest

from rlvr.models import device

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or device.heap_free_bytes() is None,
                                reason="glibc's mallinfo2 only")

BLOCK, PAIRS = 64 << 10, 256          # 64 KiB stays below glibc's mmap threshold: heap memory


@pytest.fixture
def fragmented_heap():
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(BLOCK) for _ in range(2 * PAIRS)]
    for b in blocks[::2]:
        libc.free(b)
    yield PAIRS * BLOCK
    for b in blocks[1::2]:
        libc.free(b)


def test_a_heap_with_enough_free_is_trimmed_and_a_small_one_is_not(fragmented_heap):
    free = device.heap_free_bytes()   # the process's own free heap comes on top (earlier tests)
    assert free >= fragmented_heap
    assert not device.trim_host_heap(min_free_bytes=2 * free + (1 << 30))
    assert device.trim_host_heap(min_free_bytes=fragmented_heap // 2)


def test_the_default_leaves_a_small_heap_alone(fragmented_heap):
    assert fragmented_heap < device.TRIM_MIN_FREE_BYTES
    if device.heap_free_bytes() < device.TRIM_MIN_FREE_BYTES:
        assert not device.trim_host_heap()


# In a fresh interpreter: a process whose heap has already grown (earlier tests, their updates)
# can serve a large block from a free chunk it holds, mmap threshold or not.
_KEPT_AND_MAPPED_AGAIN = r"""
import ctypes, ctypes.util
from rlvr.models import device

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
large = 96 << 20                  # above any mmap threshold glibc would pick by itself (32 MB)


def mapped_while_held() -> int:
    before = device._mallinfo2()().hblks   # blocks glibc serves by their own mmap
    block = libc.malloc(large)
    try:
        return device._mallinfo2()().hblks - before
    finally:
        libc.free(block)


assert mapped_while_held() == 1, "a 96 MB block outside: mmap'd by glibc"
with device.host_heap_kept():
    free_before = device.heap_free_bytes()
    assert mapped_while_held() == 0, "inside: from the heap"
    assert device.heap_free_bytes() >= free_before + large // 2, "freed, and kept in the heap"
    assert mapped_while_held() == 0 and device.heap_free_bytes() < free_before + 2 * large, \
        "the next block of that size reuses the kept one"
device.trim_host_heap(min_free_bytes=0)   # as a run does at the next step's start
assert mapped_while_held() == 1, "after: mmap'd again"
"""


def test_inside_host_heap_kept_large_blocks_come_from_the_heap_and_after_it_are_mapped_again():
    done = subprocess.run([sys.executable, "-c", _KEPT_AND_MAPPED_AGAIN], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_cpu_run_trims_the_heap_every_few_steps_not_every_step(monkeypatch):
    """Each trim makes the next update fault its whole working set back in (3-5 s of system time
    per smollm2-preset update on a KVM guest): a run trims at every `TRIM_EVERY_STEPS`-th step."""
    trimmed = []
    monkeypatch.setattr(device, "trim_host_heap", lambda *a, **k: trimmed.append(step) or True)
    cpu = device.Device.cpu()
    for step in range(3 * device.TRIM_EVERY_STEPS + 1):
        cpu.reset_peak_memory(step)
    assert device.TRIM_EVERY_STEPS > 1
    assert trimmed == [0, device.TRIM_EVERY_STEPS, 2 * device.TRIM_EVERY_STEPS, 3 * device.TRIM_EVERY_STEPS]


def test_the_run_log_hands_each_step_index_to_the_device():
    """`RunLog.steps` starts step k with `reset_peak_memory(k)`, so the trim period counts steps
    (a resumed run included), not calls."""
    from rlvr.config import load
    from rlvr.training.runlog import RunLog

    seen = []

    class Recorder:
        def reset_peak_memory(self, step=0):
            seen.append(step)

    log = RunLog(load("quickstart", ["grpo.steps=6", "run.progress=false"]), None, Recorder(),
                 show_progress=False)
    assert list(log.steps(2)) == [2, 3, 4, 5]
    assert seen == [2, 3, 4, 5]
