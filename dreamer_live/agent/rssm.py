"""Recurrent state-space model: block-GRU deterministic state plus categorical stochastic state.

The flax module holds the layers and one-step methods; `observe` and `imagine` below scan them over
time as pure functions of the parameters. A carry is {deter [B, D], stoch [B, S, C]} in float32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from dreamer_live.agent import dists
from dreamer_live.agent.nets import BlockLinear, Dense, Norm, activation, weight_init

f32 = jnp.float32
sg = jax.lax.stop_gradient


class RSSM(nn.Module):
    """DreamerV3 RSSM: prior p(z_t | h_t), posterior q(z_t | h_t, x_t), h_t = GRU(h, z, a)_t-1."""

    deter: int = 512
    hidden: int = 64
    stoch: int = 32
    classes: int = 4
    blocks: int = 8
    unimix: float = 0.01
    imglayers: int = 2
    obslayers: int = 1
    dynlayers: int = 1
    absolute: bool = False
    norm: str = "rms"
    act: str = "silu"
    dtype: Any = f32

    def setup(self):
        assert self.deter % self.blocks == 0, (self.deter, self.blocks)

        def dense():
            return Dense(self.hidden, self.norm, self.act, self.dtype)

        def logit():
            return nn.Dense(self.stoch * self.classes, dtype=self.dtype, param_dtype=f32,
                            kernel_init=weight_init())

        self.dynin = [dense() for _ in range(3)]  # from deter, stoch, action
        self.dynhid = [BlockLinear(self.deter, self.blocks, self.dtype) for _ in range(self.dynlayers)]
        self.dynhidnorm = [Norm(self.norm) for _ in range(self.dynlayers)]
        self.dyngru = BlockLinear(3 * self.deter, self.blocks, self.dtype)
        self.obslayer = [dense() for _ in range(self.obslayers)]
        self.obslogit = logit()
        self.imglayer = [dense() for _ in range(self.imglayers)]
        self.imglogit = logit()

    def core(self, deter, stoch, action):
        """One block-GRU step of the deterministic state.

        Each block sees its own slice of deter plus the shared embeddings of deter, stoch and action.
        """
        g = self.blocks
        stoch = stoch.reshape(*stoch.shape[:-2], -1)
        action = action / sg(jnp.maximum(1.0, jnp.abs(action)))
        shared = jnp.concatenate(
            [self.dynin[0](deter), self.dynin[1](stoch), self.dynin[2](action)], -1)
        x = deter
        for i, (layer, norm) in enumerate(zip(self.dynhid, self.dynhidnorm)):
            x = activation(self.act)(norm(layer(x, shared if i == 0 else None)))
        # Gates stay in the block-major layout [g, N, 3 * D / g]; deter is brought to it instead.
        x = self.dyngru(x, None if self.dynhid else shared, group_major=True).astype(f32)
        reset, cand, update = jnp.split(x, 3, -1)
        reset = jax.nn.sigmoid(reset)
        cand = jnp.tanh(reset * cand)
        update = jax.nn.sigmoid(update - 1.0)
        lead = deter.shape[:-1]
        old = deter.reshape(-1, g, deter.shape[-1] // g).transpose(1, 0, 2)
        new = update * cand + (1 - update) * old
        return new.transpose(1, 0, 2).reshape(*lead, deter.shape[-1])

    def posterior(self, deter, token):
        """Log-probabilities [.., S, C] of the posterior given the new deter and the obs token."""
        x = token if self.absolute else jnp.concatenate(
            [deter.astype(self.dtype), token.astype(self.dtype)], -1)
        for layer in self.obslayer:
            x = layer(x)
        return self._logp(self.obslogit(x))

    def prior(self, deter):
        """Log-probabilities [.., S, C] of the prior given deter."""
        x = deter
        for layer in self.imglayer:
            x = layer(x)
        return self._logp(self.imglogit(x))

    def _logp(self, logits):
        logits = logits.astype(f32).reshape(*logits.shape[:-1], self.stoch, self.classes)
        return dists.unimix_logits(logits, self.unimix)

    def obs_step(self, carry, action, token, reset, key):
        """Posterior step; `reset` [B] zeroes the carry and the previous action first."""
        keep = (1.0 - reset.astype(f32))
        deter = carry["deter"] * keep[:, None]
        stoch = carry["stoch"] * keep[:, None, None]
        action = action * keep[:, None]
        deter = self.core(deter, stoch, action)
        logp = self.posterior(deter, token)
        stoch = dists.onehot_sample(key, logp)
        return {"deter": deter, "stoch": stoch}, logp

    def img_step(self, carry, action, key):
        """Prior step: advance with `action` and sample the stochastic state from the prior."""
        deter = self.core(carry["deter"], carry["stoch"], action)
        logp = self.prior(deter)
        stoch = dists.onehot_sample(key, logp)
        return {"deter": deter, "stoch": stoch}, logp

    def __call__(self, carry, action, token, reset, key):
        """Touches every layer (used for init): an observe step plus the prior."""
        carry, logp = self.obs_step(carry, action, token, reset, key)
        return carry, logp, self.prior(carry["deter"])


def initial(batch: int, deter: int, stoch: int, classes: int) -> dict:
    """The all-zeros carry that an episode start resets to."""
    return {"deter": jnp.zeros((batch, deter), f32), "stoch": jnp.zeros((batch, stoch, classes), f32)}


def features(state: dict) -> jax.Array:
    """Concatenate deter and flattened stoch into the feature vector the heads read."""
    stoch = state["stoch"]
    return jnp.concatenate([state["deter"], stoch.reshape(*stoch.shape[:-2], -1)], -1)


def observe(rssm: RSSM, params, carry, tokens, prev_actions, resets, key, unroll: int = 1):
    """Scan the posterior over time. tokens [B, T, E], prev_actions [B, T, A], resets [B, T].

    Returns (last carry, states {deter [B,T,D], stoch [B,T,S,C]}, posterior log-probs [B,T,S,C]).
    """
    keys = jax.random.split(key, tokens.shape[1])

    def step(carry, inputs):
        token, action, reset, k = inputs
        carry, logp = rssm.apply(params, carry, action, token, reset, k, method=RSSM.obs_step)
        return carry, (carry, logp)

    swap = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
    inputs = (swap(tokens), swap(prev_actions), swap(resets), keys)
    carry, (states, logps) = jax.lax.scan(step, carry, inputs, unroll=unroll)
    return carry, jax.tree.map(swap, states), swap(logps)


def imagine(rssm: RSSM, params, start: dict, policy: Callable, horizon: int, key, unroll: int = 1):
    """Roll the prior forward from `start` [N, ...] for `horizon` steps, acting with policy(state, key).

    Returns (states [N, H+1, ...] including the start, actions [N, H+1, A]) where actions[:, t] is the
    action taken in states[:, t] (the last one is sampled but never executed).
    """
    keys = jax.random.split(key, horizon + 1)

    def step(state, k):
        k1, k2 = jax.random.split(k)
        action = policy(state, k1)
        nxt, _ = rssm.apply(params, state, action, k2, method=RSSM.img_step)
        return nxt, (state, action)

    last, (states, actions) = jax.lax.scan(step, start, keys[:-1], unroll=unroll)
    last_action = policy(last, keys[-1])
    states = jax.tree.map(lambda xs, x: jnp.concatenate([xs, x[None]], 0), states, last)
    actions = jnp.concatenate([actions, last_action[None]], 0)
    swap = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
    return jax.tree.map(swap, states), swap(actions)
