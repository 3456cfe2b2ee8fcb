"""Optimizer as an optax chain: adaptive gradient clipping, LaProp (or Adam), linear warmup."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

f32 = jnp.float32


def clip_by_agc(clip: float = 0.3, pmin: float = 1e-3) -> optax.GradientTransformation:
    """Adaptive gradient clipping per tensor: ||g|| <= clip * max(pmin, ||param||)."""

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None):
        def fn(update, param):
            unorm = jnp.linalg.norm(update.reshape(-1).astype(f32))
            pnorm = jnp.linalg.norm(param.reshape(-1).astype(f32))
            upper = clip * jnp.maximum(pmin, pnorm)
            return update / jnp.maximum(1.0, unorm / upper)

        return jax.tree.map(fn, updates, params), state

    return optax.GradientTransformation(init_fn, update_fn)


class LaPropState(NamedTuple):
    """Step count, second-moment and momentum accumulators."""

    count: jax.Array
    nu: optax.Updates
    mu: optax.Updates


def scale_by_laprop(beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-20
                    ) -> optax.GradientTransformation:
    """LaProp: normalize by the bias-corrected RMS first, then apply bias-corrected momentum."""

    def init_fn(params):
        zeros = lambda: jax.tree.map(lambda p: jnp.zeros_like(p, f32), params)  # noqa: E731
        return LaPropState(jnp.zeros((), jnp.int32), zeros(), zeros())

    def update_fn(updates, state, params=None):
        del params
        count = optax.safe_increment(state.count)
        nu = jax.tree.map(lambda v, g: beta2 * v + (1 - beta2) * g * g, state.nu, updates)
        c2 = 1 - beta2 ** count.astype(f32)
        normed = jax.tree.map(lambda g, v: g / (jnp.sqrt(v / c2) + eps), updates, nu)
        mu = jax.tree.map(lambda m, g: beta1 * m + (1 - beta1) * g, state.mu, normed)
        c1 = 1 - beta1 ** count.astype(f32)
        out = jax.tree.map(lambda m: m / c1, mu)
        return out, LaPropState(count, nu, mu)

    return optax.GradientTransformation(init_fn, update_fn)


def schedule(lr: float, warmup: int):
    """Constant learning rate after a linear warmup over `warmup` updates."""
    if warmup <= 0:
        return optax.constant_schedule(lr)
    return optax.linear_schedule(0.0, lr, warmup)


def scale_part(part: str, factor: float) -> optax.GradientTransformation:
    """Multiply the updates of one top-level part of the parameters (e.g. "actor") by `factor`."""

    def update_fn(updates, state, params=None):
        del params
        return {**updates, part: jax.tree.map(lambda u: u * factor, updates[part])}, state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update_fn)


def make(cfg) -> optax.GradientTransformation:
    """The optimizer from the `agent.opt` config (name laprop | adam)."""
    chain = []
    if cfg.agc:
        chain.append(clip_by_agc(cfg.agc))
    if cfg.name == "laprop":
        chain.append(scale_by_laprop(cfg.beta1, cfg.beta2, cfg.eps))
    elif cfg.name == "adam":
        chain.append(optax.scale_by_adam(cfg.beta1, cfg.beta2, cfg.eps))
    else:
        raise ValueError(f"unknown optimizer '{cfg.name}' (laprop | adam)")
    if cfg.wd:
        chain.append(optax.add_decayed_weights(cfg.wd))
    chain.append(optax.scale_by_learning_rate(schedule(cfg.lr, cfg.warmup)))
    if cfg.actor_lr != 1.0:  # only then: the optimizer state of existing checkpoints keeps its shape
        chain.append(scale_part("actor", cfg.actor_lr))
    return optax.chain(*chain)
