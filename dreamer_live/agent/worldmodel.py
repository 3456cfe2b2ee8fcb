"""World model: encoder, RSSM, decoder, reward and continue heads, losses and open-loop rollouts."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from dreamer_live import steps
from dreamer_live.agent import dists, rssm as rssmlib
from dreamer_live.agent.nets import Decoder, Encoder, Head, cnn_depths, cnn_stages, patch_stages
from dreamer_live.errors import UserError

f32 = jnp.float32
sg = jax.lax.stop_gradient


def split_obs_keys(obs_space) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(image keys, vector keys) of an obs space; the reward and episode flags are not model inputs."""
    images, vectors = [], []
    for key in sorted(steps.game_keys(obs_space)):
        (images if len(obs_space[key].shape) == 3 else vectors).append(key)
    return tuple(images), tuple(vectors)


class WorldModel:
    """The flax modules of the world model and pure functions over their parameter dict."""

    def __init__(self, cfg, obs_space, act_dim: int, dtype):
        self.cfg = cfg
        self.obs_space = obs_space
        self.act_dim = act_dim
        self.image_keys, self.vector_keys = split_obs_keys(obs_space)
        if not self.image_keys and not self.vector_keys:
            raise ValueError("the observation space has no image or vector keys")
        common = dict(norm=cfg.norm, act=cfg.act, dtype=dtype)
        e, d, r = cfg.enc, cfg.dec, cfg.rssm
        self.enc = Encoder(self.image_keys, self.vector_keys, e.depth, tuple(e.mults), e.kernel,
                           e.strided, e.layers, e.units, e.symlog, tuple(e.fourier), e.minres,
                           e.patch, e.conv, **common)
        self.rssm = rssmlib.RSSM(r.deter, r.hidden, r.stoch, r.classes, r.blocks, r.unimix,
                                 r.imglayers, r.obslayers, r.dynlayers, r.absolute, **common)
        shapes = {k: tuple(obs_space[k].shape) for k in self.image_keys + self.vector_keys}
        if self.image_keys:  # bad image layouts fail here with one line, not inside a trace
            size = shapes[self.image_keys[0]][:2]
            patch_stages(e.patch, cnn_stages(size, e.minres))
            stages = cnn_stages(size, d.minres)
            patch_stages(d.patch, stages, "agent.dec.patch")
            channels = cnn_depths(d.depth, tuple(d.mults), stages)[-1] if stages else d.bspace
            if d.bspace and (r.deter % d.bspace or channels % d.bspace):
                raise UserError(
                    f"agent.dec.bspace {d.bspace} must divide agent.rssm.deter ({r.deter}) and the "
                    f"decoder's low-res depth ({channels}: agent.dec.depth x the multiplier of "
                    f"its last stage); pick a common divisor, or 0 for one dense projection")
        self.dec = Decoder(tuple((k, shapes[k]) for k in self.image_keys),
                           tuple((k, shapes[k]) for k in self.vector_keys), r.deter, d.bspace,
                           d.depth, tuple(d.mults), d.kernel, d.strided, d.layers, d.units,
                           d.sigmoid, d.minres, d.patch, **common)
        h = cfg.reward_head
        self.rew = Head(h.layers, h.units, h.bins, h.outscale, **common)
        h = cfg.cont_head
        self.con = Head(h.layers, h.units, 1, h.outscale, **common)
        self.rew_bins = dists.symexp_bins(cfg.reward_head.bins)
        self.unroll = r.unroll
        self.barlow = cfg.objective == "barlow"
        # agent.objective barlow: one linear layer from the features onto the token space
        self.prj = Head(0, 1, self.enc_dim(), 1.0, **common) if self.barlow else None

    # ------------------------------------------------------------------------------------------
    def dummy_obs(self, n: int = 1) -> dict:
        """Zeros shaped like n observations (for init)."""
        return {k: jnp.zeros((n, *self.obs_space[k].shape), self.obs_space[k].dtype)
                for k in self.image_keys + self.vector_keys}

    def enc_dim(self) -> int:
        """Size of the encoder's token."""
        return jax.eval_shape(lambda: self.enc.init_with_output(
            jax.random.PRNGKey(0), self.dummy_obs())[0]).shape[-1]

    def initial(self, batch: int) -> dict:
        """Zero RSSM carry."""
        r = self.cfg.rssm
        return rssmlib.initial(batch, r.deter, r.stoch, r.classes)

    def init(self, key) -> dict:
        """Fresh parameters {enc, rssm, dec, rew, con}, and prj with agent.objective barlow."""
        keys = jax.random.split(key, 7)
        obs = self.dummy_obs()
        enc = self.enc.init(keys[0], obs)
        token = self.enc.apply(enc, obs)
        carry = self.initial(1)
        action = jnp.zeros((1, self.act_dim), f32)
        rssm = self.rssm.init(keys[1], carry, action, token, jnp.zeros((1,), bool), keys[2])
        feat = rssmlib.features(carry)
        params = {"enc": enc, "rssm": rssm, "dec": self.dec.init(keys[3], feat),
                  "rew": self.rew.init(keys[4], feat), "con": self.con.init(keys[5], feat)}
        if self.barlow:
            params["prj"] = self.prj.init(keys[6], feat)
        return params

    # ------------------------------------------------------------------------------------------
    def encode(self, params, obs: dict):
        """Tokens [B, T, E] from observations [B, T, ...], all frames in one batch."""
        b, t = obs[(self.image_keys + self.vector_keys)[0]].shape[:2]
        flat = {k: obs[k].reshape(b * t, *obs[k].shape[2:]) for k in self.image_keys + self.vector_keys}
        tokens = self.enc.apply(params["enc"], flat)
        return tokens.reshape(b, t, -1)

    def decode(self, params, feat):
        """Decoder predictions {key: [B, T, ...]} from features [B, T, F]."""
        b, t = feat.shape[:2]
        out = self.dec.apply(params["dec"], feat.reshape(b * t, -1))
        return {k: v.reshape(b, t, *v.shape[1:]) for k, v in out.items()}

    def reward(self, params, feat):
        """Predicted reward (two-hot expectation) and the logits."""
        logits = self.rew.apply(params["rew"], feat)
        return dists.twohot_pred(logits, self.rew_bins), logits

    def cont_logit(self, params, feat):
        """Logit of the continue flag (which includes the discount when contdisc is on)."""
        return self.con.apply(params["con"], feat)[..., 0]

    def cont_target(self, is_terminal):
        """Continue target: 1 - terminal, times the discount when it is folded in."""
        con = 1.0 - is_terminal.astype(f32)
        if self.cfg.contdisc:
            con = con * (1.0 - 1.0 / self.cfg.horizon)
        return con

    @staticmethod
    def prev_actions(actions, carry_action=None):
        """Shift actions right by one step: the action that led into each step (zeros at the start)."""
        first = jnp.zeros_like(actions[:, :1]) if carry_action is None else carry_action[:, None]
        return jnp.concatenate([first, actions[:, :-1]], 1)

    # ------------------------------------------------------------------------------------------
    def loss(self, params, batch: dict, key, start: dict | None = None):
        """World-model losses (each [B, T]), posterior states [B, T, ...] and metrics; the posterior
        starts from `start` {deter, stoch, action} (replay context) when given, else from zeros."""
        tokens = self.encode(params, batch)
        b = tokens.shape[0]
        carry = self.initial(b) if start is None else {k: start[k] for k in ("deter", "stoch")}
        prev = self.prev_actions(batch["action"].astype(f32),
                                 None if start is None else start["action"])
        _, states, post = rssmlib.observe(self.rssm, params["rssm"], carry, tokens, prev,
                                          batch["is_first"], key, self.unroll)
        prior = self.rssm.apply(params["rssm"], states["deter"], method=rssmlib.RSSM.prior)
        dyn, rep, kl = dists.kl_losses(post, prior, self.cfg.rssm.free_nats)
        feat = rssmlib.features(states)
        losses = {"dyn": dyn, "rep": rep}
        # With the barlow objective the decoder is a probe: it draws what the features hold, and its
        # gradient stops at them.
        recons = self.decode(params, sg(feat) if self.barlow else feat)
        dec_parts = {}
        for key_ in self.image_keys:
            target = batch[key_].astype(f32) / 255.0
            dec_parts[key_] = (motion_weights(target, self.cfg.dec.motion_weight)
                               * (recons[key_] - target) ** 2).sum((-3, -2, -1))
        for key_ in self.vector_keys:
            target = dists.symlog(batch[key_].astype(f32))
            err = (recons[key_] - target) ** 2
            dec_parts[key_] = err.reshape(*err.shape[:2], -1).sum(-1)
        losses["dec"] = sum(dec_parts.values())
        if self.barlow:
            # R2-Dreamer: the tokens are the target, so the encoder learns only through the posterior.
            b, t = feat.shape[:2]
            projected = self.prj.apply(params["prj"], feat.reshape(b * t, -1))
            losses["barlow"] = barlow_loss(projected, sg(tokens.reshape(b * t, -1)),
                                           self.cfg.barlow_lambda)
        rew_in = feat if self.cfg.reward_grad else sg(feat)
        _, rew_logits = self.reward(params, rew_in)
        losses["rew"] = dists.twohot_loss(rew_logits, self.rew_bins, batch["reward"].astype(f32))
        con_logit = self.cont_logit(params, feat)
        losses["con"] = dists.binary_loss(con_logit, self.cont_target(batch["is_terminal"]))
        metrics = {"kl": kl.mean(),
                   "prior_ent": dists.categorical_entropy(prior).sum(-1).mean(),
                   "post_ent": dists.categorical_entropy(post).sum(-1).mean()}
        metrics.update({f"loss/dec_{k}": v.mean() for k, v in dec_parts.items()})
        return losses, states, metrics

    # ------------------------------------------------------------------------------------------
    def openloop(self, params, batch: dict, observe: int, key, policy: Callable | None = None):
        """Observe the first `observe` steps, then imagine the rest with the replayed actions
        (or with policy(state, key) when given); returns truth and model predictions [B, T, ...]."""
        t_total = batch["is_first"].shape[1]
        k = int(min(max(observe, 1), t_total))
        key_obs, key_img = jax.random.split(key)
        tokens = self.encode(params, {n: v[:, :k] for n, v in batch.items()})
        b = tokens.shape[0]
        actions = batch["action"].astype(f32)
        prev = self.prev_actions(actions[:, :k])
        carry, states, _ = rssmlib.observe(self.rssm, params["rssm"], self.initial(b), tokens, prev,
                                           batch["is_first"][:, :k], key_obs, self.unroll)
        if k < t_total:
            keys = jax.random.split(key_img, t_total - k)

            def step(state, inputs):
                action, kk = inputs
                k1, k2 = jax.random.split(kk)
                if policy is not None:
                    action = policy(state, k1)
                nxt, _ = self.rssm.apply(params["rssm"], state, action, k2,
                                         method=rssmlib.RSSM.img_step)
                return nxt, nxt

            _, imagined = jax.lax.scan(step, carry, (jnp.swapaxes(actions[:, k - 1:-1], 0, 1), keys))
            imagined = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), imagined)
            states = jax.tree.map(lambda a, c: jnp.concatenate([a, c], 1), states, imagined)
        feat = rssmlib.features(states)
        recons = self.decode(params, feat)
        out = {}
        for key_ in self.image_keys:
            out[f"{key_}/truth"] = batch[key_].astype(jnp.uint8)
            out[f"{key_}/model"] = jnp.clip(recons[key_] * 255.0 + 0.5, 0, 255).astype(jnp.uint8)
        for key_ in self.vector_keys:
            out[f"{key_}/truth"] = batch[key_].astype(f32)
            out[f"{key_}/model"] = dists.symexp(recons[key_])
        out["reward/truth"] = batch["reward"].astype(f32)
        out["reward/model"] = self.reward(params, feat)[0]
        # Continue as a probability, with the folded-in discount taken back out.
        disc = (1.0 - 1.0 / self.cfg.horizon) if self.cfg.contdisc else 1.0
        out["cont/truth"] = 1.0 - batch["is_terminal"].astype(f32)
        out["cont/model"] = jnp.minimum(1.0, jax.nn.sigmoid(self.cont_logit(params, feat)) / disc)
        return out


def motion_weights(frames, weight: float):
    """Per-pixel image-loss weights 1 + weight x |change from the previous frame| for [B, T, H, W, C].

    Small moving objects (a falling fruit, a ball) are a few pixels of the summed squared error, and an
    unweighted decoder leaves them out for thousands of updates; weighting the pixels that change brings
    them in sooner. The first step of a sequence has no previous frame and weight 1."""
    if not weight:
        return 1.0
    prev = jnp.concatenate([frames[:, :1], frames[:, :-1]], 1)
    return 1.0 + weight * jnp.abs(frames - prev)


def barlow_loss(x, y, lam: float):
    """Barlow Twins' redundancy reduction between paired rows of x and y [N, D]: the cross-correlation of
    their standardized columns pulled to the identity, off-diagonal terms weighted by lam; a scalar."""
    def standardize(z):
        return (z - z.mean(0)) / (z.std(0) + 1e-8)
    corr = standardize(x).T @ standardize(y) / x.shape[0]
    diag = jnp.diagonal(corr)
    return jnp.sum((diag - 1.0) ** 2) + lam * (jnp.sum(corr ** 2) - jnp.sum(diag ** 2))
