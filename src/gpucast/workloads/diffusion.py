"""Latent diffusion, written here (no diffusers): the MLPerf Training Stable Diffusion v2.

``stable-diffusion`` is the model of MLPerf Training's ``stable_diffusion`` benchmark (since
v3.1: Stable Diffusion v2 at 512x512 on a filtered LAION-400M subset; the reference follows
Stability AI's ``v2-inference.yaml``):

* the denoising UNet (``UNetModel`` of latent diffusion): 4 latent channels at 1/8 of the
  image side, 320 base channels x (1, 2, 4, 4), two residual blocks per level (GroupNorm 32,
  SiLU, 3x3 convolutions, the timestep embedding added), a spatial transformer after each
  residual block of the first three levels and in the middle (GroupNorm, linear projections,
  self-attention, cross-attention to the text, GEGLU feed-forward; 64-channel heads), strided
  3x3 convolutions down, nearest upsampling and a 3x3 convolution up, skips concatenated;
  865,910,724 parameters, all trained;
* the text encoder, frozen, run forward every step: OpenCLIP ViT-H/14's text tower (width 1,024,
  16 heads, causal, 77 tokens), its penultimate layer's output (23 of 24 layers, as SD v2
  conditions), which the cross-attentions read;
* the image side is already encoded: the benchmark's data are the VAE's latent moments, so
  the VAE encoder does not run in training (a latent is drawn from them: negligible work);
* loss: mean squared error between the predicted and the drawn noise at a random timestep
  (the noising of the latent is element-wise and priced with the step).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from gpucast.domain.errors import InvalidSpecError
from gpucast.workloads._options import boolean, positive_int, reject_unknown
from gpucast.workloads.base import Batch, Workload
from gpucast.workloads.language import _PreLNLayer

LATENT_CHANNELS = 4
CHANNEL_MULT = (1, 2, 4, 4)
ATTENTION_LEVELS = 3  # the first three levels (downsampling factors 1, 2, 4) and the middle
HEAD_CHANNELS = 64
CONTEXT_DIM = 1024
TEXT_TOKENS = 77
TEXT_VOCAB = 49_408
TEXT_HEADS = 16
TEXT_LAYERS = 23  # the penultimate of OpenCLIP ViT-H/14's 24


def _norm(channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(min(32, channels), channels, eps=1e-6)


class _ResBlock(nn.Module):
    def __init__(self, channels: int, out_channels: int, emb_channels: int) -> None:
        super().__init__()
        self.in_layers = nn.Sequential(
            _norm(channels), nn.SiLU(), nn.Conv2d(channels, out_channels, 3, padding=1)
        )
        self.emb_layers = nn.Sequential(nn.SiLU(), nn.Linear(emb_channels, out_channels))
        self.out_layers = nn.Sequential(
            _norm(out_channels), nn.SiLU(), nn.Conv2d(out_channels, out_channels, 3, padding=1)
        )
        self.skip = (
            nn.Identity() if channels == out_channels else nn.Conv2d(channels, out_channels, 1)
        )

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        h = self.in_layers(x) + self.emb_layers(emb)[:, :, None, None]
        return self.skip(x) + self.out_layers(h)


class _Attention(nn.Module):
    """Multi-head attention without biases on q/k/v (latent diffusion's ``CrossAttention``):
    keys and values from ``context`` when given, else from ``x``."""

    def __init__(self, dim: int, heads: int, context_dim: int | None = None) -> None:
        super().__init__()
        inner = heads * HEAD_CHANNELS
        kv_dim = dim if context_dim is None else context_dim
        self.heads = heads
        self.to_q = nn.Linear(dim, inner, bias=False)
        self.to_k = nn.Linear(kv_dim, inner, bias=False)
        self.to_v = nn.Linear(kv_dim, inner, bias=False)
        self.to_out = nn.Linear(inner, dim)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        source = x if context is None else context
        batch, seq, _ = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch, t.shape[1], self.heads, HEAD_CHANNELS).transpose(1, 2)

        q, k, v = split(self.to_q(x)), split(self.to_k(source)), split(self.to_v(source))
        attended = F.scaled_dot_product_attention(q, k, v)
        return self.to_out(attended.transpose(1, 2).reshape(batch, seq, -1))


class _TransformerBlock(nn.Module):
    def __init__(self, dim: int, heads: int, context_dim: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn1 = _Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.attn2 = _Attention(dim, heads, context_dim)
        self.norm3 = nn.LayerNorm(dim)
        self.ff_in = nn.Linear(dim, 8 * dim)  # GEGLU: value and gate, 4 x dim each
        self.ff_out = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        x = x + self.attn1(self.norm1(x))
        x = x + self.attn2(self.norm2(x), context)
        value, gate = self.ff_in(self.norm3(x)).chunk(2, dim=-1)
        return x + self.ff_out(value * F.gelu(gate))


class _SpatialTransformer(nn.Module):
    def __init__(self, channels: int, context_dim: int) -> None:
        super().__init__()
        heads = max(1, channels // HEAD_CHANNELS)
        inner = heads * HEAD_CHANNELS
        self.norm = _norm(channels)
        self.proj_in = nn.Linear(channels, inner)
        self.block = _TransformerBlock(inner, heads, context_dim)
        self.proj_out = nn.Linear(inner, channels)

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        tokens = self.norm(x).flatten(2).transpose(1, 2)
        tokens = self.proj_out(self.block(self.proj_in(tokens), context))
        return x + tokens.transpose(1, 2).reshape(b, c, h, w)


class _Stage(nn.Module):
    """One entry of the UNet's block lists: a residual block and its optional transformer, or
    a resampling convolution (``down``: stride 2; ``up``: nearest 2x, then the convolution)."""

    def __init__(
        self,
        res: _ResBlock | None = None,
        attn: _SpatialTransformer | None = None,
        conv: nn.Conv2d | None = None,
        up: bool = False,
    ) -> None:
        super().__init__()
        self.res, self.attn, self.conv, self.up = res, attn, conv, up

    def forward(self, x: torch.Tensor, emb: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        if self.res is not None:
            x = self.res(x, emb)
        if self.attn is not None:
            x = self.attn(x, context)
        if self.conv is not None:
            if self.up:
                x = F.interpolate(x, scale_factor=2.0, mode="nearest")
            x = self.conv(x)
        return x


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embedding of the diffusion timesteps ``t`` (``dim`` even)."""
    half = dim // 2
    freqs = torch.exp(
        -math.log(10_000.0) * torch.arange(half, dtype=torch.float32, device=t.device) / half
    )
    angles = t.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)


class UNet2D(nn.Module):
    """Latent diffusion's ``UNetModel`` with SD v2's settings (module docstring); ``width``
    replaces the 320 base channels (for small test models)."""

    def __init__(self, width: int = 320, context_dim: int = CONTEXT_DIM) -> None:
        super().__init__()
        emb = 4 * width
        self.width = width
        self.time_embed = nn.Sequential(nn.Linear(width, emb), nn.SiLU(), nn.Linear(emb, emb))
        self.conv_in = nn.Conv2d(LATENT_CHANNELS, width, 3, padding=1)
        down: list[_Stage] = []
        skips = [width]
        ch = width
        for level, mult in enumerate(CHANNEL_MULT):
            for _ in range(2):
                out = mult * width
                attn = _SpatialTransformer(out, context_dim) if level < ATTENTION_LEVELS else None
                down.append(_Stage(_ResBlock(ch, out, emb), attn))
                ch = out
                skips.append(ch)
            if level < len(CHANNEL_MULT) - 1:
                down.append(_Stage(conv=nn.Conv2d(ch, ch, 3, stride=2, padding=1)))
                skips.append(ch)
        self.down = nn.ModuleList(down)
        self.middle = nn.ModuleList(
            [
                _Stage(_ResBlock(ch, ch, emb), _SpatialTransformer(ch, context_dim)),
                _Stage(_ResBlock(ch, ch, emb)),
            ]
        )
        up: list[_Stage] = []
        for level in reversed(range(len(CHANNEL_MULT))):
            out = CHANNEL_MULT[level] * width
            for i in range(3):
                attn = _SpatialTransformer(out, context_dim) if level < ATTENTION_LEVELS else None
                conv = nn.Conv2d(out, out, 3, padding=1) if level and i == 2 else None
                up.append(_Stage(_ResBlock(ch + skips.pop(), out, emb), attn, conv, up=True))
                ch = out
        self.up = nn.ModuleList(up)
        self.out = nn.Sequential(
            _norm(width), nn.SiLU(), nn.Conv2d(width, LATENT_CHANNELS, 3, padding=1)
        )

    def forward(self, x: torch.Tensor, t: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        emb = self.time_embed(timestep_embedding(t, self.width).to(x.dtype))
        h = self.conv_in(x)
        saved = [h]
        for stage in self.down:
            h = stage(h, emb, context)
            saved.append(h)
        for stage in self.middle:
            h = stage(h, emb, context)
        for stage in self.up:
            h = stage(torch.cat([h, saved.pop()], dim=1), emb, context)
        return self.out(h)


class TextEncoder(nn.Module):
    """OpenCLIP ViT-H/14's text tower up to its penultimate layer, then the final LayerNorm
    (what SD v2 conditions on); frozen."""

    def __init__(self, layers: int = TEXT_LAYERS, width: int = CONTEXT_DIM) -> None:
        super().__init__()
        self.token_embedding = nn.Embedding(TEXT_VOCAB, width)
        self.positional_embedding = nn.Parameter(torch.zeros(TEXT_TOKENS, width))
        self.layers = nn.ModuleList(
            _PreLNLayer(width, TEXT_HEADS, 4 * width, 0.0) for _ in range(layers)
        )
        self.ln_final = nn.LayerNorm(width)
        self.requires_grad_(False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.token_embedding(tokens) + self.positional_embedding
        for layer in self.layers:
            x = layer(x)
        return self.ln_final(x)


class StableDiffusion(nn.Module):
    """The trained UNet, conditioned on the frozen text encoder's output (or on given text
    embeddings when ``text_encoder`` is None)."""

    def __init__(self, unet: UNet2D, text_encoder: TextEncoder | None) -> None:
        super().__init__()
        self.unet = unet
        self.text_encoder = text_encoder

    def forward(self, latents: torch.Tensor, t: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        if self.text_encoder is not None:
            with torch.no_grad():
                text = self.text_encoder(text)
        return self.unet(latents, t, text.to(latents.dtype))


def _noise_loss(predicted: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(predicted.float(), noise.float())


def stable_diffusion(**options: Any) -> Workload:
    """``stable-diffusion``; options ``resolution`` (512: the image side; latents are 1/8 of
    it, a multiple of 64), ``width`` (320 base channels), ``text_encoder`` (true: the frozen
    text tower runs each step; false: text embeddings are inputs), ``text_layers`` (23)."""
    reject_unknown(
        "stable-diffusion", options, ("resolution", "width", "text_encoder", "text_layers")
    )
    resolution = positive_int("resolution", options.get("resolution", 512))
    width = positive_int("width", options.get("width", 320))
    with_text = boolean("text_encoder", options.get("text_encoder", True))
    text_layers = positive_int("text_layers", options.get("text_layers", TEXT_LAYERS))
    if resolution % 64:
        raise InvalidSpecError(
            "resolution", "must be a multiple of 64 (latents 1/8 of the side, halved 3 times)",
            got=resolution, fix="e.g. --option resolution=512",
        )  # fmt: skip
    if width % 2:
        raise InvalidSpecError("width", "must be even (sinusoidal timestep embedding)", got=width)
    side = resolution // 8

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            encoder = TextEncoder(text_layers) if with_text else None
            return StableDiffusion(UNet2D(width), encoder)

    def make_batch(batch_size: int, device: torch.device) -> Batch:
        latents = torch.randn(batch_size, LATENT_CHANNELS, side, side, device=device)
        t = torch.randint(0, 1000, (batch_size,), device=device)
        if with_text:
            text = torch.randint(0, TEXT_VOCAB, (batch_size, TEXT_TOKENS), device=device)
        else:
            text = torch.randn(batch_size, TEXT_TOKENS, CONTEXT_DIM, device=device)
        noise = torch.randn(batch_size, LATENT_CHANNELS, side, side, device=device)
        return (latents, t, text), noise

    conditioning = (
        f"frozen {text_layers}-layer text encoder" if with_text else "text embeddings given"
    )
    return Workload(
        name="stable-diffusion",
        family="vision",
        sample_unit="images",
        build_model=build_model,
        make_batch=make_batch,
        loss=_noise_loss,
        description=f"Stable Diffusion v2 UNet (MLPerf stable_diffusion), {resolution}x"
        f"{resolution} images as {side}x{side} latents, base width {width}, {conditioning}",
        options={
            "resolution": resolution,
            "width": width,
            "text_encoder": with_text,
            "text_layers": text_layers,
        },
    )
