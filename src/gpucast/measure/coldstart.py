"""Measure a cold start phase by phase on this machine (``gpucast measure coldstart``).

:func:`measure_cold_start` builds the workload, saves its state dict to a temporary file,
flushes it and drops it from the page cache (``posix_fadvise(DONTNEED)`` where the OS has it,
so the read comes from the disk), then times: the CUDA context (on a GPU, when this process
has none yet), ``torch.load`` of the file, the copy of the tensors to the device, and the
first forward pass after the load against the median of the next ones.

:func:`measure_host_rates` measures, apart from any model's load, what a prediction needs:
the disk's read bandwidth (a raw file read with the page cache dropped), the memory read
bandwidth, the fp32 rate of 64 rows through a chain of distinct linear layers, the cost of
deserialising one small tensor and the first call's extra cost on a small model. The clock
is injectable.
"""

from __future__ import annotations

import os
import socket
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from gpucast.domain.errors import MeasurementError
from gpucast.domain.serverless import ColdStartMeasurement, HostRates
from gpucast.measure.devices import resolve_device, synchronize

if TYPE_CHECKING:
    from gpucast.workloads.base import Workload

Clock = Callable[[], float]


def drop_from_page_cache(path: Path) -> bool:
    """Flush ``path`` and ask the kernel to drop its cached pages; False where it cannot."""
    advise = getattr(os, "posix_fadvise", None)
    flag = getattr(os, "POSIX_FADV_DONTNEED", None)
    if advise is None or flag is None:
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        advise(fd, 0, 0, flag)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


@contextmanager
def _scratch(folder: Path | None) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="gpucast-coldstart-", dir=folder) as name:
        yield Path(name)


def _tensor_bytes(state: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in state.values())


def _forward(model: torch.nn.Module, inputs: tuple[Any, ...], device: torch.device) -> None:
    with torch.inference_mode():
        model(*inputs)
    synchronize(device)


def measure_cold_start(
    workload: Workload,
    *,
    options: dict[str, Any] | None = None,
    device: str = "cpu",
    batch_size: int = 1,
    steady_runs: int = 5,
    scratch_dir: Path | None = None,
    clock: Clock = time.perf_counter,
) -> ColdStartMeasurement:
    """One cold start of ``workload`` (module docstring)."""
    dev = resolve_device(device)
    cuda_context_s: float | None = None
    gpu_name: str | None = None
    if dev.type == "cuda":
        if not torch.cuda.is_initialized():
            start = clock()
            torch.cuda.init()
            torch.zeros(1, device=dev)
            synchronize(dev)
            cuda_context_s = clock() - start
        gpu_name = torch.cuda.get_device_name(dev)
    try:
        model = workload.build_model(torch.device("cpu")).eval()
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        weight_bytes = _tensor_bytes(state)
        tensors = len(state)
        with _scratch(scratch_dir) as folder:
            path = folder / "weights.pt"
            torch.save(state, path)
            del state
            model = model.to(dev)  # the skeleton the weights are assigned to (not timed)
            dropped = drop_from_page_cache(path)
            start = clock()
            loaded = torch.load(path, map_location="cpu", weights_only=True)
            read_s = clock() - start
        start = clock()
        on_device = {k: v.to(dev) for k, v in loaded.items()}
        synchronize(dev)
        to_device_s = clock() - start if dev.type != "cpu" else 0.0
        del loaded
        model.load_state_dict(on_device, assign=True)
        inputs, _ = workload.make_batch(batch_size, dev)
        start = clock()
        _forward(model, inputs, dev)
        first_s = clock() - start
        steady: list[float] = []
        for _ in range(max(1, steady_runs)):
            start = clock()
            _forward(model, inputs, dev)
            steady.append(clock() - start)
    except torch.OutOfMemoryError as exc:
        raise MeasurementError(
            f"out of memory measuring the cold start of {workload.name} on {dev}",
            fix="use a smaller model or --device cpu",
        ) from exc
    except OSError as exc:
        raise MeasurementError(
            f"cannot write the temporary weights file: {exc.strerror}",
            fix="pass --scratch-dir with room for the model's weights",
        ) from exc
    return ColdStartMeasurement(
        workload=workload.name,
        options=dict(options or {}),
        device=str(dev),
        batch_size=batch_size,
        weight_bytes=weight_bytes,
        parameter_tensors=tensors,
        cuda_context_s=cuda_context_s,
        weight_read_s=read_s,
        to_device_s=to_device_s,
        first_inference_s=first_s,
        steady_inference_s=statistics.median(steady),
        cache_dropped=dropped,
        host=socket.gethostname(),
        created_at=datetime.now(UTC).isoformat(),
        gpu_name=gpu_name,
    )


def _median_time(fn: Callable[[], object], runs: int, clock: Clock) -> float:
    times = []
    for _ in range(runs):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def measure_read_gbs(
    folder: Path, *, size_bytes: int = 256 * 2**20, runs: int = 5, clock: Clock = time.perf_counter
) -> tuple[float, bool]:
    """(GB/s, page cache dropped) of reading a raw ``size_bytes`` file into freshly allocated
    memory in one read call, as ``torch.load`` reads each tensor's record (median of
    ``runs``). Smaller reads are slower on the same disk (a 512 MiB file on this machine:
    1.4 GB/s in 16 MiB reads, 1.8 in 64 MiB, 2.0 in one), and calibrating with them priced
    the loads of 0.5-2 GB models 29-38% slow (session 20)."""
    path = folder / "raw.bin"
    block = os.urandom(2**20)
    with path.open("wb") as handle:
        for _ in range(size_bytes // len(block)):
            handle.write(block)
    times = []
    dropped = True
    chunk = size_bytes  # one read (the kernel may return less: the loop goes on)
    for _ in range(runs):
        dropped = drop_from_page_cache(path) and dropped
        start = clock()
        target = memoryview(torch.empty(size_bytes, dtype=torch.uint8).numpy())
        offset = 0
        with path.open("rb", buffering=0) as handle:
            while got := handle.readinto(target[offset : offset + chunk]):
                offset += got
        times.append(clock() - start)
        del target
    path.unlink()
    return size_bytes / statistics.median(times) / 1e9, dropped


def _weight_stream_gbs(clock: Clock) -> float:
    """GB/s of the memory-bound inference kernel: one sample through a 256 MiB fp32 weight
    matrix (a batch-1 linear layer streams its weights). A tensor sum, the calibration before
    session 20, streams ~30% slower on one thread and priced large models' first call slow."""
    weight, one = torch.randn(4096, 16384), torch.randn(1, 16384)
    seconds = _median_time(lambda: torch.nn.functional.linear(one, weight), 5, clock)
    return weight.numel() * weight.element_size() / seconds / 1e9


def _layer_chain_flops(clock: Clock) -> float:
    """FLOP/s of a forward pass's matmuls as they run: 64 rows (a short sequence or a small
    batch) through 16 distinct 1024x4096 linear layers (256 MiB of weights, each read once
    per pass, as a model's layers are). One matmul timed again and again keeps its weights in
    cache and runs ~40% faster on this machine (145 vs 103 GFLOP/s on one thread), which
    priced the transformers' first call 20-26% fast (session 21)."""
    weights = [torch.randn(4096, 1024) for _ in range(16)]
    rows = torch.randn(64, 1024)

    def chain() -> None:
        for weight in weights:
            torch.nn.functional.linear(rows, weight)

    chain()  # first call: kernel selection, page faults
    return 2 * 64 * 1024 * 4096 * len(weights) / _median_time(chain, 5, clock)


def _first_call_s(clock: Clock) -> float:
    """First minus steady forward of a fresh 512-512-10 MLP."""
    mlp = torch.nn.Sequential(
        torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
    ).eval()
    x = torch.randn(1, 512)
    cpu = torch.device("cpu")
    start = clock()
    _forward(mlp, (x,), cpu)
    first = clock() - start
    steady = _median_time(lambda: _forward(mlp, (x,), cpu), 5, clock)
    return max(0.0, first - steady)


def measure_host_rates(
    *, scratch_dir: Path | None = None, clock: Clock = time.perf_counter
) -> HostRates:
    """This machine's rates (module docstring), each measured on its own synthetic load."""
    with _scratch(scratch_dir) as folder:
        read_gbs, dropped = measure_read_gbs(folder, clock=clock)
        memory_gbs = _weight_stream_gbs(clock)
        flops = _layer_chain_flops(clock)
        n = 2000
        small = {f"t{i}": torch.randn(256) for i in range(n)}
        path = folder / "small.pt"
        torch.save(small, path)
        size = path.stat().st_size
        loads = []
        for _ in range(3):
            drop_from_page_cache(path)
            start = clock()
            torch.load(path, map_location="cpu", weights_only=True)
            loads.append(clock() - start)
        per_tensor_s = max(0.0, (statistics.median(loads) - size / (read_gbs * 1e9)) / n)
    firsts = [_first_call_s(clock) for _ in range(3)]
    cache = "page cache dropped" if dropped else "page cache NOT dropped (no posix_fadvise)"
    return HostRates(
        read_gbs=read_gbs,
        memory_gbs=memory_gbs,
        flops=flops,
        per_tensor_s=per_tensor_s,
        first_call_s=statistics.median(firsts),
        source=f"measured on {socket.gethostname()} ({cache}, {torch.get_num_threads()} threads)",
    )
