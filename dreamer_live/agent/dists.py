"""Output distributions of DreamerV3: symlog/symexp, two-hot bins, unimix categoricals, bounded normals.

Everything here works on float32 arrays of logits or raw parameters; the networks produce those and
the losses and samplers below turn them into predictions, log-likelihoods and samples.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

f32 = jnp.float32
sg = jax.lax.stop_gradient


def symlog(x):
    """sign(x) * log(1 + |x|): compresses large magnitudes, identity near zero."""
    return jnp.sign(x) * jnp.log1p(jnp.abs(x))


def symexp(x):
    """Inverse of symlog: sign(x) * (exp(|x|) - 1)."""
    return jnp.sign(x) * jnp.expm1(jnp.abs(x))


# ----------------------------------------------------------------------------------------------
# Two-hot regression over symexp-spaced bins (reward and value heads).


def symexp_bins(num: int = 255, low: float = -20.0, high: float = 20.0):
    """Bins uniform in symlog space from `low` to `high`, returned in raw space (symmetric around 0)."""
    assert num % 2 == 1 and low == -high, "bins must be symmetric with a bin at zero"
    # In numpy: a constant, where jnp's eager ops would compile ~10 small programs in every process.
    half = np.linspace(low, 0.0, (num - 1) // 2 + 1, dtype=np.float32)
    half = np.sign(half) * np.expm1(np.abs(half))
    return jnp.asarray(np.concatenate([half, -half[:-1][::-1]], 0))


def _twohot(x, bins):
    """Indices of the bins below / above x and their interpolation weights."""
    x = x.astype(f32)
    n = bins.shape[-1]
    # compare_all: one fused comparison with every bin; the unrolled binary search ("scan_unrolled")
    # was a sixth of the compiled train step and no faster to run
    # (docs/experiments/2026-11-30-test-suite-time-slow-cpu.md)
    below = jnp.clip(jnp.searchsorted(bins, x, side="right", method="compare_all") - 1, 0, n - 1)
    above = jnp.clip(below + (bins[below] < x), 0, n - 1)
    equal = below == above
    dist_below = jnp.where(equal, 1.0, jnp.abs(bins[below] - x))
    dist_above = jnp.where(equal, 1.0, jnp.abs(bins[above] - x))
    total = dist_below + dist_above
    return below, above, dist_above / total, dist_below / total


def twohot_encode(x, bins):
    """Target distribution putting weight on the two bins around x, linearly interpolated."""
    below, above, w_below, w_above = _twohot(x, bins)
    n = bins.shape[-1]
    return jax.nn.one_hot(below, n) * w_below[..., None] + jax.nn.one_hot(above, n) * w_above[..., None]


def twohot_pred(logits, bins):
    """Expected value under softmax(logits) over symmetric bins (symexp_bins).

    Each positive bin is weighed by its probability minus its mirror's, so equal probabilities
    cancel exactly in any summation order: a bin of 4.8e8 times 1/255 would leave a rounding error
    of ~0.1 that XLA's fusion choices (which differ with the device count) move around."""
    probs = jax.nn.softmax(logits.astype(f32), -1)
    m = (bins.shape[-1] - 1) // 2
    return ((probs[..., m + 1:] - probs[..., :m][..., ::-1]) * bins[m + 1:]).sum(-1)


def twohot_loss(logits, bins, target):
    """Cross-entropy between softmax(logits) and the two-hot encoding of `target` (no gradient)."""
    below, above, w_below, w_above = jax.tree.map(sg, _twohot(target, bins))
    logp = jax.nn.log_softmax(logits.astype(f32), -1)
    pick = lambda i: jnp.take_along_axis(logp, i[..., None], -1)[..., 0]  # noqa: E731
    return -(w_below * pick(below) + w_above * pick(above))


# ----------------------------------------------------------------------------------------------
# Categoricals with a uniform mixture (stochastic latents, discrete policies).


def unimix_logits(logits, unimix: float):
    """Log-probabilities of (1 - unimix) * softmax(logits) + unimix * uniform."""
    logits = logits.astype(f32)
    if not unimix:
        return jax.nn.log_softmax(logits, -1)
    probs = jax.nn.softmax(logits, -1)
    probs = (1 - unimix) * probs + unimix / logits.shape[-1]
    return jnp.log(probs)


def uniform(key, shape, minval=0.0, maxval=1.0):
    """Uniform noise drawn flat then reshaped.

    With JAX's default partitionable threefry, drawing multi-dimensional shapes directly compiles
    several seconds slower per call site on the CPU backend; a flat draw avoids that.
    """
    size = math.prod(shape)
    return jax.random.uniform(key, (size,), f32, minval, maxval).reshape(shape)


def normal(key, shape):
    """Standard normal noise drawn flat then reshaped (see `uniform`)."""
    return jax.random.normal(key, (math.prod(shape),), f32).reshape(shape)


def onehot_sample(key, logp):
    """One-hot sample with straight-through gradients to the probabilities."""
    noise = uniform(key, logp.shape, jnp.finfo(f32).tiny, 1.0)
    index = jnp.argmax(sg(logp) - jnp.log(-jnp.log(noise)), -1)  # Gumbel-max
    sample = jax.nn.one_hot(index, logp.shape[-1], dtype=f32)
    probs = jnp.exp(logp)
    return sample + (probs - sg(probs))  # exact one-hot forward, straight-through backward


def onehot_mode(logp):
    """The most likely class as a one-hot vector."""
    return jax.nn.one_hot(jnp.argmax(logp, -1), logp.shape[-1], dtype=f32)


def categorical_logp(logp, onehot):
    """Log-likelihood of a one-hot `onehot` under log-probabilities `logp`."""
    return (logp * onehot).sum(-1)


def categorical_entropy(logp):
    """Entropy of the categorical with log-probabilities `logp` (last axis)."""
    return -(jnp.exp(logp) * logp).sum(-1)


def categorical_kl(logp, logq):
    """KL(p || q) over the last axis, both given as log-probabilities."""
    return (jnp.exp(logp) * (logp - logq)).sum(-1)


def kl_losses(post_logp, prior_logp, free_nats: float):
    """DreamerV3's balanced KL: dyn trains the prior, rep the posterior, each clipped below at free_nats.

    Inputs are [..., stoch, classes] log-probabilities; the KL is summed over the stoch groups.
    Returns (dyn, rep, kl) where kl is the unclipped value for logging.
    """
    dyn = categorical_kl(sg(post_logp), prior_logp).sum(-1)
    rep = categorical_kl(post_logp, sg(prior_logp)).sum(-1)
    kl = sg(dyn)
    if free_nats:
        dyn = jnp.maximum(dyn, free_nats)
        rep = jnp.maximum(rep, free_nats)
    return dyn, rep, kl


# ----------------------------------------------------------------------------------------------
# Bounded normal for continuous actions in [-1, 1].


def bounded_normal(raw, minstd: float, maxstd: float):
    """Split raw outputs [..., 2d] into (mean = tanh, std in [minstd, maxstd])."""
    mean, std = jnp.split(raw.astype(f32), 2, -1)
    std = (maxstd - minstd) * jax.nn.sigmoid(std + 2.0) + minstd
    return jnp.tanh(mean), std


def normal_logp(mean, std, x):
    """Log-density of a diagonal normal, summed over the action dimensions."""
    z = (x - mean) / std
    return (-0.5 * z * z - jnp.log(std) - 0.5 * jnp.log(2 * jnp.pi)).sum(-1)


def normal_entropy(std):
    """Entropy of a diagonal normal, summed over the action dimensions."""
    return (0.5 * jnp.log(2 * jnp.pi * jnp.e) + jnp.log(std)).sum(-1)


def binary_loss(logit, target):
    """Negative log-likelihood of a (soft) binary target under a Bernoulli(sigmoid(logit))."""
    logit = logit.astype(f32)
    return -(target * jax.nn.log_sigmoid(logit) + (1 - target) * jax.nn.log_sigmoid(-logit))
