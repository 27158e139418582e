"""What a training job on spot servers needs: lifetimes, start-up, restart, checkpoint cost.

Each input has one derivation, shared by ``plan train`` and ``simulate train``:

* :class:`Lifetimes` -- a node's lifetime distribution for (GPU, region, provider): a hazard
  the user gave, else :class:`~gpucast.predict.revocation.RevocationModel` fitted on
  ``transient/lifetime`` where it covers the GPU, else the AWS Spot Advisor band as a
  constant hazard (default ``5-10%``/month). Which one each node got is in ``used``.
* :class:`StartupDelays` -- VM start-up samplers per (GPU, market, region):
  :class:`~gpucast.predict.overheads.StartupModel` fitted on ``cmdare/startup_time`` (the
  GPU's own launches, else all GPUs pooled), else a constant default.
* :func:`restart_penalty` -- seconds a job loses when its chief rejoins (CM-DARE).
* :func:`checkpoint_cost` -- seconds per checkpoint of a given size
  (:class:`~gpucast.predict.overheads.CheckpointModel` fitted on CM-DARE's saves).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.domain.errors import InvalidSpecError, UnknownGpuError
from gpucast.domain.provenance import Sourced
from gpucast.inputs.data import data_path

if TYPE_CHECKING:
    import numpy as np

    from gpucast.predict.overheads import StartupModel
    from gpucast.predict.revocation import LifetimeDistribution, RevocationModel
    from gpucast.simulate.transient import Delay

#: Spot band used where no lifetimes are fitted and no hazard is given.
DEFAULT_BAND = "5-10%"
#: Start-up (s) of one VM when no cmdare/startup_time data is at hand.
DEFAULT_STARTUP_S = 120.0
#: Restart penalty (s) without CM-DARE's chief_rejoining files: the median of its seven runs.
DEFAULT_RESTART_PENALTY_S = 100.0
#: Checkpoint cost without checkpoint data: a fixed part plus the bytes at this speed.
DEFAULT_CHECKPOINT_FIXED_S = 3.0
DEFAULT_CHECKPOINT_GBPS = 1.0
LIFETIME_METHODS: tuple[str, ...] = ("weibull", "km")


def fitted_lifetime_model(
    csv: Path, method: str = "weibull"
) -> tuple[RevocationModel, dict[str, Any]]:
    """:class:`RevocationModel` fitted on a lifetime CSV, through the fit cache; the facts
    say how many rows were read (``rows``), skipped (``skipped``) and fitted (``lifetimes``)."""
    from gpucast.predict.revocation import RevocationModel
    from gpucast.store.cache import cached_fit

    def fit() -> tuple[RevocationModel, dict[str, Any]]:
        from gpucast.store.datasets.transient import lifetimes_frame, read_lifetimes

        parsed = read_lifetimes(csv)
        frame = lifetimes_frame(parsed.records)
        facts = {
            "rows": len(parsed.records),
            "skipped": len(parsed.skipped),
            "lifetimes": len(frame),
        }
        return RevocationModel(method=method).fit(frame), facts

    return cached_fit(
        "revocation",
        fit,
        model_type=RevocationModel,
        files=[csv],
        params={"method": method},
        code=("gpucast.store.datasets.transient",),
    )


@dataclass(slots=True, kw_only=True)
class Lifetimes:
    """Node lifetime distributions by (GPU, region, provider) -- see the module docstring.

    The lifetime data is read and fitted on the first call (plans without spot never pay for
    it). ``used`` records the source of every distribution handed out.
    """

    data_dir: Path | None
    catalog: Any
    band: str = DEFAULT_BAND
    hazard_per_hour: float | None = None
    method: str = "weibull"
    used: dict[str, str] = field(default_factory=dict)
    _model: Any = None
    _fitted_on: str = ""
    _tried: bool = False
    _fallback: Any = None

    def __post_init__(self) -> None:
        from gpucast.predict.revocation import ExponentialLifetime, hazard_from_interruption_band

        if self.method not in LIFETIME_METHODS:
            raise InvalidSpecError(
                "lifetime-method",
                f"must be one of {', '.join(LIFETIME_METHODS)}",
                got=self.method,
                fix="e.g. --lifetime-method weibull",
            )
        if self.hazard_per_hour is not None:
            self._fallback = ExponentialLifetime(
                hazard_per_hour=self.hazard_per_hour,
                source=f"user-given hazard {self.hazard_per_hour:g} revocations/h",
            )
        else:
            self._fallback = hazard_from_interruption_band(self.band)

    @property
    def fallback(self) -> LifetimeDistribution:
        return self._fallback  # type: ignore[no-any-return]

    def _fit(self) -> None:
        self._tried = True
        csv = data_path(self.data_dir, "transient", "lifetime", "lifetime.csv")
        if csv is None:
            self._fitted_on = "no transient/lifetime data given"
            return
        self._model, facts = fitted_lifetime_model(csv, self.method)
        skipped = f", {facts['skipped']} rows skipped" if facts["skipped"] else ""
        self._fitted_on = (
            f"RevocationModel ({self.method}) fitted on {csv} ({facts['lifetimes']} lifetimes "
            f"of GCE preemptible VMs, 2018-19{skipped})"
        )

    @property
    def fitted_on(self) -> str:
        if self.hazard_per_hour is not None:
            return "not used: a hazard was given"
        if not self._tried:
            return "not used (no spot plan needed it)"
        return self._fitted_on

    def covers(self, gpu: str) -> bool:
        """Whether fitted lifetimes exist for catalog GPU ``gpu``."""
        if self.hazard_per_hour is not None:
            return False
        if not self._tried:
            self._fit()
        return self._model is not None and self._model_gpu(gpu) is not None

    def _model_gpu(self, gpu: str) -> str | None:
        try:
            name = self.catalog.gpu(gpu).name
        except UnknownGpuError:
            name = gpu
        for g in self._model.gpus():
            try:
                if self.catalog.gpu(g).name == name:
                    return str(g)
            except UnknownGpuError:
                continue
        return None

    def __call__(self, gpu: str, region: str, provider: str = "") -> LifetimeDistribution:
        if self.hazard_per_hour is None and not self._tried:
            self._fit()
        dist = self.fallback
        if self.hazard_per_hour is None and self._model is not None:
            key = self._model_gpu(gpu)
            if key is not None:  # the data's GPU name (k80 -> K80) labels the source
                dist = self._model.distribution(key.upper(), region, fallback=self.fallback)
        self.used[f"{gpu} {region}"] = dist.source
        return dist

    def source(self) -> str:
        if self.hazard_per_hour is not None:
            return self.fallback.source
        base = f"{self.fitted_on}; where it has no lifetimes: {self.fallback.source}"
        fitted = sorted({k.split()[0] for k, v in self.used.items() if v != self.fallback.source})
        band = sorted({k.split()[0] for k, v in self.used.items() if v == self.fallback.source})
        used = []
        if fitted:
            used.append(f"fitted lifetimes for {', '.join(fitted)}")
        if band:
            used.append(f"the band for {', '.join(band)}")
        return base + (f"; used: {'; '.join(used)}" if used else "")


# -- start-up --------------------------------------------------------------------------------
@dataclass(slots=True, kw_only=True)
class StartupDelays:
    """VM start-up delay per (GPU, market, region): a sampler, or a constant without data."""

    data_dir: Path | None
    used: list[str] = field(default_factory=list)
    _by_gpu: Any = None
    _pooled: Any = None
    _launches: int = 0
    _folder: Path | None = None

    def __post_init__(self) -> None:
        folder = data_path(self.data_dir, "cmdare", "startup_time")
        if folder is None or not folder.is_dir():
            return
        self._folder = folder
        self._by_gpu, facts = _startup_model(folder, pooled=False)
        self._pooled, _ = _startup_model(folder, pooled=True)
        self._launches = int(facts["launches"])

    @property
    def fitted(self) -> bool:
        return self._by_gpu is not None

    def __call__(self, gpu: str, market: str, region: str) -> Delay:
        if self._by_gpu is None:
            return DEFAULT_STARTUP_S
        import numpy as np

        probe = np.random.default_rng(0)
        for model, name in ((self._by_gpu, gpu), (self._pooled, "any")):
            for where in (region, None):
                try:
                    model.sample(probe, 0, gpu=name, market=market, region=where)
                except InvalidSpecError:
                    continue
                label = f"{name} {market} {where or 'regions pooled'}"
                if label not in self.used:
                    self.used.append(label)
                return _bind(model, name, market, where)
        raise AssertionError("the pooled start-up model covers every market")  # pragma: no cover

    def mean_s(self, market: str = "on-demand") -> float:
        """Mean start-up of one VM over all GPUs (where one number is needed: pruning and
        the on-demand time of a plan)."""
        if self._pooled is None:
            return DEFAULT_STARTUP_S
        import numpy as np

        draws = self._pooled.sample(np.random.default_rng(0), 4000, gpu="any", market=market)
        return float(np.mean(draws))

    def source(self) -> str:
        if self._folder is None:
            return (
                f"default {DEFAULT_STARTUP_S:g} s per VM start (no cmdare/startup_time data given)"
            )
        used = f"; used: {', '.join(self.used)}" if self.used else ""
        return (
            f"StartupModel (lognormal phases) fitted on {self._folder} ({self._launches} "
            f"launches; the GPU's own launches, else all GPUs pooled){used}"
        )


def _startup_model(folder: Path, *, pooled: bool) -> tuple[StartupModel, dict[str, Any]]:
    from gpucast.predict.overheads import StartupModel
    from gpucast.store.cache import cached_fit

    def fit() -> tuple[StartupModel, dict[str, Any]]:
        from gpucast.store.datasets.transient import read_startup_times

        frame = read_startup_times(folder)
        return StartupModel().fit(frame.assign(gpu="any") if pooled else frame), {
            "launches": len(frame)
        }

    return cached_fit(
        "startup",
        fit,
        model_type=StartupModel,
        files=[folder],
        params={"gpus": "pooled as 'any'" if pooled else "per GPU"},
        code=("gpucast.store.datasets.transient",),
    )


def _bind(
    model: Any, gpu: str, market: str, region: str | None
) -> Callable[[np.random.Generator, int], Any]:
    def draw(rng: np.random.Generator, n: int) -> Any:
        return model.sample(rng, n, gpu=gpu, market=market, region=region)

    return draw


# -- restart and checkpoint --------------------------------------------------------------------
def restart_penalty(data_dir: Path | None) -> Sourced[float]:
    """Seconds a job loses when its chief rejoins: CM-DARE's chief_rejoining runs."""
    from gpucast.predict.revocation import estimate_restart_penalty

    folder = data_path(data_dir, "cmdare", "chief_rejoining")
    if folder is None or not folder.is_dir():
        return Sourced(
            DEFAULT_RESTART_PENALTY_S,
            f"default {DEFAULT_RESTART_PENALTY_S:g} s (CM-DARE chief_rejoining median)",
        )
    from gpucast.store.datasets.transient import read_chief_rejoining

    est = estimate_restart_penalty(read_chief_rejoining(folder))
    return Sourced(
        est.value,
        f"{est.source}: median {est.value:.0f} s (range {est.lower:.0f}-{est.upper:.0f})",
    )


def checkpoint_cost(size_bytes: float, data_dir: Path | None) -> Sourced[float]:
    """Seconds to save a checkpoint of ``size_bytes``: CheckpointModel on CM-DARE's saves,
    else ``3 s + bytes at 1 Gbit/s``."""
    path = data_path(data_dir, "cmdare", "checkpoint", "whole_data.csv")
    if path is None:
        seconds = DEFAULT_CHECKPOINT_FIXED_S + size_bytes * 8.0 / (DEFAULT_CHECKPOINT_GBPS * 1e9)
        return Sourced(
            seconds,
            f"{seconds:.2f} s for {size_bytes / 1e6:.1f} MB: default "
            f"{DEFAULT_CHECKPOINT_FIXED_S:g} s + bytes at {DEFAULT_CHECKPOINT_GBPS:g} Gbit/s "
            "(no cmdare/checkpoint data given)",
        )
    from gpucast.predict.overheads import CheckpointModel
    from gpucast.store.cache import cached_fit

    def fit() -> tuple[CheckpointModel, dict[str, Any]]:
        from gpucast.store.datasets.cmdare_checkpoint import read_checkpoint_csv

        table = read_checkpoint_csv(path)
        return CheckpointModel().fit(table.frame), {"saves": len(table.frame)}

    model, facts = cached_fit(
        "checkpoint",
        fit,
        model_type=CheckpointModel,
        files=[path],
        code=("gpucast.store.datasets.cmdare_checkpoint",),
    )
    size_mb = size_bytes / 1e6
    est = model.predict(size_mb)
    return Sourced(
        est.value,
        f"CheckpointModel fitted on {path} ({facts['saves']} saves): {est.value:.2f} s for "
        f"{size_mb:.1f} MB (range {est.lower:.2f}-{est.upper:.2f})",
    )
