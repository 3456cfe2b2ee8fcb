"""The DreamerV3 agent: jitted init / policy / train / report / dream over an explicit state pytree."""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import optax

from dreamer_live import steps
from dreamer_live.agent import behavior, devices, optim, rssm as rssmlib
from dreamer_live.agent.behavior import ActorCritic
from dreamer_live.agent.worldmodel import WorldModel
from dreamer_live.errors import UserError

f32 = jnp.float32
sg = jax.lax.stop_gradient
WM_PARTS = ("enc", "rssm", "dec", "rew", "con", "prj")  # prj: agent.objective barlow only
POLICY_PARTS = ("enc", "rssm", "actor")
WM_LOSSES = ("dec", "rew", "con", "dyn", "rep", "barlow")
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def _flat_f32(leaves) -> jax.Array:
    # One vector, so that a reduction over a tree is one reduction, not one per leaf: the ~300
    # per-leaf reductions of the train step's checks and norms were a kernel each, a third of its
    # compile at the suite's quick flags. XLA's CPU backend writes the vector out (a copy of the
    # tree per check); no slower at size1m on 2 CPU cores, nor at size12m on an H200
    # (docs/experiments/2026-11-30-test-suite-time-slow-cpu.md).
    return jnp.concatenate([jnp.ravel(x).astype(f32) for x in leaves])


def global_norm(tree):
    """L2 norm over all leaves of a pytree."""
    return jnp.sqrt(jnp.sum(jnp.square(_flat_f32(jax.tree.leaves(tree)))))


def all_finite(tree) -> jax.Array:
    """True (a scalar array) when every float leaf of `tree` holds only finite values."""
    leaves = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(jnp.result_type(x), jnp.floating)]
    return jnp.all(jnp.isfinite(_flat_f32(leaves))) if leaves else jnp.asarray(True)


def _check_spaces(obs_space, act_space):
    for key in steps.game_keys(obs_space):
        space = obs_space[key]
        if len(space.shape) == 3 and np.dtype(space.dtype) != np.uint8:
            raise UserError(f"image observation '{key}' must be uint8 [H, W, C], got {space.dtype}")
        if len(space.shape) not in (0, 1, 3):
            raise UserError(f"observation '{key}' has shape {space.shape}; expected [D] or [H, W, C]")
    if not isinstance(act_space, (gymnasium.spaces.Discrete, gymnasium.spaces.Box)):
        raise UserError(f"action space must be Discrete or Box, got {act_space}")


class Agent:
    """DreamerV3 (Hafner et al. 2025) as pure jitted functions of an explicit state.

    state = {params, slow_critic, opt, retnorm, step};
    params = {enc, rssm, dec, rew, con, actor, critic}.
    """

    def __init__(self, config, obs_space, act_space, mesh=None):
        cfg = config.agent
        if cfg.compute_dtype not in DTYPES:
            raise UserError(f"agent.compute_dtype must be one of {', '.join(DTYPES)}, "
                            f"got '{cfg.compute_dtype}'")
        _check_spaces(obs_space, act_space)
        self.config = config
        self.cfg = cfg
        self.obs_space = dict(obs_space)
        self.act_space = act_space
        dtype = DTYPES[cfg.compute_dtype]
        self.ac = ActorCritic(cfg, act_space, dtype)
        self.wm = WorldModel(cfg, self.obs_space, self.ac.act_dim, dtype)
        self.act_dim = self.ac.act_dim
        self.discrete = self.ac.discrete
        self.obs_keys = self.wm.image_keys + self.wm.vector_keys
        self.batch_keys = steps.training_keys(self.obs_keys)
        self.opt = optim.make(cfg.opt)
        self.lr = optim.schedule(cfg.opt.lr, cfg.opt.warmup)
        self.scales = dict(cfg.loss_scales)
        # With a devices.learner_mesh, the state lives replicated on its devices and train splits
        # the batch over them; without one, the default device (the actor, viz, eval).
        if mesh is None:
            self.init = jax.jit(self._init)
            self._train = jax.jit(self._train_impl)
        else:
            rep, split = devices.replicated(mesh), devices.batch_split(mesh)
            self.init = jax.jit(self._init, out_shardings=rep)
            self._train = jax.jit(self._train_impl, in_shardings=(rep, split, rep),
                                  out_shardings=(rep, rep, split))
        # What init's policy_params would be, compiled without the decoder, critic and optimizer
        # state (XLA drops what is not returned): a smaller program for the actor to compile.
        self.init_policy = jax.jit(lambda key: self.policy_params(self._init(key)))
        self._policy = jax.jit(self._policy_impl, static_argnames=("mode",))
        self._openloop = jax.jit(self._openloop_impl, static_argnames=("observe", "dream"))

    # ------------------------------------------------------------------------------------------
    def _init(self, key):
        k1, k2 = jax.random.split(key)
        params = self.wm.init(k1)
        r = self.cfg.rssm
        params.update(self.ac.init(k2, r.deter + r.stoch * r.classes))
        return {"params": params,
                "slow_critic": jax.tree.map(jnp.copy, params["critic"]),
                "opt": self.opt.init(params),
                "retnorm": behavior.retnorm_init(),
                "step": jnp.zeros((), jnp.int32)}

    def state_shapes(self):
        """init's result as shapes, dtypes and placements (jax.ShapeDtypeStruct leaves), traced but not
        compiled or run: the template a checkpoint is restored into."""
        return jax.eval_shape(self.init, jax.random.PRNGKey(0))

    def policy_params(self, state) -> dict:
        """The parameters the actor needs: encoder, RSSM and policy head."""
        return {k: state["params"][k] for k in POLICY_PARTS}

    def initial_carry(self, batch_size: int) -> dict:
        """The recurrent state at an episode start: zero deter, stoch and previous action."""
        carry = self.wm.initial(batch_size)
        carry["action"] = jnp.zeros((batch_size, self.act_dim), f32)
        return carry

    # ------------------------------------------------------------------------------------------
    def policy(self, params, carry, obs, key, mode: str = "train"):
        """One step: (carry, action [B, A], aux); obs holds the obs keys and is_first as [B, ...]."""
        if mode not in ("train", "eval"):
            raise ValueError(f"mode must be 'train' or 'eval', got {mode!r}")
        obs = {k: obs[k] for k in self.obs_keys + ("is_first",)}
        return self._policy(params, carry, obs, key, mode=mode)

    def _policy_impl(self, params, carry, obs, key, mode):
        k1, k2 = jax.random.split(key)
        tokens = self.wm.enc.apply(params["enc"], {k: obs[k] for k in self.obs_keys})
        state = {"deter": carry["deter"], "stoch": carry["stoch"]}
        state, _ = self.wm.rssm.apply(params["rssm"], state, carry["action"], tokens,
                                      obs["is_first"], k1, method=rssmlib.RSSM.obs_step)
        dist = self.ac.dist(params["actor"], rssmlib.features(state))
        action = self.ac.sample(dist, k2, mode)
        if not self.discrete:
            action = jnp.clip(action, -1.0, 1.0)
        carry = {**state, "action": action}
        return carry, action, {"entropy": self.ac.entropy(dist)}

    # ------------------------------------------------------------------------------------------
    def train(self, state, batch, key):
        """One gradient update on a replay batch [B, T, ...]; returns (state, flat scalar metrics).

        With agent.replay_context K the batch is [B, K + T, ...] and the first K steps are context
        only; the trained steps start from its steps.CONTEXT_KEYS (replay/latents.py), zeros when absent."""
        state, metrics, _ = self._train(state, self._train_inputs(batch), key)
        return state, metrics

    def train_context(self, state, batch, key):
        """train() on a batch [B, K + T, ...] with its steps.CONTEXT_KEYS; returns (state, metrics, the
        posterior latents {deter [B, T, D], stoch [B, T, S, C]} of the trained steps)."""
        return self._train(state, self._train_inputs(batch), key)

    def _filter(self, batch):
        missing = [k for k in self.batch_keys if k not in batch]
        if missing:
            raise UserError(f"batch lacks keys {missing}; it has {sorted(batch)}")
        return {k: batch[k] for k in self.batch_keys}

    def _train_inputs(self, batch):
        """The batch keys, plus with replay context its steps.CONTEXT_KEYS (zeros where absent)."""
        inputs = self._filter(batch)
        if self.cfg.replay_context:
            b, r = batch["is_first"].shape[0], self.cfg.rssm
            zeros = (np.zeros((b, r.deter), np.float32),
                     np.zeros((b, r.stoch, r.classes), np.float32),
                     np.zeros((b, self.act_dim), np.float32))
            inputs.update({k: batch.get(k, z) for k, z in zip(steps.CONTEXT_KEYS, zeros)})
        return inputs

    def _split_context(self, batch):
        """(the trained steps, the carry they start from or None) of a train-step batch."""
        k = self.cfg.replay_context
        if not k:
            return batch, None
        start = {name.split("/")[1]: batch[name] for name in steps.CONTEXT_KEYS}
        return {name: batch[name][:, k:] for name in self.batch_keys}, start

    def _loss(self, params, state, batch, key):
        cfg = self.cfg
        k1, k2 = jax.random.split(key)
        batch, start = self._split_context(batch)
        losses, states, metrics = self.wm.loss(params, batch, k1, start)
        wm_params = {k: params[k] for k in WM_PARTS if k in params}
        ac_losses, retnorm, ret, ac_metrics = self.ac.imag_loss(
            params, state["slow_critic"], self.wm, wm_params, states, state["retnorm"], k2)
        losses.update(ac_losses)
        metrics.update(ac_metrics)
        if cfg.repval:
            feat = rssmlib.features(states)
            feat = feat if cfg.repval_grad else sg(feat)
            b, t = batch["is_first"].shape
            boot = ret[:, 0].reshape(b, t)
            losses["repval"], rep_metrics = self.ac.repl_loss(
                params["critic"], state["slow_critic"], feat, batch, boot)
            metrics.update(rep_metrics)
        means = {k: v.mean() for k, v in losses.items()}
        total = sum(self.scales[k] * v for k, v in means.items())
        metrics.update({f"loss/{k}": v for k, v in means.items()})
        metrics["loss/wm"] = sum(self.scales[k] * means[k] for k in WM_LOSSES if k in means)
        metrics["loss/total"] = total
        latents = {"deter": states["deter"], "stoch": states["stoch"]} if start is not None else {}
        return total, (retnorm, metrics, latents)

    def _train_impl(self, state, batch, key):
        params = state["params"]
        grads, (retnorm, metrics, latents) = jax.grad(self._loss, has_aux=True)(
            params, state, batch, key)
        updates, opt_state = self.opt.update(grads, state["opt"], params)
        params = optax.apply_updates(params, updates)
        rate = self.cfg.slow_rate
        slow = jax.tree.map(lambda s, p: (1 - rate) * s + rate * p,
                            state["slow_critic"], params["critic"])
        metrics["grad_norm"] = global_norm(grads)
        metrics["update_norm"] = global_norm(updates)
        metrics["param_norm"] = global_norm(params)
        metrics["opt/lr"] = jnp.asarray(self.lr(state["step"]), f32)
        metrics = {k: jnp.asarray(v, f32) for k, v in metrics.items()}
        new = {"params": params, "slow_critic": slow, "opt": opt_state, "retnorm": retnorm,
               "step": state["step"] + 1}
        # A non-finite loss, gradient or result leaves the state as it was (the learner counts these).
        # One branch on the flag, not a select per leaf: XLA fused the flag's reduction over every
        # leaf into each select (~230 inputs and ~480 instructions per fused select, ~175 selects),
        # which made the compiled step ~9x larger and slow to load from the compilation cache.
        ok = all_finite((metrics["loss/total"], grads, new))
        new = jax.lax.cond(ok, lambda: new, lambda: state)
        metrics["skipped"] = 1.0 - ok.astype(f32)
        return new, metrics, sg(latents)

    # ------------------------------------------------------------------------------------------
    def report(self, state, batch, observe: int = 8, key=None):
        """Open-loop predictions: the first `observe` steps observed, the rest imagined with the
        replayed actions. Returns {<key>/truth, <key>/model, reward/..., cont/...} as [B, T, ...]."""
        key = jax.random.PRNGKey(0) if key is None else key
        return self._openloop(state, self._filter(batch), key, observe=int(observe), dream=False)

    def dream(self, state, batch, observe: int = 8, key=None):
        """Like report, but the imagined part acts with the learned policy."""
        key = jax.random.PRNGKey(0) if key is None else key
        return self._openloop(state, self._filter(batch), key, observe=int(observe), dream=True)

    def _openloop_impl(self, state, batch, key, observe, dream):
        params = state["params"]
        policy = self.ac.policy_fn(params["actor"]) if dream else None
        return self.wm.openloop(params, batch, observe, key, policy)
