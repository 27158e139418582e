"""What a training job on spot servers needs: lifetimes, start-up, restart, checkpoint cost.

Each input has one derivation, shared by ``plan train`` and ``simulate train``:

* :class:`Lifetimes` -- a node's lifetime distribution for (GPU, region, provider): a hazard
  the user gave, else :class:`~gpucast.predict.revocation.RevocationModel` fitted on
  ``transient/lifetime`` where it covers the GPU, else the documented spot scenario
  (``spot_scenarios.csv``: pessimistic by default, the optimistic one being the AWS Spot
  Advisor band as a constant hazard, default ``5-10%``/month). Which one each node got is in
  ``used``.
* :class:`StartupDelays` -- VM start-up samplers per (GPU, market, region):
  :class:`~gpucast.predict.overheads.StartupModel` fitted on ``cmdare/startup_time`` (the
  GPU's own launches, else all GPUs pooled), else a constant default.
* :func:`restart_penalty` -- seconds a job loses when its chief rejoins (CM-DARE).
* :func:`checkpoint_cost` -- seconds per checkpoint of a given size
  (:class:`~gpucast.predict.overheads.CheckpointModel` fitted on CM-DARE's saves).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.domain.errors import InvalidSpecError, UnknownGpuError
from gpucast.domain.provenance import Assumption, Sourced
from gpucast.domain.spot import DEFAULT_BAND
from gpucast.inputs.data import data_path

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np

    from gpucast.domain.catalog import Offer
    from gpucast.plan.inputs import RiskInputs
    from gpucast.predict.overheads import StartupModel
    from gpucast.predict.revocation import LifetimeDistribution, RevocationModel
    from gpucast.simulate.transient import Delay

#: Start-up (s) of one VM when no cmdare/startup_time data is at hand.
DEFAULT_STARTUP_S = 120.0
#: Restart penalty (s) without CM-DARE's chief_rejoining files: the median of its seven runs.
DEFAULT_RESTART_PENALTY_S = 100.0
#: Checkpoint cost without checkpoint data: a fixed part plus the bytes at this speed.
DEFAULT_CHECKPOINT_FIXED_S = 3.0
DEFAULT_CHECKPOINT_GBPS = 1.0
LIFETIME_METHODS: tuple[str, ...] = ("weibull", "km")
#: The kind under which `gpucast fit lifetimes` stores named models.
LIFETIMES_KIND = "lifetimes"


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
    """Node lifetime distributions by (GPU, region, provider) -- one rule for every verb.

    In order: a hazard the user gave (``hazard_per_hour``); a model the user fitted on their
    own trace and named (``named``, e.g. ``--lifetimes aws-v100``); the published GCE
    lifetimes (``transient/lifetime``, 2018-19 preemptible VMs) -- for GCP only, never borrowed
    by another provider, and without the 24 h stop unless ``gcp_kind`` is ``preemptible``
    (GCP's Spot VMs have no maximum lifetime); else the documented ``scenario``
    (``catalog/data/spot_scenarios.csv``: pessimistic = the worst published AWS zone with
    capacity gaps, optimistic = the Spot Advisor ``band``). The data is read on the first
    call; ``used`` records what each (provider, GPU, region) got.
    """

    data_dir: Path | None
    catalog: Any
    band: str = DEFAULT_BAND
    hazard_per_hour: float | None = None
    method: str = "weibull"
    scenario: str = "pessimistic"
    gcp_kind: str = "spot"
    named: Any = None  # (distribution, meta) of a model fitted by `gpucast fit lifetimes`
    used: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: the distribution each key of ``used`` drew
    drawn: dict[str, LifetimeDistribution] = field(default_factory=dict)
    _model: Any = None
    _fitted_on: str = ""
    _tried: bool = False
    _band: Any = None

    def __post_init__(self) -> None:
        from gpucast.catalog.spot import spot_scenarios
        from gpucast.domain.spot import SPOT_SCENARIOS
        from gpucast.predict.revocation import hazard_from_interruption_band

        if self.method not in LIFETIME_METHODS:
            raise InvalidSpecError(
                "lifetime-method",
                f"must be one of {', '.join(LIFETIME_METHODS)}",
                got=self.method,
                fix="e.g. --lifetime-method weibull",
            )
        if self.scenario not in SPOT_SCENARIOS:
            raise InvalidSpecError(
                "spot-scenario",
                f"must be one of {', '.join(SPOT_SCENARIOS)}",
                got=self.scenario,
                fix="e.g. --spot-scenario pessimistic",
            )
        if self.gcp_kind not in ("spot", "preemptible"):
            raise InvalidSpecError(
                "spot-kind",
                "must be spot or preemptible",
                got=self.gcp_kind,
                fix="--spot-kind spot",
            )
        self._band = hazard_from_interruption_band(self.band)
        spot_scenarios()  # the documented scenarios load (and are checked) up front

    # -- what each node gets ----------------------------------------------------------------
    def __call__(self, gpu: str, region: str, provider: str = "") -> LifetimeDistribution:
        dist, _ = self.lookup(gpu, region, provider)
        return dist

    def lookup(self, gpu: str, region: str, provider: str = "") -> tuple[LifetimeDistribution, str]:
        """The distribution for a node and what it rests on: ``given``, ``named``,
        ``fitted`` or ``scenario``."""
        provider = provider or self.provider_of(region)
        key = f"{provider or '?'} {self._name(gpu)} {region}"
        dist, kind = self._choose(gpu, region, provider)
        self.used[key] = (kind, dist.source)
        self.drawn[key] = dist
        return dist, kind

    def few_revocations(self, *, named_source: bool = False) -> str | None:
        """Which drawn lifetimes rest on few observed revocations, with their counts
        (:func:`gpucast.predict.revocation.few_revocations_note`; ``None``: none), and with
        ``named_source`` the data they were fitted on."""
        from gpucast.predict.revocation import few_revocations_note

        note = few_revocations_note(self.drawn.values())
        return f"{note} ({self.fitted_on})" if note and named_source else note

    def not_published(self, kinds: Sequence[str] | None = None) -> str | None:
        """Where the lifetimes drawn (or ``kinds``, from :meth:`kind`) are not the published
        GCE fit the spot-training validation ran on (``validation.csv``: lifetimes from
        ``transient/lifetime``), what they are instead; ``None``: the published fit only."""
        drawn = [kind for kind, _ in self.used.values()] if kinds is None else list(kinds)
        words = {
            "given": "a user-given hazard",
            "named": "a named model (--lifetimes)",
            "scenario": f"the {self.scenario} scenario",
        }
        other = list(dict.fromkeys(words[k] for k in drawn if k in words))
        if not other:
            return None
        return f"validated with the published GCE lifetimes; this run's: {', '.join(other)}"

    def kind(self, gpu: str, region: str, provider: str = "") -> str:
        """What a node's lifetimes rest on (``given``, ``named``, ``fitted``, ``scenario``),
        without recording it in ``used``."""
        return self._choose(gpu, region, provider or self.provider_of(region))[1]

    def capacity_gap(self, gpu: str, region: str, provider: str = "") -> Delay:
        """How long a spot replacement waits for capacity: the gaps of the named model's
        trace where it applies, the pessimistic scenario's gap where that applies, else 0."""
        from gpucast.catalog.spot import spot_scenarios

        _, kind = self._choose(gpu, region, provider or self.provider_of(region))
        if kind == "named":
            gaps = self.named[1].get("gaps") if isinstance(self.named[1], dict) else None
            return 0.0 if gaps is None else gaps.sample
        return spot_scenarios()[self.scenario].capacity_gap_s if kind == "scenario" else 0.0

    def named_scope(self, name: str) -> str:
        """The named model ``name`` (``--lifetimes``) with the nodes it covers, in words."""
        meta = self.named[1] if self.named is not None and isinstance(self.named[1], dict) else {}
        parts = [str(meta[k]) for k in ("provider", "gpu", "region") if meta.get(k)]
        return f"{name!r} ({' '.join(parts) or 'every node'})"

    def rests_on_scenario(self, gpu: str, region: str, provider: str = "") -> bool:
        return self.kind(gpu, region, provider) == "scenario"

    def with_scenario(self, scenario: str) -> Lifetimes:
        """The same rule with the other documented scenario where no data applies."""
        return Lifetimes(
            data_dir=self.data_dir,
            catalog=self.catalog,
            band=self.band,
            hazard_per_hour=self.hazard_per_hour,
            method=self.method,
            scenario=scenario,
            gcp_kind=self.gcp_kind,
            named=self.named,
        )

    def _choose(self, gpu: str, region: str, provider: str) -> tuple[LifetimeDistribution, str]:
        dist, kind = self._choose_uncapped(gpu, region, provider)
        return self._preemptible(dist, provider), kind

    def _preemptible(self, dist: LifetimeDistribution, provider: str) -> LifetimeDistribution:
        """A GCP legacy preemptible VM (``--spot-kind preemptible``) is stopped at 24 h whatever
        its hazard: a given hazard, a scenario or a named model (the published fit has the stop
        already); a model without a cap field (a bursty one) is left as it is."""
        from gpucast.domain.spot import GCP_PREEMPTIBLE_CAP_S

        if self.gcp_kind != "preemptible" or provider != "gcp":
            return dist
        if not dataclasses.is_dataclass(dist) or getattr(dist, "cap_s", False) is not None:
            return dist
        return dataclasses.replace(
            dist,
            cap_s=GCP_PREEMPTIBLE_CAP_S,
            source=f"{dist.source}; stopped at 24 h (--spot-kind preemptible)",
        )

    def _choose_uncapped(
        self, gpu: str, region: str, provider: str
    ) -> tuple[LifetimeDistribution, str]:
        from gpucast.predict.revocation import ExponentialLifetime

        if self.hazard_per_hour is not None:
            return (
                ExponentialLifetime(
                    hazard_per_hour=self.hazard_per_hour,
                    source=f"user-given hazard {self.hazard_per_hour:g} revocations/h",
                ),
                "given",
            )
        if self.named is not None and _covers(self.named[1], gpu, region, provider, self.catalog):
            return self.named[0], "named"
        if provider in ("gcp", ""):
            fitted = self._fitted(gpu, region)
            if fitted is not None:
                return fitted, "fitted"
        return self._scenario_distribution(gpu, provider), "scenario"

    def _fitted(self, gpu: str, region: str) -> LifetimeDistribution | None:
        if not self._tried:
            self._fit()
        if self._model is None:
            return None
        key = self._model_gpu(gpu)
        if key is None:
            return None
        dist = self._model.distribution(key.upper(), region)
        if self.gcp_kind == "spot" and getattr(dist, "cap_s", None) is not None:
            dist = dataclasses.replace(
                dist,
                cap_s=None,
                source=f"{dist.source}; fitted on GCE preemptible VMs, applied to GCP Spot "
                "VMs without the 24 h stop",
            )
        return dist  # type: ignore[no-any-return]

    def _scenario_distribution(self, gpu: str, provider: str) -> LifetimeDistribution:
        from gpucast.catalog.spot import spot_scenarios
        from gpucast.predict.revocation import ExponentialLifetime

        chosen = spot_scenarios()[self.scenario]
        what = f"no lifetime data for {provider or 'this provider'} {self._name(gpu)}"
        if chosen.hazard_per_node_hour is None:
            return ExponentialLifetime(
                hazard_per_hour=self._band.hazard_per_hour,
                source=f"{what}: {self.scenario} scenario, {self._band.source}",
            )
        per_day = chosen.hazard_per_node_hour * 24
        return ExponentialLifetime(
            hazard_per_hour=chosen.hazard_per_node_hour,
            source=f"{what}: {self.scenario} scenario, {per_day:.1f} revocations per node per "
            f"24 h and {chosen.capacity_gap_s / 3600:.1f} h capacity gaps ({chosen.source_url})",
        )

    # -- the published data --------------------------------------------------------------------
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
            f"of GCE preemptible VMs, 2018-19{skipped}; used for GCP only)"
        )

    @property
    def fitted_on(self) -> str:
        if self.hazard_per_hour is not None:
            return "not used: a hazard was given"
        if not self._tried:
            return "published GCE lifetimes not needed (they apply to GCP GPUs only)"
        return self._fitted_on

    def covers(self, gpu: str) -> bool:
        """Whether the published lifetimes cover catalog GPU ``gpu`` (for GCP)."""
        if self.hazard_per_hour is not None:
            return False
        if not self._tried:
            self._fit()
        return self._model is not None and self._model_gpu(gpu) is not None

    def _model_gpu(self, gpu: str) -> str | None:
        name = self._name(gpu)
        for g in self._model.gpus():
            try:
                if self.catalog.gpu(g).name == name:
                    return str(g)
            except UnknownGpuError:
                continue
        return None

    def _name(self, gpu: str) -> str:
        try:
            return str(self.catalog.gpu(gpu).name)
        except UnknownGpuError:
            return gpu

    def provider_of(self, region: str) -> str:
        """The one provider with offers in ``region`` ('': none, or several)."""
        providers = {o.provider for o in self.catalog.find_offers(region=region)}
        return providers.pop() if len(providers) == 1 else ""

    @property
    def fallback(self) -> LifetimeDistribution:
        """The distribution of a node that no data covers (the chosen scenario's)."""
        return self._scenario_distribution("", "")

    def source(self) -> str:
        if self.hazard_per_hour is not None:
            return f"user-given hazard {self.hazard_per_hour:g} revocations/h for every node"
        if not self.used and self.named is None:
            return "not used: no spot node drew a lifetime"
        parts = [self.fitted_on]
        if self.named is not None:
            told = self.named[0].source  # named_lifetimes says "named model 'NAME': ..."
            parts.append(told if told.startswith("named model") else f"named model: {told}")
        by_kind: dict[str, list[str]] = {}
        for key, (kind, _) in sorted(self.used.items()):
            by_kind.setdefault(kind, []).append(key)
        labels = {
            "fitted": "published GCE lifetimes",
            "named": "the named model",
            "scenario": f"the {self.scenario} scenario (no data)",
            "given": "the given hazard",
        }
        for kind, keys in by_kind.items():
            nodes = ", ".join(sorted({" ".join(k.split()[:2]) for k in keys}))
            parts.append(f"{labels[kind]} for {nodes}")
        return "; ".join(parts)

    def kinds_used(self) -> set[str]:
        return {kind for kind, _ in self.used.values()}


def _covers(meta: Any, gpu: str, region: str, provider: str, catalog: Any) -> bool:
    """Whether a named model's scope (provider / gpu / region, each optional) covers a node."""
    if not isinstance(meta, dict):
        return True
    want_gpu = meta.get("gpu")
    if want_gpu:
        try:
            if catalog.gpu(want_gpu).name != catalog.gpu(gpu).name:
                return False
        except UnknownGpuError:
            return False
    if meta.get("provider") and provider and meta["provider"] != provider:
        return False
    return not (meta.get("region") and meta["region"] != region)


def lifetime_distribution(model: Any, meta: Mapping[str, Any]) -> LifetimeDistribution:
    """The lifetime distribution of a fitted model: per GPU and region for a
    ``RevocationModel`` (the scope's GPU, else the first it knows), else the model's own."""
    if hasattr(model, "gpus"):
        known = list(model.gpus())
        gpu = str(meta.get("gpu") or "").lower()
        key = gpu if gpu in known else known[0]
        return model.distribution(key.upper(), meta.get("region") or None)  # type: ignore[no-any-return]
    return model.distribution()  # type: ignore[no-any-return]


def named_lifetimes(db: Path, name: str) -> tuple[LifetimeDistribution, dict[str, Any]]:
    """The lifetime model stored under ``name`` (``gpucast fit lifetimes --name NAME``) and
    its meta: scope (provider, gpu, region; any may be empty), source and, for node-count
    traces, the capacity gaps seen (``meta["gaps"]``: a sampler, or None)."""
    from gpucast.predict.estimators import load_estimator
    from gpucast.store.db import Store

    if not Path(db).exists():
        raise InvalidSpecError(
            "lifetimes",
            f"no store at {db} to read the model {name!r} from",
            fix="fit one first: gpucast fit lifetimes --trace FILE --name NAME (or pass --db)",
        )
    with Store(db).open(create=False) as store:
        model_dict, meta = store.named_model(LIFETIMES_KIND, name, field="lifetimes")
    dist = lifetime_distribution(load_estimator(model_dict), meta)
    gaps = meta.get("capacity_gaps")
    meta = {**meta, "gaps": None if not gaps else load_estimator(gaps)}
    source = f"named model {name!r}: {meta.get('source') or dist.source}"
    return dataclasses.replace(dist, source=source), meta  # type: ignore[type-var]


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


def notice_assumption() -> Assumption:
    """What the spot Monte Carlo does with the providers' revocation notice and billing
    increments (``catalog/data/spot_markets.csv``): nothing -- said, not left for a reader of
    ``gpucast catalog spot`` to assume (QA 41 QS #2)."""
    from gpucast.catalog.spot import spot_markets

    notices = ", ".join(f"{m.provider} {m.notice_s:g} s" for m in spot_markets() if m.current)
    return Assumption(
        name="revocation notice",
        value="not used: a revocation loses the work since the last checkpoint (the notice "
        f"before it, {notices}, is not taken to save one); spot servers are billed per "
        "second held (the providers' billing increments and minimums are not applied)",
        source="catalog/data/spot_markets.csv (gpucast catalog spot)",
        override="--checkpoint-every (a shorter interval loses less)",
    )


def spot_risk_inputs(
    *,
    data_dir: Path | None,
    catalog: Any,
    store: Path,
    band: str = DEFAULT_BAND,
    hazard_per_hour: float | None = None,
    scenario: str = "pessimistic",
    lifetimes: str | None = None,
    fallback_after_s: float | None = None,
    move_region: str | None = None,
    move_after_s: float = 900.0,
    checkpoint_bytes: float | None = None,
) -> tuple[RiskInputs, Lifetimes, StartupDelays]:
    """What the spot Monte Carlo of a plan rests on (:class:`gpucast.plan.inputs.RiskInputs`):
    node lifetimes (the published data, a stored model named ``lifetimes``, a constant
    ``hazard_per_hour``, else the ``band`` or the documented ``scenario``), start-ups and
    restarts (the published data, else defaults), capacity gaps, the fallback to on demand and
    managed recovery (``move_region``). ``checkpoint_bytes``: the size the plan checkpoints
    (its seconds from CM-DARE's saves, :func:`checkpoint_cost`); None: the caller prices its
    own checkpoints (``RiskInputs.checkpoint`` unset)."""
    from gpucast.plan.inputs import RiskInputs

    lives = Lifetimes(
        data_dir=data_dir,
        catalog=catalog,
        band=band,
        hazard_per_hour=hazard_per_hour,
        scenario=scenario,
        named=None if lifetimes is None else named_lifetimes(store, lifetimes),
    )
    other = "optimistic" if scenario == "pessimistic" else "pessimistic"
    startup = StartupDelays(data_dir=data_dir)
    restart = restart_penalty(data_dir)
    sources = {
        "lifetimes": f"where no data applies: {lives.fallback.source}",
        "startup": startup.source(),
        "restart": restart.source,
    }
    checkpoint: Callable[[float], float] | None = None
    if checkpoint_bytes is not None:
        sources["checkpoint"] = checkpoint_cost(checkpoint_bytes, data_dir).source

        def checkpoint(size_bytes: float) -> float:
            return checkpoint_cost(size_bytes, data_dir).value

    risk = RiskInputs(
        lifetime=lives,
        startup=startup,
        startup_mean_s=startup.mean_s("on-demand"),
        restart_penalty_s=restart.value,
        checkpoint=checkpoint,
        sources=sources,
        scenario=scenario,
        alternative=(other, lives.with_scenario(other)),
        on_scenario=lives.rests_on_scenario,
        capacity_gap=lives.capacity_gap,
        fallback_after_s=fallback_after_s,
        move_to=None if move_region is None else _move_targets(catalog.offers, move_region),
        move_after_s=move_after_s,
    )
    return risk, lives, startup


def _move_targets(
    offers: Sequence[Offer], move_region: str
) -> Callable[[str, str, str], tuple[str, float, float] | None]:
    """For ``--move-region``: where a (provider, instance type) in a home region moves -- the
    named region, or ('auto') the cheapest other spot region of its provider -- and that
    region's spot and on-demand US$/h; None where the catalog sells no such spot offer."""
    wanted = move_region.strip().lower()
    regions = {o.region.lower() for o in offers}
    if wanted != "auto" and wanted not in regions:
        raise InvalidSpecError(
            "move-region",
            "is not a region of any catalog offer",
            got=move_region,
            fix="use 'auto' or a region listed by `gpucast catalog offers --spot`",
        )
    spot: dict[tuple[str, str], list[tuple[float, str, float]]] = {}
    for o in offers:
        if o.gpu is not None and o.spot_usd_per_hour is not None:
            key = (o.provider, o.instance_type)
            spot.setdefault(key, []).append(
                (o.spot_usd_per_hour, o.region, o.on_demand_usd_per_hour)
            )

    def target(provider: str, instance_type: str, home: str) -> tuple[str, float, float] | None:
        there = [
            x
            for x in spot.get((provider, instance_type), [])
            if x[1].lower() != home.lower() and (wanted == "auto" or x[1].lower() == wanted)
        ]
        if not there:
            return None
        usd, region, od = min(there)
        return region, usd, od

    return target
