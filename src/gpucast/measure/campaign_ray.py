"""The Ray backend of campaigns: one Ray task per point, results stored by the driver.

Each task requests ``settings.gpus_per_point`` GPUs (default: one per process of the point
on a CUDA device, none on the CPU) and one CPU per process, so Ray places points on servers
that can hold them and runs as many side by side as the cluster fits. Inside the task the
point runs in a child process (``python -m gpucast.measure.campaign serve``), exactly as in
the local backend: a crash fails only its point. Results come back to this driver, which
writes them to its one store as each task finishes. Pass a :class:`RayRunner` to
:func:`gpucast.measure.campaign.run_campaign` as its ``runner``.

Ray is an optional extra (``pip install 'gpucast[ray]'``); it is imported only when this
backend is used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gpucast.domain.campaign import CampaignPoint, MeasureSettings
from gpucast.domain.errors import GpucastError, InvalidInputError
from gpucast.measure.campaign import Outcome, PointProcess


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InvalidInputError(
            "--backend ray needs Ray, which is not installed",
            fix="pip install 'gpucast[ray]', or use --backend local",
        ) from None
    return ray


def _run_in_child(point: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """Body of the Ray task: run one point in a fresh child process; plain dicts in and out."""
    child = PointProcess()
    try:
        outcome = child.run(
            CampaignPoint.from_dict(point), MeasureSettings(**settings), lambda: False
        )
    finally:
        child.close()
    return {"kind": outcome.kind, "result": outcome.result, "error": outcome.error}


def resources_for(point: CampaignPoint, settings: MeasureSettings) -> dict[str, float]:
    """What one point asks Ray for: CPUs and GPUs."""
    processes = max(point.nproc, 1)
    if settings.gpus_per_point is not None:
        gpus = float(settings.gpus_per_point)
    else:
        gpus = float(processes) if point.device.startswith("cuda") else 0.0
    return {"num_cpus": float(processes), "num_gpus": gpus}


class RayRunner:
    """Submits points to Ray and feeds results back to the driver as they finish (a
    :class:`~gpucast.measure.campaign.PointRunner`)."""

    def __init__(self, *, address: str | None = None, init_kwargs: dict[str, Any] | None = None):
        self.ray = _import_ray()
        self.address = address
        self.init_kwargs = dict(init_kwargs or {})

    def _connect(self) -> bool:
        """Connect (or start a local instance without ``address``); True if we started it."""
        if self.ray.is_initialized():
            return False
        try:
            self.ray.init(address=self.address, **self.init_kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise GpucastError(
                f"cannot connect to the Ray cluster at {self.address or 'a new local instance'}: "
                f"{' '.join(str(exc).split())[:200]}",
                fix="check --address (e.g. ray://head:10001 or auto) and that `ray status` works",
            ) from None
        return True

    def run(
        self,
        todo: Sequence[tuple[str, CampaignPoint]],
        settings: MeasureSettings,
        *,
        mark_running: Callable[[str], None],
        record: Callable[[str, Outcome], None],
        report: Callable[[str | None], None],
        should_stop: Callable[[], bool],
    ) -> bool:
        """Run every point; returns True when stopped before the end (interrupted)."""
        ray = self.ray
        started = self._connect()
        try:
            task = ray.remote(_run_in_child)
            pending: dict[Any, str] = {}
            for key, point in todo:
                ref = task.options(**resources_for(point, settings)).remote(
                    point.to_dict(), settings.to_dict()
                )
                pending[ref] = key
                mark_running(key)
            report(None)
            while pending:
                if should_stop():
                    for ref, key in pending.items():
                        ray.cancel(ref, force=True)
                        record(key, Outcome(interrupted=True))
                    return True
                done, _ = ray.wait(list(pending), num_returns=1, timeout=0.2)
                for ref in done:
                    key = pending.pop(ref)
                    try:
                        answer = ray.get(ref)
                    except Exception as exc:
                        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                        record(key, Outcome(error=f"Ray task failed: {first}"))
                    else:
                        record(
                            key,
                            Outcome(
                                kind=answer["kind"],
                                result=answer["result"],
                                error=answer["error"],
                            ),
                        )
                    report(None)
            return False
        finally:
            if started:
                ray.shutdown()
