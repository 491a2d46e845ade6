"""The one place that knows which device a run computes on: placement, precision and randomness.

`Device.resolve("auto" | "cpu" | "cuda" | "cuda:N")` is called once per run (`run.device`); the
policy, reference, rollout engine, update, evaluation, `rlvr sft` and `rlvr eval` take the object
and ask it for tensors' placement (`.torch`), autocast (`.autocast`), random generators
(`.generator`) and peak memory. Nothing else in rlvr names "cpu" or "cuda".

Under torchrun the process group is joined first and its `local_rank` handed to `resolve`: "auto"
and "cuda" then mean the rank's own GPU, `cuda:LOCAL_RANK`, never the process's current device
(which is GPU 0 on every rank until someone sets it). The data-parallel collectives ask the same
function for their device, so the policy and DDP's `device_ids` cannot disagree. An explicit
`cuda:N` is taken as given on every rank.

Precision: master weights and AdamW states stay in the checkpoint's dtype (float32 by default);
with bf16 on, matrix products run in bfloat16 under autocast (or the fused path's bf16 copies)
while the residual stream, norms, softmax and log-probs stay float32. bf16 is the default on a
GPU (`model.autocast_bf16` unset) and off on a CPU unless `model.bf16_where_native` asks for it
where the CPU computes bf16 natively (`cpu_computes_bf16`: detected, never assumed). Sampling
and training run in the same precision.

Guaranteed on the CPU: exactly the computation rlvr did before devices existed (same generators,
same ops), so a fixed seed gives bit-identical runs on the same machine and thread count.
On a GPU: a resumed run restores weights, optimizer, scheduler, sampler and every RNG stream
(CPU and CUDA) bit for bit, and per-step seeds come from (seed, step) (`seed_for`); the samples and updates
after resume are bit-identical only with `run.deterministic: true` (deterministic algorithms,
`CUBLAS_WORKSPACE_CONFIG`), and even then only on the same GPU model, driver and library versions.
Without it, atomics in cuBLAS/cuDNN/scatter kernels make runs statistically equivalent, not
bit-identical.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import re
from dataclasses import dataclass

import torch
from torch import Generator as TorchGenerator, dtype as TorchDtype

_SPEC = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")


def valid_spec(spec: str) -> bool:
    return bool(_SPEC.match(spec))


@dataclass(frozen=True)
class Device:
    # named `torch` (the torch.device): annotations inside the class use the Torch* aliases above,
    # since `torch.X` there would name this field
    torch: torch.device
    bf16: bool = False              # bf16 matrices (fp32 master weights) for sampling and training
    deterministic: bool = False

    @classmethod
    def resolve(cls, spec: str = "auto", bf16: bool | None = None,
                deterministic: bool = False, local_rank: int | None = None,
                bf16_where_native: bool = False) -> "Device":
        """`spec` as in `run.device`; `bf16=None` means on for a GPU, off for a CPU; `local_rank`:
        this process's rank on its machine under torchrun (None outside it)."""
        if not valid_spec(spec):
            raise ValueError(f"device {spec!r}: expected auto, cpu, cuda or cuda:N")
        if spec == "auto":
            spec = "cuda" if torch.cuda.is_available() else "cpu"
        dev = _cuda_device(spec, local_rank) if torch.device(spec).type == "cuda" else torch.device(spec)
        if deterministic:
            # cuBLAS reads this when its handle is created: set it before the first matmul.
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
            torch.use_deterministic_algorithms(True)
            torch.backends.cudnn.benchmark = False
        if bf16 is None:
            bf16 = dev.type == "cuda" or (bf16_where_native and cpu_computes_bf16())
        return cls(dev, bf16, deterministic)

    @classmethod
    def cpu(cls, bf16: bool = False) -> "Device":
        return cls(torch.device("cpu"), bf16)

    @property
    def is_cuda(self) -> bool:
        return self.torch.type == "cuda"

    @property
    def type(self) -> str:
        return self.torch.type

    @property
    def compute_dtype(self) -> TorchDtype:
        return torch.bfloat16 if self.bf16 else torch.float32

    def autocast(self, enabled: bool | None = None):
        """bf16 autocast on this device (`enabled=None`: this device's bf16 setting)."""
        on = self.bf16 if enabled is None else enabled
        return torch.autocast(self.type, dtype=torch.bfloat16, enabled=on)

    def generator(self, seed: int) -> TorchGenerator:
        """A seeded generator on this device (on the CPU: the same stream rlvr always used)."""
        return torch.Generator(device=self.torch).manual_seed(seed)

    @staticmethod
    def host_generator(seed: int) -> TorchGenerator:
        """A seeded host generator, for index permutations that never touch the accelerator."""
        return torch.Generator().manual_seed(seed)

    def to(self, x):
        return x.to(self.torch, non_blocking=self.is_cuda)

    def synchronize(self) -> None:
        if self.is_cuda:
            torch.cuda.synchronize(self.torch)

    def reset_peak_memory(self, step: int = 0) -> None:
        """A fresh peak count on a GPU; on a CPU, at every `TRIM_EVERY_STEPS`-th step (`step` the
        run's step index), the C heap's free pages back to the system (`trim_host_heap`)."""
        if self.is_cuda:
            torch.cuda.reset_peak_memory_stats(self.torch)
        elif step % TRIM_EVERY_STEPS == 0:
            trim_host_heap()

    def peak_memory_gb(self) -> float | None:
        """Peak allocated accelerator memory since the last reset, in GB; None on a CPU (rlvr
        logs no `memory/peak_gb` there, so CPU metrics files stay as they were)."""
        if not self.is_cuda:
            return None
        return torch.cuda.max_memory_allocated(self.torch) / 1e9

    @contextlib.contextmanager
    def seeded(self, seed: int):
        """Seed this device's default generator inside the block, restoring it afterwards (CUDA
        graphs draw random numbers from the default generator, not from a private one)."""
        with torch.random.fork_rng(devices=[self.torch] if self.is_cuda else []):
            if self.is_cuda:
                torch.cuda.manual_seed(seed)
            else:
                torch.manual_seed(seed)
            yield


def seed_for(seed: int, *parts: object) -> int:
    """A 63-bit seed for one random stream, from the run seed and the stream's path: (step,
    "rollout" | "mb" | "eval"), a rank ("rank3"), a Ray actor ("actor1"). sha256 of
    "seed/part/...": the streams are independent, and a resumed run draws the same seeds."""
    digest = hashlib.sha256("/".join(map(str, (seed, *parts))).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def _cuda_device(spec: str, local_rank: int | None) -> torch.device:
    """The GPU `spec` names; a bare `cuda` under torchrun is the rank's own (LOCAL_RANK)."""
    dev = torch.device(spec)
    if not torch.cuda.is_available():
        raise ValueError(f"device {spec!r}: CUDA is not available on this machine")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device {spec!r}: only {torch.cuda.device_count()} GPU(s) visible")
    if dev.index is None and local_rank is not None:
        if local_rank >= torch.cuda.device_count():
            visible = torch.cuda.device_count()
            raise ValueError(f"LOCAL_RANK {local_rank}: only {visible} GPU(s) visible")
        return torch.device("cuda", local_rank)
    if dev.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return dev


def cpu_computes_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (the avx512_bf16 or amx_bf16 flag on Linux, else
    oneDNN's own check); where it only emulates bf16 (AVX2), bf16 matrices are slower than fp32."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), None)
        if flags is not None:
            return "avx512_bf16" in flags or "amx_bf16" in flags
    except OSError:
        pass
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


# Trimming costs a walk of the heap and, after it, fresh (zeroed) pages for every allocation that
# reuses the trimmed space: the built-in tiny model's training step (184-388 MB free at a step's
# start) was 10-15 % slower trimmed every step. The smollm2 preset's heap holds 1.3-2.2 GB free at
# each step's start after the first, and its RSS crept 5.4 -> 7.4 GB untrimmed: only a heap holding
# at least this much free is trimmed, which keeps both.
TRIM_MIN_FREE_BYTES = 1 << 30

# ...and only every this many steps. After a trim the next update faults back in every page it
# reuses: on a KVM guest (Intel Xeon, AMX) 0.8-1.0 M faults and 3-5 s of system time in each
# 15-22 s update of the smollm2 preset's batch. Over 12 such updates (`bench/host_memory.py`):
# trimmed every 4th step 1.06x faster than every step for 0.4 GB more peak RSS (7.0 GB); never
# trimmed 1.16x, its RSS at 7.7 GB. The `rlvr` command runs on mimalloc where it can
# (`rlvr.cli.allocator`: 1.42x, 5.2 GB), and there all of this is a no-op.
TRIM_EVERY_STEPS = 4


def trim_host_heap(min_free_bytes: int = TRIM_MIN_FREE_BYTES) -> bool:
    """Return the C heap's free pages to the operating system (glibc's `malloc_trim`; a no-op
    elsewhere) when at least `min_free_bytes` of it are free; whether it trimmed. torch's CPU
    tensors below glibc's mmap threshold (raised to 32 MB after the first large free) come from the
    heap, and the update's tensors, of another width each step, leave it fragmented: without this
    the smollm2 preset's RSS crept from 5.4 to 7.4 GB over 30 steps."""
    libc = _libc()
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return False
    free = heap_free_bytes()
    if free is not None and free < min_free_bytes:
        return False
    trim(0)
    return True


# glibc's mallopt parameters and the values its own dynamic policy settles on after the first
# large free (an mmap threshold of 32 MB, twice that as the trim threshold): what a training
# process runs with outside `host_heap_kept`.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4
_STEADY_MMAP_THRESHOLD, _STEADY_TRIM_THRESHOLD, _DEFAULT_MMAP_MAX = 32 << 20, 64 << 20, 65536


@contextlib.contextmanager
def host_heap_kept():
    """Inside: every C allocation from the heap (no mmap) and nothing returned to the system by
    `free`; after: glibc's steady-state thresholds again. The heap is returned where the run says
    (`trim_host_heap`, at every `TRIM_EVERY_STEPS`-th step's start).

    Why: a training update allocates tensors of tens to hundreds of MB per micro-batch (a 49k
    vocabulary's logits and their softmax, the embedding's dense gradient). glibc serves every
    block above 32 MB by a fresh mmap and unmaps it at free, so each micro-batch touches (and the
    kernel zeroes) those pages again: 1.7-2.7 million page faults and 2.5-4.6 s of system time in
    one 28 s update of the smollm2 preset's batch. Kept in the heap, the second micro-batch reuses
    the first one's pages. Not guaranteed anywhere but glibc (elsewhere: a no-op)."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None or heap_free_bytes() is None:   # not glibc
        yield
        return
    mallopt(_M_MMAP_MAX, 0)
    mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(2**31 - 1))
    try:
        yield
    finally:
        mallopt(_M_MMAP_MAX, _DEFAULT_MMAP_MAX)
        mallopt(_M_MMAP_THRESHOLD, _STEADY_MMAP_THRESHOLD)
        mallopt(_M_TRIM_THRESHOLD, _STEADY_TRIM_THRESHOLD)


def host_allocator() -> str:
    """The C allocator this process runs on: "mimalloc" when `rlvr.cli.allocator` preloaded it
    (its library is mapped), else "glibc" (or whatever the platform's malloc is)."""
    try:
        with open("/proc/self/maps") as f:
            return "mimalloc" if "libmimalloc" in f.read() else "glibc"
    except OSError:
        return "glibc"


def heap_free_bytes() -> int | None:
    """Bytes free inside the C heap, all arenas (glibc >= 2.33 `mallinfo2`); None elsewhere."""
    info = _mallinfo2()
    return None if info is None else int(info().fordblks)


@functools.lru_cache(maxsize=1)
def _libc():
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None)
    except OSError:
        return None


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
        "keepcost")]


@functools.lru_cache(maxsize=1)
def _mallinfo2():
    info = getattr(_libc(), "mallinfo2", None)
    if info is not None:
        info.restype = _Mallinfo2
    return info
