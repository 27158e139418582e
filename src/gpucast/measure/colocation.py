"""Co-located processes measured on the CPU: the proxy for GPU sharing interference.

Two real processes pinned (``os.sched_setaffinity``) to the same core share it the way
contexts share a time-sliced GPU. :func:`measure_pair` times a *victim* doing a fixed amount
of work alone and again while an *aggressor* runs on the same core, and returns the slowdown
(median over ``repeats``). The loops (:data:`LOOPS`): ``matmul`` (small in-cache matrix
products: compute-bound), ``memory`` (copies of an array far larger than the caches:
memory-bound), ``half`` (matmul work for 4 ms, then 4 ms asleep: busy half the time alone).
The duty of each loop alone is what :func:`gpucast.predict.interference.colocated_slowdowns`
needs; :func:`measure_duty` measures it.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import time
from dataclasses import dataclass

import numpy as np

from gpucast.domain.errors import InvalidSpecError

LOOPS: tuple[str, ...] = ("matmul", "memory", "half")
_BUSY_S = 0.004


def _pin(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})


def _unit(kind: str, state: dict[str, np.ndarray]) -> None:
    """One unit of work of loop ``kind``."""
    if kind == "memory":
        np.copyto(state["dst"], state["src"])
        return
    a = state["a"]
    for _ in range(8):
        a = a @ state["b"]
        a *= 1e-3


def _state(kind: str) -> dict[str, np.ndarray]:
    if kind == "memory":
        src = np.ones(8_000_000)  # 64 MB
        return {"src": src, "dst": np.empty_like(src)}
    rng = np.random.default_rng(0)
    return {"a": rng.random((96, 96)), "b": rng.random((96, 96))}


def _aggressor(
    kind: str, cpu: int, ready: mp.synchronize.Event, stop: mp.synchronize.Event
) -> None:
    _pin(cpu)
    os.environ["OMP_NUM_THREADS"] = "1"
    state = _state(kind)
    ready.set()
    while not stop.is_set():
        if kind == "half":
            end = time.perf_counter() + _BUSY_S
            while time.perf_counter() < end:
                _unit("matmul", state)
            time.sleep(_BUSY_S)
        else:
            _unit(kind, state)


def _victim_time(kind: str, units: int) -> float:
    state = _state(kind)
    _unit(kind, state)
    start = time.perf_counter()
    for _ in range(units):
        _unit(kind, state)
    return time.perf_counter() - start


@dataclass(frozen=True, slots=True, kw_only=True)
class PairMeasurement:
    victim: str
    aggressor: str
    alone_s: tuple[float, ...]
    together_s: tuple[float, ...]

    @property
    def slowdown(self) -> float:
        return statistics.median(self.together_s) / statistics.median(self.alone_s)


def measure_pair(
    victim: str, aggressor: str, *, units: int = 200, repeats: int = 3, cpu: int | None = None
) -> PairMeasurement:
    """The victim's time for ``units`` of work alone and beside the aggressor, both pinned to
    core ``cpu`` (default: the first this process may use)."""
    for kind in (victim, aggressor):
        if kind not in LOOPS:
            raise InvalidSpecError("loop", f"must be one of {', '.join(LOOPS)}", got=kind)
    core = min(os.sched_getaffinity(0)) if cpu is None else cpu
    old = os.sched_getaffinity(0)
    ctx = mp.get_context("spawn")
    alone, together = [], []
    try:
        _pin(core)
        for _ in range(repeats):
            alone.append(_victim_time(victim, units))
            ready, stop = ctx.Event(), ctx.Event()
            proc = ctx.Process(target=_aggressor, args=(aggressor, core, ready, stop))
            proc.start()
            ready.wait(30.0)
            time.sleep(0.05)
            together.append(_victim_time(victim, units))
            stop.set()
            proc.join(10.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
    finally:
        os.sched_setaffinity(0, old)
    return PairMeasurement(
        victim=victim, aggressor=aggressor, alone_s=tuple(alone), together_s=tuple(together)
    )


def measure_duty(kind: str, *, seconds: float = 0.5) -> float:
    """The share of wall time loop ``kind`` runs on its core when alone (CPU time / wall)."""
    if kind != "half":
        return 1.0
    state = _state("matmul")
    wall0, cpu0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - wall0 < seconds:
        end = time.perf_counter() + _BUSY_S
        while time.perf_counter() < end:
            _unit("matmul", state)
        time.sleep(_BUSY_S)
    return (time.process_time() - cpu0) / (time.perf_counter() - wall0)
