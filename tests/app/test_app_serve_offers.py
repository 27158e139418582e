"""``simulate serve --provider / --region / --spot``: the servers simulated are priced by the
offer ``plan serve`` would rent with the same filters (CNN and language model alike)."""

from __future__ import annotations

import pytest

import gpucast
from gpucast.catalog import load_catalog
from gpucast.domain.errors import InvalidInputError
from gpucast.inputs.serving import build_server_options

CNN = dict(model="resnet50", gpu="T4", rate=20, duration_s=2)
LLM = dict(model="llama-3-8b", gpu="L4", rate=1, duration_s=5)


def _cheapest_per_gpu(gpu: str, *, spot: bool, provider: str | None = None) -> float:
    offers = load_catalog().find_offers(gpu=gpu, provider=provider, spot=spot)
    return min(o.price_usd_per_hour(spot=spot) / o.gpus for o in offers if o.gpus >= 1)


@pytest.mark.parametrize(
    ("filters", "provider"),
    [
        ({}, None),
        ({"spot": True}, None),
        ({"providers": ("aws",)}, "aws"),
        ({"providers": ("aws",), "spot": True}, "aws"),
    ],
)
def test_a_cnn_server_is_priced_as_plan_serve_prices_it(
    filters: dict, provider: str | None
) -> None:
    spot = bool(filters.get("spot"))
    run = gpucast.simulate_serve(**CNN, **filters).to_dict()
    want = _cheapest_per_gpu("T4", spot=spot, provider=provider)
    assert run["cost_usd_per_hour"] == pytest.approx(want)
    options, _ = build_server_options(gpus=["T4"], no_mig=True, no_cpu=True, spot=spot,
                                      providers=filters.get("providers", ()))  # fmt: skip
    assert [o.price_usd_per_hour for o in options] == [pytest.approx(want)]


def test_spot_is_cheaper_and_says_where_it_is_rented() -> None:
    demand = gpucast.simulate_serve(**CNN)
    spot = gpucast.simulate_serve(**CNN, spot=True, providers=("aws",), regions=("us-east-1",))
    assert spot.to_dict()["cost_usd_per_hour"] < demand.to_dict()["cost_usd_per_hour"]
    assert spot.sources["price"].endswith("(aws g4dn.xlarge in us-east-1, spot)")
    # a MIG slice costs its share of the spot GPU
    mig = gpucast.simulate_serve(**dict(CNN, gpu="A100-40GB"), mig="1g.5gb", spot=True)
    gpu = _cheapest_per_gpu("A100-40GB", spot=True)
    assert mig.to_dict()["cost_usd_per_hour"] == pytest.approx(gpu / 7)


def test_an_llm_deployment_is_priced_as_plan_serve_prices_it() -> None:
    for filters in ({"spot": True}, {"providers": ("aws",)}, {"providers": ("gcp",), "spot": True}):
        run = gpucast.simulate_llm_serve(**LLM, tp=1, **filters).to_dict()
        plan = gpucast.plan_llm_serve(
            model="llama-3-8b", rate=1, duration_s=5, gpu=["L4"], tp=[1], max_replicas=1,
            no_disaggregation=True, slo_ttft_ms=60_000, **filters,
        ).plan.candidates[0]  # fmt: skip
        assert run["cost_usd_per_hour"] == pytest.approx(plan.cost_usd_per_hour)
    spot = gpucast.simulate_llm_serve(**LLM, spot=True).to_dict()["cost_usd_per_hour"]
    assert spot == pytest.approx(_cheapest_per_gpu("L4", spot=True))


def test_filters_no_offer_meets_are_one_clear_error() -> None:
    with pytest.raises(
        InvalidInputError, match=r"gpu: no catalog offer of A10G within --provider gcp"
    ):
        gpucast.simulate_serve(**dict(CNN, gpu="A10G"), providers=("gcp",))
    # the language model's line names the GPU and the filters, as the CNN's (QA 40 I F8: it
    # was the generic "no catalog offer matches the GPU, provider, region and spot filters")
    with pytest.raises(
        InvalidInputError, match=r"gpu: no catalog offer of L4 within --provider azure"
    ):
        gpucast.simulate_llm_serve(**LLM, providers=("azure",))
    with pytest.raises(
        InvalidInputError, match=r"of A100-80GB within --region eu-central-1 --spot; relax"
    ):
        gpucast.simulate_llm_serve(
            **dict(LLM, gpu="A100-80GB"), regions=("eu-central-1",), spot=True
        )
    with pytest.raises(InvalidInputError, match="unknown region"):
        gpucast.simulate_serve(**CNN, providers=("azure",), regions=("us-central1",))


def test_a_given_price_is_not_attributed_to_the_offer_and_says_it_replaces_spot() -> None:
    """The QA pass: ``--price 1 --provider aws`` read "1 US$/h per GPU (aws g4dn.xlarge in
    us-east-1, on demand)", and --spot with --price said nothing. The given price is the
    user's (the offer only names the server); with --spot it replaces the spot prices -- in
    simulate serve (CNN, MIG slice, language model) and plan serve alike."""
    given = gpucast.simulate_serve(**CNN, price=1.0, providers=("aws",))
    said = given.sources["price"]
    assert said.startswith("1 US$/h per GPU (given with --price; the offer aws ")
    assert said.endswith(" names the server)") and "on demand" not in said
    assert given.to_dict()["cost_usd_per_hour"] == pytest.approx(1.0)
    spot = gpucast.simulate_serve(**CNN, price=1.0, spot=True).sources["price"]
    assert spot.endswith("; --price replaces the catalog's spot prices)")
    assert ", spot)" not in spot
    mig = gpucast.simulate_serve(**dict(CNN, gpu="A100-40GB"), mig="1g.5gb", price=7.0)
    assert mig.sources["price"].startswith("1 US$/h per slice: the GPU's 7 US$/h per GPU (given")
    llm = gpucast.simulate_llm_serve(**LLM, price=1.0, spot=True).to_dict()["sources"]["price"]
    assert llm.startswith("1 US$/h per GPU (given with --price; the offer ")
    assert llm.endswith("--price replaces the catalog's spot prices)")
    plan = gpucast.plan_llm_serve(
        model="llama-3-8b", rate=1, duration_s=5, gpu=["L4"], tp=[1], max_replicas=1,
        no_disaggregation=True, slo_ttft_ms=60_000, price=2.0, spot=True,
    )  # fmt: skip
    assert plan.assumptions["prices"] == (
        "2 US$/h per GPU (given), every GPU type; --price replaces the catalog's spot prices"
    )
    assert plan.plan.candidates[0].cost_usd_per_hour == pytest.approx(2.0)


def test_plan_serve_takes_price_for_a_cnn_as_simulate_serve_does() -> None:
    """QA 34 #12: ``plan serve --price`` was refused for a CNN ("applies to language models
    only") while simulate serve took it. Now one rule for both verbs and both kinds of model:
    every GPU at the given US$/h (a MIG slice its share), (0, 1e6] -- 0 refused by all."""
    from gpucast.domain.errors import InvalidSpecError

    plan = gpucast.plan_serve(
        models=["resnet50:20"], gpus=["T4"], slo_ms=50, price=1.0, no_mig=True, no_cpu=True,
        duration_s=5,
    )  # fmt: skip
    best = plan.plan.best
    assert best is not None
    assert best.cost_usd_per_hour == pytest.approx(sum(g.count for g in best.groups) * 1.0)
    assert plan.plan.assumptions["prices"].startswith("1 US$/h per GPU for every GPU type")
    run = gpucast.simulate_serve(**CNN, price=1.0).to_dict()
    assert run["cost_usd_per_hour"] == pytest.approx(1.0)
    options, _ = build_server_options(gpus=["A100-40GB"], no_cpu=True, price_usd_per_gpu_hour=7.0)
    priced = {o.name: o.price_usd_per_hour for o in options}
    assert priced["A100-40GB"] == pytest.approx(7.0)
    assert priced["A100-40GB/1g.5gb"] == pytest.approx(1.0)  # as simulate serve --mig prices it
    said = "price: must be in (0, 1,000,000] US$/h per GPU"
    for call in (
        lambda: gpucast.plan_serve(models=["resnet50:20"], slo_ms=50, price=0.0),
        lambda: gpucast.simulate_serve(**CNN, price=0.0),
        lambda: gpucast.plan_llm_serve(model="llama-3-8b", rate=1, slo_tpot_ms=50, price=0.0),
    ):
        with pytest.raises(InvalidSpecError) as err:
            call()
        assert str(err.value).startswith(said)


def test_plan_serve_says_a_mig_row_rents_whole_gpus() -> None:
    """QA 34 C #13: plan serve's MIG rows cost whole GPUs (2 x 1g.5gb = one A100's price)
    where simulate serve --mig charges its one slice's share; the prices line says which,
    and says nothing of MIG where no MIG row is planned."""
    plan = gpucast.plan_serve(
        models=["resnet50:20"], gpus=["A100-40GB"], slo_ms=50, no_cpu=True, duration_s=5,
        migs=["A100-40GB:1g.5gb"],
    )  # fmt: skip
    assert (
        "a MIG row rents whole GPUs: n slices of a profile cost ceil(n / the slices"
        in (plan.plan.assumptions["prices"])
    )
    whole = gpucast.plan_serve(
        models=["resnet50:20"], gpus=["T4"], slo_ms=50, no_cpu=True, duration_s=5, no_mig=True
    )
    assert "MIG" not in whole.plan.assumptions["prices"]


def test_cost_per_million_requests_is_per_request_served_in_both_verbs() -> None:
    """QA 34 C #14: ``plan serve`` divided by the offered rate (0.618) and ``simulate serve``
    by the served one (0.614) for the same deployment; one rule now: per request served."""
    from gpucast.domain.units import usd_per_million

    plan = gpucast.plan_serve(models=["resnet50:200"], gpus=["T4"], slo_ms=50, no_mig=True,
                              no_cpu=True, saturation_s=0)  # fmt: skip
    best = plan.plan.best
    assert best is not None
    (group,) = best.groups
    (choice,) = group.models
    run = gpucast.simulate_serve(
        model="resnet50", gpu="T4", rate=200, max_batch=choice.max_batch_size,
        max_delay_ms=choice.max_queue_delay_s * 1e3, instances=choice.instances,
    ).to_dict()  # fmt: skip
    assert run["throughput_rps"] != pytest.approx(200.0, rel=1e-3)  # a Poisson draw's
    want = usd_per_million(run["cost_usd_per_hour"], run["throughput_rps"])
    assert run["cost_usd_per_million"] == pytest.approx(want, rel=1e-12)
    assert best.cost_usd_per_million == pytest.approx(want, rel=1e-9)
    assert usd_per_million(1.0, 0.0) == float("inf")  # nothing served


def test_plan_serve_names_an_asked_gpu_it_could_not_plan() -> None:
    """--mig A30:1g.6gb,A100-40GB:1g.5gb planned the A100 alone without a word (QA 40 M #4)."""
    result = gpucast.plan_serve(
        models=["resnet50"], rate=50, slo="p99<100ms", duration_s=2,
        migs=["A30:1g.6gb", "A100-40GB:1g.5gb"],
    )  # fmt: skip
    out = result.to_dict()
    assert out["assumptions"]["not planned"].startswith("A30: no catalog offer prices it")
    assert {g["server"]["name"] for c in out["candidates"] for g in c["groups"]} == {
        "A100-40GB/1g.5gb"
    }
    with pytest.raises(InvalidInputError, match=r"mig: no server to plan on: A30: no catalog"):
        gpucast.plan_serve(models=["resnet50"], rate=50, slo="p99<100ms", migs=["A30:1g.6gb"])


def test_simulate_serve_says_when_its_slices_span_more_gpus() -> None:
    """8 1g.5gb slices need 2 A100s; the cost counted 8 slice shares without a word (QA 40
    M #8). An empty --mig ran the whole GPU (#9)."""
    run = gpucast.simulate_serve(
        model="resnet50", gpu="A100-40GB", mig="1g.5gb", servers=8, rate=20, duration_s=2
    ).to_dict()
    slice_usd = run["cost_usd_per_hour"] / 8
    said = run["sources"]["price"]
    assert "8 slices span 2 GPUs (7 1g.5gb a GPU)" in said
    assert f"the GPUs cost {2 * 7 * slice_usd:.4g} US$/h" in said
    seven = gpucast.simulate_serve(
        model="resnet50", gpu="A100-40GB", mig="1g.5gb", servers=7, rate=20, duration_s=2
    ).to_dict()
    assert "span" not in seven["sources"]["price"]
    with pytest.raises(InvalidInputError, match=r"^mig: is empty; name a profile"):
        gpucast.simulate_serve(model="resnet50", gpu="A100-40GB", mig=" ", rate=20)


def test_a_slice_too_small_for_the_largest_batch_names_the_batch() -> None:
    """bert-large at --max-batch 32 needs 8.28 GiB, a 1g.5gb slice holds 3.75 GiB: the fix
    listed instances, GPUs and spreading, not the batch that made it too big (QA 40 M #14)."""
    args = dict(model="bert-large", gpu="A100-40GB", mig="1g.5gb", rate=10, duration_s=2)
    with pytest.raises(InvalidInputError, match=r"memory: models need 8\.28 GiB .*--max-batch"):
        gpucast.simulate_serve(**args, max_batch=32)
    assert gpucast.simulate_serve(**args, max_batch=4).to_dict()["served"] > 0


def test_a_slices_links_say_the_figures_it_runs_at() -> None:
    """A 1g.5gb slice runs at a seventh of the GPU's PCIe and NIC share, but its pcie line read
    the whole GPU's 31.5 GB/s and its link '3.42857 Gbit/s' (QA 40 M #16, #11)."""
    run = gpucast.simulate_serve(
        model="resnet50", gpu="A100-40GB", mig="1g.5gb", rate=10, duration_s=2
    ).to_dict()
    whole = gpucast.simulate_serve(model="resnet50", gpu="A100-40GB", rate=10, duration_s=2)
    whole_pcie = float(whole.to_dict()["sources"]["pcie"].split(" GB/s")[0])
    pcie = run["sources"]["pcie"]
    assert pcie.startswith(f"{whole_pcie / 7:.3g} GB/s a slice: {whole_pcie:g} GB/s")
    assert pcie.endswith("shared by 7 1g.5gb slices")
    network = run["sources"]["network"]
    nic = float(whole.to_dict()["sources"]["network"].split("holds the ")[1].split(" ")[0])
    assert f"the {round(nic / 7, 2):g} Gbit/s link" in network
    assert network.endswith("shared by 7 1g.5gb slices") and f"{nic / 7:g}" not in network
    assert "shared by" not in whole.to_dict()["sources"]["pcie"]
