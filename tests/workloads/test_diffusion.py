"""Stable Diffusion v2 (MLPerf Training stable_diffusion): size, conditioning, loss."""

from __future__ import annotations

import pytest
import torch

from gpucast.domain.errors import InvalidSpecError
from gpucast.workloads import get_workload, list_workloads
from gpucast.workloads.diffusion import TEXT_TOKENS, timestep_embedding

META = torch.device("meta")


def _count(module: torch.nn.Module, trainable: bool) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad == trainable)


def test_the_unet_has_sd_v2s_parameters_and_the_text_tower_is_frozen() -> None:
    model = get_workload("stable-diffusion").build_model(META)
    # Stability AI's v2 UNet: 865,910,724 parameters; OpenCLIP ViT-H/14 text to layer 23
    assert _count(model, trainable=True) == 865_910_724
    assert _count(model.text_encoder, trainable=False) == 340_387_840
    assert _count(model.text_encoder, trainable=True) == 0
    assert "stable-diffusion" in list_workloads()


def test_512_pixel_images_are_64x64_latents_conditioned_on_77_tokens() -> None:
    workload = get_workload("stable-diffusion")
    (latents, t, text), noise = workload.make_batch(2, META)
    assert latents.shape == noise.shape == (2, 4, 64, 64)
    assert t.shape == (2,) and text.shape == (2, TEXT_TOKENS)
    model = workload.build_model(META)
    assert model(latents, t, text).shape == noise.shape


def test_a_real_step_trains_the_unet_and_leaves_the_text_encoder_alone() -> None:
    workload = get_workload("stable-diffusion", resolution=64, width=32, text_layers=1)
    torch.manual_seed(0)
    model = workload.build_model(torch.device("cpu"))
    inputs, target = workload.make_batch(2, torch.device("cpu"))
    loss = workload.loss(model(*inputs), target)
    loss.backward()
    assert torch.isfinite(loss.detach()) and float(loss.detach()) > 0.0
    assert model.unet.conv_in.weight.grad is not None
    assert model.unet.down[1].attn.block.attn2.to_k.weight.grad is not None  # cross-attention
    assert all(p.grad is None for p in model.text_encoder.parameters())


def test_given_text_embeddings_replace_the_encoder() -> None:
    workload = get_workload("stable-diffusion", text_encoder=False, width=32)
    model = workload.build_model(META)
    (latents, t, text), _ = workload.make_batch(1, META)
    assert model.text_encoder is None and text.shape == (1, TEXT_TOKENS, 1024)
    assert model(latents, t, text).shape == latents.shape


def test_timestep_embeddings_differ_by_step_and_are_bounded() -> None:
    emb = timestep_embedding(torch.tensor([0, 1, 999]), 32)
    assert emb.shape == (3, 32) and float(emb.abs().max()) <= 1.0
    assert not torch.allclose(emb[0], emb[1]) and not torch.allclose(emb[1], emb[2])


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"resolution": 500}, "resolution"),
        ({"width": 33}, "width"),
        ({"width": 0}, "width"),
        ({"text_encoder": "maybe"}, "text_encoder"),
        ({"layers": 3}, "layers"),
    ],
)
def test_bad_options_name_the_field(options: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidSpecError, match=field):
        get_workload("stable-diffusion", **options)
