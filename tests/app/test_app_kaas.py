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
    assert "resnet18" in d["sources"]["model resnet18"]
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
    import gpucast.simulate.kaas as kaas

    def drawn(*args: object, **kwargs: object) -> None:
        raise AssertionError("the arrivals were drawn")

    monkeypatch.setattr(kaas, "poisson_arrivals", drawn)
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
