"""gpucast.simulate_kaas through the Python API."""

from __future__ import annotations

import pytest

import gpucast
from gpucast.domain.errors import InvalidInputError, InvalidSpecError


def test_three_sharings_on_the_same_arrivals() -> None:
    r = gpucast.simulate_kaas(models=["mlp", "resnet18"], rate=30, pool_gpus=1, duration_s=2)
    d = r.to_dict()
    shares = d["sharing"]
    calls = {k: v["invocations"] for k, v in shares.items()}
    assert len(set(calls.values())) == 1 and calls["kernel"] > 0
    assert shares["dedicated"]["gpus"] == 2 and shares["kernel"]["gpus"] == 1
    # per kernel, mlp (a few kernels) does not wait behind resnet18's whole forward pass
    mlp_kernel = shares["kernel"]["per_function"]["mlp"]["p99_s"]
    mlp_function = shares["function"]["per_function"]["mlp"]["p99_s"]
    assert mlp_kernel <= mlp_function + 1e-12
    # the key names the model, the text does not repeat it (QA #27)
    assert d["sources"]["model resnet18"].startswith("68 kernels, ")
    assert "kaas-sharing" in str(d["validation"])


def test_same_seed_same_result() -> None:
    a = gpucast.simulate_kaas(models=["mlp"], rate=50, duration_s=1, seed=3).to_dict()
    b = gpucast.simulate_kaas(models=["mlp"], rate=50, duration_s=1, seed=3).to_dict()
    assert a == b


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"rate": 0}, "rate"),
        ({"duration_s": 7200}, "duration-s"),
        ({"models": [" "]}, "models"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_options(kw: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidSpecError, match=match):
        gpucast.simulate_kaas(**kw)


def test_a_run_too_large_is_refused_before_the_arrivals_are_drawn(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import gpucast.inputs.serving as serving

    def drawn(*args: object, **kwargs: object) -> None:
        raise AssertionError("the arrivals were drawn")

    monkeypatch.setattr(serving, "arrivals", drawn)
    # 30 million calls of resnet50: billions of kernels, once refused after 14.8 s and 2.4 GB
    # as "kernels: 30,002,158 to schedule" (calls, not kernels)
    with pytest.raises(InvalidSpecError) as error:
        gpucast.simulate_kaas(models=["resnet50"], gpu="H100-SXM", rate=100000, duration_s=300)
    text = str(error.value)
    assert "30,000,000 invocations expected" in text and "kernels per call: resnet50 " in text
    per_call = int(text.split("kernels per call: resnet50 ")[1].split(")")[0])
    assert f"about {30_000_000 * per_call:,} kernels" in text
    assert "--duration-s <=" in text and "--rate <=" in text and "--profile" not in text


def test_an_unknown_model_names_options_kaas_has() -> None:
    with pytest.raises(InvalidInputError, match="did you mean resnet50") as error:
        gpucast.simulate_kaas(models=["resnt50"])
    assert "--profile" not in str(error.value)


def test_an_overloaded_pool_says_so_and_marks_its_percentiles() -> None:
    """QA #1: 2,200 calls/s of resnet18 (0.86 ms on a T4 with its kernels' launch overhead;
    3,000 calls/s of 0.61 ms before QA 39 S #5) offer 1.9 GPUs of work to one GPU:
    every way of sharing is overloaded, the warning gives offered vs served calls/s and the
    GPUs the work needs, and the percentiles measure the run's length (they grow with it)."""
    short = gpucast.simulate_kaas(models=["resnet18"], rate=2200, duration_s=0.5)
    longer = gpucast.simulate_kaas(models=["resnet18"], rate=2200, duration_s=1)
    d = longer.to_dict()
    for name, r in d["sharing"].items():
        assert r["overloaded"] and not r["latency_steady"], name
        assert r["offered_per_s"] == pytest.approx(2200, rel=0.05)
        assert r["throughput_per_s"] < 0.6 * r["offered_per_s"]
        assert r["gpus_needed"] == 2
        assert r["latency_s"]["p50"] > short.to_dict()["sharing"][name]["latency_s"]["p50"]
    (warning,) = [w for w in d["warnings"] if w.startswith("overloaded:")]
    assert "calls/s offered, served" in warning and "--pool-gpus 2" in warning
    assert "not a steady state" in warning


def test_a_steady_pool_has_no_overload_warning() -> None:
    d = gpucast.simulate_kaas(models=["mlp", "resnet18"], rate=30, duration_s=2).to_dict()
    assert not any(r["overloaded"] for r in d["sharing"].values())
    assert all(r["latency_steady"] for r in d["sharing"].values())
    assert not any(w.startswith("overloaded") for w in d["warnings"])
    assert all(r["gpus_needed"] == 1 for r in d["sharing"].values() if r["gpus"] == 1)


def test_a_model_given_twice_is_two_functions_each_reported() -> None:
    """QA #27: ``--models mlp,mlp`` is two functions, each with its own line."""
    d = gpucast.simulate_kaas(models=["mlp", "mlp"], rate=10, duration_s=1).to_dict()
    assert d["models"] == ["mlp#1", "mlp#2"]
    assert set(d["sharing"]["kernel"]["per_function"]) == {"mlp#1", "mlp#2"}
    assert d["sharing"]["dedicated"]["gpus"] == 2
    assert list(d["sources"]) == ["model mlp"]
    # QA session 35: an MLP's pass on a T4 read "5 kernels, 0.00 ms" beside its p50 0.00054 ms
    assert d["sources"]["model mlp"].startswith("5 kernels, 0.02 ms on T4")
    assert "0.00054 ms on the device" in d["sources"]["model mlp"]


def test_the_validation_line_names_no_data_it_was_not_measured_on() -> None:
    """QA #27: the line ran the regime into a note ("2 GPUs on benchmarks/... prints")."""
    text = gpucast.simulate_kaas(models=["mlp"], pool_gpus=2, rate=5, duration_s=1).validation
    assert text.text().startswith("not validated for T4, fp32, 2 GPUs: no published")
    assert " on benchmarks/" not in text.text()


def test_a_language_model_is_named_as_one_not_as_unknown() -> None:
    """QA session 35: ``--models llama-2-7b`` said "unknown workload 'llama-2-7b'"."""
    with pytest.raises(InvalidSpecError, match=r"^models: llama-2-7b is a language model"):
        gpucast.simulate_kaas(models=["llama-2-7b"], rate=10, duration_s=1)


def test_functions_that_together_exceed_a_gpu_are_refused() -> None:
    """QA 37 V #5: every pool GPU holds every function's model; 12 bert-large functions
    (1.25 GiB of weights each) do not fit a T4 together, 9 do."""
    with pytest.raises(InvalidSpecError, match=r"^models: the 12 functions' weights plus the "
                       r"largest working set need 15\.2 GiB on every GPU") as e:  # fmt: skip
        gpucast.simulate_kaas(models=["bert-large"] * 12, gpu="T4", rate=1, duration_s=2)
    assert "more than a T4's 14.2 GiB usable of 16 GiB" in str(e.value)
    gpucast.simulate_kaas(models=["bert-large"] * 9, gpu="T4", rate=1, duration_s=2)
