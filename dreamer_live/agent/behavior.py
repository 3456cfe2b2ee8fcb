"""Actor-critic learning in imagination: lambda-returns, percentile return normalization, REINFORCE
actor with entropy bonus, two-hot critic with a slow-critic regularizer, and the replay value loss."""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp

from dreamer_live.agent import dists, rssm as rssmlib
from dreamer_live.agent.nets import Head
from dreamer_live.spaces import action_dim

f32 = jnp.float32
sg = jax.lax.stop_gradient


def lambda_return(last, term, rew, boot, disc: float, lam: float):
    """TD(lambda) returns [N, T-1] from sequences [N, T].

    rew[:, t] and term[:, t] describe arriving at step t, boot[:, t] is the value estimate of step t,
    last[:, t] cuts the lambda-mixing (episode boundary in replay).
      R_t = r_{t+1} + g_{t+1} * ((1 - l_{t+1}) * V_{t+1} + l_{t+1} * R_{t+1}),  R_{T-1} = V_{T-1}
    with g = disc * (1 - term) and l = lam * (1 - last).
    """
    live = (1.0 - term[:, 1:].astype(f32)) * disc
    cont = (1.0 - last[:, 1:].astype(f32)) * lam
    interm = rew[:, 1:] + (1.0 - cont) * live * boot[:, 1:]

    def step(nxt, inputs):
        i, l, c = inputs
        ret = i + l * c * nxt
        return ret, ret

    _, rets = jax.lax.scan(step, boot[:, -1], (interm.T, live.T, cont.T), reverse=True)
    return rets.T


def retnorm_init() -> dict:
    """Return-normalizer state: EMAs of the low and high return percentiles."""
    return {"lo": jnp.zeros((), f32), "hi": jnp.zeros((), f32)}


def retnorm_update(state: dict, ret, decay: float = 0.99, perclo: float = 5.0,
                   perchi: float = 95.0) -> dict:
    """EMA update of the perclo / perchi percentiles of `ret`."""
    ret = sg(ret.astype(f32))
    lo = jnp.percentile(ret, perclo)
    hi = jnp.percentile(ret, perchi)
    return {"lo": decay * state["lo"] + (1 - decay) * lo,
            "hi": decay * state["hi"] + (1 - decay) * hi}


def retnorm_stats(state: dict, limit: float = 1.0):
    """(offset, scale) with scale = max(limit, hi - lo): small returns are not scaled up."""
    return state["lo"], jnp.maximum(limit, state["hi"] - state["lo"])


class ActorCritic:
    """Policy and value heads over world-model features, and their imagination / replay losses."""

    def __init__(self, cfg, act_space, dtype):
        self.cfg = cfg
        self.discrete = isinstance(act_space, gymnasium.spaces.Discrete)
        self.act_dim = action_dim(act_space)
        p, v = cfg.policy, cfg.value
        common = dict(norm=cfg.norm, act=cfg.act, dtype=dtype)
        outputs = self.act_dim if self.discrete else 2 * self.act_dim
        self.actor = Head(p.layers, p.units, outputs, p.outscale, **common)
        self.critic = Head(v.layers, v.units, v.bins, v.outscale, **common)
        self.bins = dists.symexp_bins(v.bins)

    def init(self, key, feat_dim: int) -> dict:
        """Fresh {actor, critic} parameters."""
        k1, k2 = jax.random.split(key)
        feat = jnp.zeros((1, feat_dim), f32)
        return {"actor": self.actor.init(k1, feat), "critic": self.critic.init(k2, feat)}

    # ------------------------------------------------------------------------------------------
    def dist(self, actor_params, feat) -> dict:
        """Action distribution parameters: {'logp'} (discrete) or {'mean', 'std'} (continuous)."""
        out = self.actor.apply(actor_params, feat)
        if self.discrete:
            return {"logp": dists.unimix_logits(out, self.cfg.policy.unimix)}
        mean, std = dists.bounded_normal(out, self.cfg.policy.minstd, self.cfg.policy.maxstd)
        return {"mean": mean, "std": std}

    def sample(self, dist: dict, key, mode: str = "train"):
        """A one-hot or continuous action; mode 'eval' takes the distribution's mode."""
        if self.discrete:
            logp = dist["logp"]
            return sg(dists.onehot_mode(logp) if mode == "eval" else dists.onehot_sample(key, logp))
        if mode == "eval":
            return dist["mean"]
        return sg(dist["mean"] + dist["std"] * dists.normal(key, dist["mean"].shape))

    def logp(self, dist: dict, action):
        """Log-likelihood of actions."""
        if self.discrete:
            return dists.categorical_logp(dist["logp"], action)
        return dists.normal_logp(dist["mean"], dist["std"], action)

    def entropy(self, dist: dict):
        """Entropy of the action distribution."""
        if self.discrete:
            return dists.categorical_entropy(dist["logp"])
        return dists.normal_entropy(dist["std"])

    def value(self, critic_params, feat):
        """(predicted value, logits) of the two-hot critic."""
        logits = self.critic.apply(critic_params, feat)
        return dists.twohot_pred(logits, self.bins), logits

    def policy_fn(self, actor_params):
        """policy(state, key) -> action, for imagination rollouts."""
        return lambda state, key: self.sample(self.dist(actor_params, rssmlib.features(state)), key)

    # ------------------------------------------------------------------------------------------
    def imag_loss(self, params, slow_critic, wm, wm_params, states, retnorm, key):
        """Imagine from every posterior state [B, T] and compute policy and value losses [B, T].

        Returns (losses, new retnorm state, imagined returns [B*T, H], metrics).
        """
        cfg = self.cfg
        b, t = states["deter"].shape[:2]
        start = jax.tree.map(lambda x: sg(x.reshape(b * t, *x.shape[2:])), states)
        policy = self.policy_fn(sg(params["actor"]))
        wm_params = sg(wm_params)
        imgstates, imgact = rssmlib.imagine(wm.rssm, wm_params["rssm"], start, policy,
                                            cfg.imag_length, key, cfg.rssm.unroll)
        feat = sg(rssmlib.features(imgstates))
        imgact = sg(imgact)
        rew = wm.reward(wm_params, feat)[0]
        con = jax.nn.sigmoid(wm.cont_logit(wm_params, feat))
        val, val_logits = self.value(params["critic"], feat)
        slowval = sg(self.value(slow_critic, feat)[0])
        tarval = slowval if cfg.slowtar else sg(val)
        disc = 1.0 if cfg.contdisc else 1.0 - 1.0 / cfg.horizon
        weight = sg(jnp.cumprod(disc * con, 1) / disc)
        ret = sg(lambda_return(jnp.zeros_like(con), 1.0 - con, rew, tarval, disc, cfg.lam))

        r = cfg.retnorm
        retnorm = retnorm_update(retnorm, ret, r.decay, r.perclo, r.perchi)
        offset, scale = retnorm_stats(retnorm, r.limit)
        adv = (ret - tarval[:, :-1]) / scale
        dist = self.dist(params["actor"], feat)
        logpi = self.logp(dist, imgact)[:, :-1]
        ent = self.entropy(dist)[:, :-1]
        policy_loss = weight[:, :-1] * -(logpi * sg(adv) + cfg.actent * ent)
        ret_padded = jnp.concatenate([ret, jnp.zeros_like(ret[:, -1:])], 1)
        value_loss = weight * (dists.twohot_loss(val_logits, self.bins, ret_padded)
                               + cfg.slowreg * dists.twohot_loss(val_logits, self.bins, slowval))
        losses = {"policy": policy_loss.mean(1).reshape(b, t),
                  "value": value_loss[:, :-1].mean(1).reshape(b, t)}
        ret_normed = (ret - offset) / scale
        metrics = {"ret": ret_normed.mean(), "ret_raw": ret.mean(), "adv": adv.mean(),
                   "adv_std": adv.std(), "val": val.mean(), "slowval": slowval.mean(),
                   "imag_rew": rew.mean(), "imag_con": con.mean(), "weight": weight.mean(),
                   "entropy": ent.mean(), "retnorm/scale": scale, "retnorm/lo": retnorm["lo"],
                   "retnorm/hi": retnorm["hi"]}
        if self.discrete:
            metrics["policy_randomness"] = ent.mean() / jnp.log(self.act_dim)
        return losses, retnorm, ret, metrics

    def repl_loss(self, critic_params, slow_critic, feat, batch, boot):
        """Replay value loss [B, T-1]: lambda-returns of the real rewards, bootstrapped with `boot`."""
        cfg = self.cfg
        val, val_logits = self.value(critic_params, feat)
        slowval = sg(self.value(slow_critic, feat)[0])
        last = batch["is_last"].astype(f32)
        term = batch["is_terminal"].astype(f32)
        rew = batch["reward"].astype(f32)
        ret = sg(lambda_return(last, term, rew, sg(boot), 1.0 - 1.0 / cfg.horizon, cfg.lam))
        ret_padded = jnp.concatenate([ret, jnp.zeros_like(ret[:, -1:])], 1)
        loss = (1.0 - last) * (dists.twohot_loss(val_logits, self.bins, ret_padded)
                               + cfg.slowreg * dists.twohot_loss(val_logits, self.bins, slowval))
        return loss[:, :-1], {"repval_ret": ret.mean(), "repval_val": val.mean()}
