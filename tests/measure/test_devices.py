from __future__ import annotations

import pytest
import torch

from gpucast.domain.errors import DeviceUnavailableError, InvalidSpecError
from gpucast.measure.devices import device_label, resolve_device

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")


def test_cpu_and_auto_without_cuda() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(" CPU ") == torch.device("cpu")
    expected = "cuda:0" if torch.cuda.is_available() else "cpu"
    assert device_label(resolve_device("auto")) == expected


@no_cuda
@pytest.mark.parametrize("text", ["cuda", "cuda:0", "cuda:3"])
def test_cuda_on_a_cpu_machine_says_how_to_fix(text: str) -> None:
    with pytest.raises(DeviceUnavailableError) as info:
        resolve_device(text)
    assert info.value.exit_code == 2
    assert "no CUDA device" in str(info.value)
    assert "use --device cpu or install a CUDA build of torch" in str(info.value)


def test_out_of_range_index(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda") == torch.device("cuda", 0)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(DeviceUnavailableError, match=r"2 CUDA device\(s\) \(cuda:0, cuda:1\)"):
        resolve_device("cuda:2")


@pytest.mark.parametrize("text", ["", "tpu", "gpu0", "cuda:x", "cuda:-1", "cpu:1", "mps", "cuda:"])
def test_unknown_device_strings(text: str) -> None:
    with pytest.raises(InvalidSpecError) as info:
        resolve_device(text)
    assert info.value.field == "device"


def test_labels() -> None:
    assert device_label(torch.device("cpu")) == "cpu"
    assert device_label(torch.device("cuda")) == "cuda:0"
    assert device_label(torch.device("cuda", 3)) == "cuda:3"


@pytest.mark.gpu
def test_cuda_resolves_on_a_gpu_machine() -> None:
    assert resolve_device("cuda") == torch.device("cuda", 0)
    assert device_label(resolve_device("auto")) == "cuda:0"
