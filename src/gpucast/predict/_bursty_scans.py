"""The forward-backward pass of the Poisson hidden Markov model of
:mod:`gpucast.predict.bursty`: batched 2x2 products, the blocked prefix and suffix
scans (:func:`_prefix`, :func:`_suffix`) and the state posteriors they give
(:func:`_posterior`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpucast.predict._bursty_checks import FloatArray


def _mul(x: FloatArray, y: FloatArray) -> FloatArray:
    """Batched 2x2 products; matrices are laid out (2, 2, ...) so each entry is contiguous.
    ``y`` has the full batch shape (``x`` may broadcast against it)."""
    out = np.empty(y.shape)
    out[0, 0] = x[0, 0] * y[0, 0] + x[0, 1] * y[1, 0]
    out[0, 1] = x[0, 0] * y[0, 1] + x[0, 1] * y[1, 1]
    out[1, 0] = x[1, 0] * y[0, 0] + x[1, 1] * y[1, 0]
    out[1, 1] = x[1, 0] * y[0, 1] + x[1, 1] * y[1, 1]
    return out


#: Tick blocks of the prefix-product scan (see :func:`_prefix`).
_BLOCK = 16


def _rescaled(prod: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``prod`` divided by its largest entry per matrix, and the log of that entry."""
    scale = np.maximum(np.maximum(prod[0, 0], prod[0, 1]), np.maximum(prod[1, 0], prod[1, 1]))
    return prod / scale, np.log(scale)


def _prefix(m: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Prefix products ``m[:, :, 0] @ ... @ m[:, :, t]`` of 2x2 matrices laid out
    (2, 2, T, R), each rescaled so its largest entry is 1, and the logs of the scales taken
    out (Rabiner's scaling, applied to products).

    Blocked: the products within blocks of :data:`_BLOCK` ticks are formed side by side for
    all blocks, the blocks' totals are scanned the same way (recursively), and each block is
    then multiplied by the product of the blocks before it — about 2 log16(T) vectorised steps
    of Python, instead of one per tick.
    """
    n = m.shape[2]
    if n <= 2 * _BLOCK:
        p = np.empty_like(m)
        logs = np.zeros(m.shape[2:])
        p[:, :, 0], logs[0] = _rescaled(m[:, :, 0])
        for t in range(1, n):
            p[:, :, t], step = _rescaled(_mul(p[:, :, t - 1], m[:, :, t]))
            logs[t] = logs[t - 1] + step
        return p, logs
    blocks = -(-n // _BLOCK)
    rest = m.shape[3:]
    padded = np.zeros((2, 2, blocks * _BLOCK, *rest))
    padded[0, 0, n:] = padded[1, 1, n:] = 1.0  # identities after the last tick
    padded[:, :, :n] = m
    # (2, 2, position in block, block, ...): each step below reads contiguous memory
    mm = np.ascontiguousarray(np.swapaxes(padded.reshape(2, 2, blocks, _BLOCK, *rest), 2, 3))
    inner = np.empty_like(mm)
    inner_logs = np.zeros(mm.shape[2:])
    inner[:, :, 0], inner_logs[0] = _rescaled(mm[:, :, 0])
    for j in range(1, _BLOCK):
        inner[:, :, j], step = _rescaled(_mul(inner[:, :, j - 1], mm[:, :, j]))
        inner_logs[j] = inner_logs[j - 1] + step
    totals_p, totals_logs = _prefix(inner[:, :, -1])
    totals_logs = totals_logs + np.cumsum(inner_logs[-1], axis=0)
    before = np.empty_like(totals_p)  # the product of all blocks before block b
    before[:, :, 0] = np.eye(2).reshape(2, 2, *([1] * len(rest)))
    before[:, :, 1:] = totals_p[:, :, :-1]
    before_logs = np.zeros_like(totals_logs)
    before_logs[1:] = totals_logs[:-1]
    out, step = _rescaled(_mul(before[:, :, None], inner))
    logs = before_logs[None] + inner_logs + step
    out = np.swapaxes(out, 2, 3).reshape(2, 2, blocks * _BLOCK, *rest)
    return out[:, :, :n], np.swapaxes(logs, 0, 1).reshape(blocks * _BLOCK, *rest)[:n]


def _suffix(m: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Suffix products ``m[:, :, t] @ ... @ m[:, :, -1]`` (rescaled, as :func:`_prefix`):
    transposed, they are the prefix products of the transposed matrices in reverse order."""
    p, logs = _prefix(m[:, :, ::-1].transpose(1, 0, *range(2, m.ndim)))
    return p[:, :, ::-1].transpose(1, 0, *range(2, m.ndim)), logs[::-1]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Posterior:
    gamma: FloatArray  # (2, T, R): P(state at t | all data)
    xi: FloatArray  # (2, 2, R): expected transitions i -> j, summed over ticks
    filtered: FloatArray  # (2, T, R): P(state at t | data up to t)
    log_likelihood: FloatArray  # (R,)


def _posterior(
    y: FloatArray,
    x_h: FloatArray,
    lam: FloatArray,
    trans: FloatArray,
    p0: FloatArray,
    const: float,
    *,
    backward: bool = True,
) -> _Posterior:
    """E-step of a two-state Poisson HMM for R parameter sets at once.

    ``y``/``x_h``: revocations and node-hours per tick (T,); ``lam`` (2, R) hazards per
    node-hour; ``trans`` (2, 2, R) per-tick transition probabilities; ``p0`` (2, R) the
    state probabilities at tick 0. The forward and backward variables are products of the
    matrices ``trans[i, j] * emission_t[j]`` (:func:`_prefix`, :func:`_suffix`).
    """
    lam = np.maximum(lam, 1e-300)
    log_e = y[None, :, None] * np.log(lam)[:, None, :] - lam[:, None, :] * x_h[None, :, None]
    emax = np.maximum(log_e[0], log_e[1])  # (T, R); emissions are scaled by it
    e = np.exp(log_e - emax[None])  # (2, T, R)
    alpha0 = p0 * e[:, 0]
    total0 = alpha0[0] + alpha0[1]
    filtered = np.empty_like(e)
    filtered[:, 0] = alpha0 / total0
    loglik = np.log(total0) + emax.sum(axis=0) + const
    xi = np.zeros((2, 2, p0.shape[1]))
    if y.size == 1:
        return _Posterior(gamma=filtered, xi=xi, filtered=filtered, log_likelihood=loglik)
    m = trans[:, :, None, :] * e[None, :, 1:, :]  # (2, 2, T-1, R): trans[i, j] e_t[j]
    fwd, fwd_logs = _prefix(m)
    f0 = filtered[:, 0]
    alpha = f0[0][None, None] * fwd[0] + f0[1][None, None] * fwd[1]  # (2, T-1, R)
    sums = alpha[0] + alpha[1]
    filtered[:, 1:] = alpha / sums[None]
    loglik = loglik + np.log(sums[-1]) + fwd_logs[-1]
    if not backward:
        return _Posterior(gamma=filtered, xi=xi, filtered=filtered, log_likelihood=loglik)
    bwd, _ = _suffix(m)
    beta = np.ones_like(e)
    beta[:, :-1] = bwd[:, 0] + bwd[:, 1]  # (suffix product) @ 1
    beta /= (beta[0] + beta[1])[None]
    g = filtered * beta
    gamma = g / (g[0] + g[1])[None]
    # xi_t(i, j) ~ filtered_{t-1}(i) trans(i, j) e_t(j) beta_t(j), normalised per tick
    x = filtered[:, None, :-1] * m * beta[None, :, 1:]
    x /= (x[0, 0] + x[0, 1] + x[1, 0] + x[1, 1])[None, None]
    return _Posterior(gamma=gamma, xi=x.sum(axis=2), filtered=filtered, log_likelihood=loglik)
