"""The agent's entry points at small sizes: jit, shapes, resets, parameter export, serialization."""

import flax.serialization
import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import IMAGE_AGENT

from dreamer_live import config
from dreamer_live.agent import Agent, rssm as rssmlib
from dreamer_live.envs import make_env
from dreamer_live.envs.base import step_spaces
from dreamer_live.errors import UserError

CFG = config.resolve(["debug"])
B, T = CFG.batch_size, CFG.batch_length


def obs_space(size):
    return {"image": gymnasium.spaces.Box(0, 255, (size, size, 3), np.uint8),
            "vector": gymnasium.spaces.Box(-np.inf, np.inf, (5,), np.float32), **step_spaces()}


def make_batch(agent, seed=0, b=B, t=T):
    rng = np.random.default_rng(seed)
    image, vector = agent.obs_space["image"].shape, agent.obs_space["vector"].shape
    if agent.discrete:
        action = np.eye(agent.act_dim, dtype=np.float32)[rng.integers(0, agent.act_dim, (b, t))]
    else:
        action = rng.uniform(-1, 1, (b, t, agent.act_dim)).astype(np.float32)
    is_first = np.zeros((b, t), bool)
    is_first[:, 0] = True
    return {"image": rng.integers(0, 256, (b, t, *image), dtype=np.uint8),
            "vector": rng.normal(size=(b, t, *vector)).astype(np.float32) * 10,
            "action": action,
            "reward": rng.normal(size=(b, t)).astype(np.float32),
            "is_first": is_first, "is_last": np.zeros((b, t), bool),
            "is_terminal": np.zeros((b, t), bool),
            "tick_time": np.full((b, t), 1.7e9), "tick_late_ms": np.zeros((b, t), np.float32)}


# Discrete actions: conftest's IMAGE_AGENT on Catcher's 32x32 frames and state (viz's run trains the
# same agent, so the suite compiles its train step once); continuous actions: the debug preset with
# 64x64 images (every stage of the CNNs' default mults).
@pytest.fixture(scope="module", params=["discrete", "continuous"])
def setup(request):
    if request.param == "discrete":
        cfg = config.resolve(["debug"], dict(IMAGE_AGENT))
        assert (cfg.batch_size, cfg.batch_length) == (B, T)
        env = make_env(cfg)
        agent = Agent(cfg, env.obs_space, env.act_space)
        env.close()
    else:
        agent = Agent(CFG, obs_space(64), gymnasium.spaces.Box(-2, 2, (2,), np.float32))
    state = agent.init(jax.random.PRNGKey(0))
    return agent, state


def step_obs(batch, t, first):
    return {"image": batch["image"][:, t], "vector": batch["vector"][:, t],
            "is_first": np.full(batch["image"].shape[0], first)}


def test_policy_shapes_and_modes(setup):
    agent, state = setup
    params = agent.policy_params(state)
    batch = make_batch(agent, b=3)
    carry = agent.initial_carry(3)
    for mode in ("train", "eval"):
        new, action, aux = agent.policy(params, carry, step_obs(batch, 0, True),
                                        jax.random.PRNGKey(1), mode)
        assert action.shape == (3, agent.act_dim) and action.dtype == jnp.float32
        assert jax.tree.map(jnp.shape, new) == jax.tree.map(jnp.shape, carry)
        assert aux["entropy"].shape == (3,)
        if agent.discrete:
            np.testing.assert_allclose(action.sum(-1), 1.0, atol=1e-6)
            assert set(np.unique(np.asarray(action))) <= {0.0, 1.0}
        else:
            assert np.all(np.abs(action) <= 1.0)
    # eval takes the mode of the policy at the state it reached, whatever the action-sampling noise
    # (the key also samples the latent state, so two keys may reach two states)
    for seed in (1, 2):
        new, action, _ = agent.policy(params, carry, step_obs(batch, 0, True),
                                      jax.random.PRNGKey(seed), "eval")
        dist = agent.ac.dist(params["actor"], rssmlib.features(new))
        if agent.discrete:
            mode = jax.nn.one_hot(jnp.argmax(dist["logp"], -1), agent.act_dim)
            np.testing.assert_array_equal(action, mode)
        else:
            np.testing.assert_allclose(action, jnp.clip(dist["mean"], -1, 1), atol=1e-5)


def test_is_first_resets_the_policy_carry(setup):
    agent, state = setup
    params = agent.policy_params(state)
    batch = make_batch(agent, seed=1, b=3)  # 3, as above: the same compiled policy
    key = jax.random.PRNGKey(3)
    carry = agent.initial_carry(3)
    for t in range(4):
        carry, _, _ = agent.policy(params, carry, step_obs(batch, t, t == 0), key, "train")
    assert float(jnp.abs(carry["deter"]).sum()) > 0
    fresh = agent.policy(params, agent.initial_carry(3), step_obs(batch, 5, True), key, "train")
    reset = agent.policy(params, carry, step_obs(batch, 5, True), key, "train")
    cont = agent.policy(params, carry, step_obs(batch, 5, False), key, "train")
    jax.tree.map(np.testing.assert_array_equal, reset, fresh)
    assert not np.allclose(cont[0]["deter"], fresh[0]["deter"])


def test_is_first_resets_inside_the_observe_scan(setup):
    agent, state = setup
    params = state["params"]
    batch = make_batch(agent, seed=2, b=2, t=8)
    batch["is_first"][:, 5] = True
    wm = agent.wm
    tokens = wm.encode(params, batch)
    prev = wm.prev_actions(jnp.asarray(batch["action"]))
    _, states, post = rssmlib.observe(wm.rssm, params["rssm"], wm.initial(2), tokens, prev,
                                      jnp.asarray(batch["is_first"]), jax.random.PRNGKey(0))
    _, states2, post2 = rssmlib.observe(wm.rssm, params["rssm"], wm.initial(2), tokens[:, 5:],
                                        prev[:, 5:], jnp.asarray(batch["is_first"][:, 5:]),
                                        jax.random.PRNGKey(1))
    # The deterministic part of step 5 only depends on the reset, not on what came before.
    np.testing.assert_allclose(states["deter"][:, 5], states2["deter"][:, 0], atol=1e-6)
    np.testing.assert_allclose(post[:, 5], post2[:, 0], atol=1e-5)
    assert not np.allclose(states["deter"][:, 4], states2["deter"][:, 0], atol=1e-3)


@pytest.mark.slow
def test_train_runs_and_reports_metrics(setup):
    agent, state = setup
    batch = make_batch(agent)
    new, metrics = agent.train(state, batch, jax.random.PRNGKey(0))
    new, metrics = agent.train(new, make_batch(agent, seed=5), jax.random.PRNGKey(1))
    for name in ("loss/dyn", "loss/rep", "loss/dec", "loss/rew", "loss/con", "loss/policy",
                 "loss/value", "loss/repval", "kl", "retnorm/scale", "entropy", "ret", "grad_norm"):
        assert name in metrics, name
    from dreamer_live.tools.plot import PREFERRED_LOSSES  # the curves' loss order names logged losses only
    assert not [w for w in PREFERRED_LOSSES if f"loss/{w}" not in metrics]
    for name, value in metrics.items():
        assert np.shape(value) == () and np.isfinite(float(value)), name
    assert int(new["step"]) == 2
    assert float(metrics["loss/dyn"]) >= 1.0  # free bits
    assert float(metrics["retnorm/scale"]) >= 1.0
    changed = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), state["params"], new["params"])
    assert all(jax.tree.leaves(changed["enc"])) and any(jax.tree.leaves(changed["actor"]))
    same = jax.tree.map(lambda a, b: a.shape == b.shape and a.dtype == b.dtype, state, new)
    assert all(jax.tree.leaves(same))


def test_a_non_finite_update_is_skipped_and_leaves_the_state_as_it_was(setup):
    agent, state = setup
    batch = make_batch(agent)
    batch["vector"][0, 3] = np.nan
    new, metrics = agent.train(state, batch, jax.random.PRNGKey(0))
    assert float(metrics["skipped"]) == 1.0 and not np.isfinite(float(metrics["loss/total"]))
    same = jax.tree.map(lambda a, b: bool(jnp.array_equal(a, b)), state, new)
    assert all(jax.tree.leaves(same))
    new, metrics = agent.train(new, make_batch(agent), jax.random.PRNGKey(0))
    assert float(metrics["skipped"]) == 0.0 and int(new["step"]) == int(state["step"]) + 1


def test_policy_params_are_small_and_state_serializes(setup):
    agent, state = setup
    count = lambda tree: sum(np.size(x) for x in jax.tree.leaves(tree))  # noqa: E731
    params = agent.policy_params(state)
    assert set(params) == {"enc", "rssm", "actor"}
    assert count(params) < 0.25 * count(state)
    data = flax.serialization.to_bytes(state)
    template = agent.init(jax.random.PRNGKey(42))
    restored = flax.serialization.from_bytes(template, data)
    jax.tree.map(np.testing.assert_array_equal, restored, state)
    small = flax.serialization.from_bytes(agent.policy_params(template),
                                          flax.serialization.to_bytes(params))
    jax.tree.map(np.testing.assert_array_equal, small, params)


def test_policy_init_gives_the_full_inits_policy_params(setup):
    agent, state = setup  # state: agent.init(PRNGKey(0))
    jax.tree.map(np.testing.assert_array_equal, agent.init_policy(jax.random.PRNGKey(0)),
                 agent.policy_params(state))


def test_report_and_dream_shapes(setup):
    agent, state = setup
    b = 3  # 3 sequences, 4 observed: as test_viz's viz runs, the same compiled report
    batch = make_batch(agent, seed=3, b=b)
    image, vector = agent.obs_space["image"].shape, agent.obs_space["vector"].shape
    for fn in (agent.report, agent.dream):
        out = fn(state, batch, observe=4, key=jax.random.PRNGKey(0))
        assert out["image/truth"].shape == out["image/model"].shape == (b, T, *image)
        assert out["image/model"].dtype == jnp.uint8
        np.testing.assert_array_equal(out["image/truth"], batch["image"])
        assert out["vector/model"].shape == (b, T, *vector)
        for key in ("reward", "cont"):
            assert out[f"{key}/truth"].shape == out[f"{key}/model"].shape == (b, T)
        assert np.all((np.asarray(out["cont/model"]) >= 0) & (np.asarray(out["cont/model"]) <= 1))


def test_bad_inputs_fail_clearly():
    with pytest.raises(UserError, match="compute_dtype"):
        Agent(CFG.update({"agent.compute_dtype": "float16"}), obs_space(16),
              gymnasium.spaces.Discrete(2))
    bad = {**obs_space(16), "image": gymnasium.spaces.Box(0, 1, (16, 16, 3), np.float32)}
    with pytest.raises(UserError, match="uint8"):
        Agent(CFG, bad, gymnasium.spaces.Discrete(2))


def test_bfloat16_compute_keeps_float32_params():
    agent = Agent(CFG.update({"agent.compute_dtype": "bfloat16"}), obs_space(16),
                  gymnasium.spaces.Discrete(3))
    state = agent.init(jax.random.PRNGKey(0))
    assert {str(x.dtype) for x in jax.tree.leaves(state["params"])} == {"float32"}
    batch = make_batch(agent, seed=4)
    carry, action, _ = agent.policy(agent.policy_params(state), agent.initial_carry(B),
                                    step_obs(batch, 0, True), jax.random.PRNGKey(0), "train")
    assert carry["deter"].dtype == jnp.float32 and action.dtype == jnp.float32
    out = agent.report(state, batch, observe=4)
    assert np.all(np.isfinite(np.asarray(out["vector/model"])))
    assert np.all(np.isfinite(np.asarray(out["reward/model"])))


def test_replay_context_trains_from_stored_latents_and_stores_the_posterior():
    """agent.replay_context 1: the trained steps start from the stored latent of the context step
    (zeros where unknown or before is_first), and the training pass stores the posterior latents of
    the trained steps: those of the world model's observe from that start with the same key."""
    from dreamer_live.replay.latents import LatentStore
    from dreamer_live.steps import STEP_ID
    cfg = config.resolve(["debug"], {"agent.replay_context": 1})
    space = {"vector": gymnasium.spaces.Box(-np.inf, np.inf, (5,), np.float32), **step_spaces()}
    agent = Agent(cfg, space, gymnasium.spaces.Discrete(3))
    state = agent.init(jax.random.PRNGKey(0))
    r, rng = cfg.agent.rssm, np.random.default_rng(0)
    batch = {"vector": rng.normal(size=(B, T + 1, 5)).astype(np.float32),
             "action": np.eye(3, dtype=np.float32)[rng.integers(0, 3, (B, T + 1))],
             "reward": rng.normal(size=(B, T + 1)).astype(np.float32),
             "is_first": np.zeros((B, T + 1), bool), "is_last": np.zeros((B, T + 1), bool),
             "is_terminal": np.zeros((B, T + 1), bool),
             STEP_ID: np.arange(B * (T + 1)).reshape(B, T + 1)}
    batch["is_first"][1, 1] = True  # sequence 1 starts an episode: its stored start is not used
    store = LatentStore.from_config(cfg)
    store.update(batch[STEP_ID][1:, 0], rng.uniform(-1, 1, (B - 1, r.deter)),
                 np.eye(r.classes)[rng.integers(0, r.classes, (B - 1, r.stoch))])
    start = store.inputs(batch)
    used = np.array([False, False] + [True] * (B - 2))  # sequence 0: never stored
    assert (np.abs(start["context/deter"]).sum(-1) > 0).tolist() == used.tolist()
    np.testing.assert_array_equal(start["context/action"], batch["action"][:, 0] * used[:, None])
    key = jax.random.PRNGKey(3)
    new, metrics = store.train(agent, state, batch, key)
    assert metrics["skipped"] == 0 and int(new["step"]) == 1

    wm, params = agent.wm, state["params"]
    trained = {k: batch[k][:, 1:] for k in agent.batch_keys}
    prev = wm.prev_actions(jnp.asarray(trained["action"]), jnp.asarray(start["context/action"]))

    def observe(carry):
        return rssmlib.observe(wm.rssm, params["rssm"], carry, wm.encode(params, trained), prev,
                               jnp.asarray(trained["is_first"]), jax.random.split(key)[0])[1]

    expected = observe({"deter": start["context/deter"], "stoch": start["context/stoch"]})
    deter, stoch, known = store.lookup(batch[STEP_ID][:, 1:].ravel())
    assert known.all()
    np.testing.assert_allclose(deter, np.reshape(expected["deter"], (-1, r.deter)), atol=2e-3)
    np.testing.assert_array_equal(stoch, np.reshape(expected["stoch"], (-1, r.stoch, r.classes)))
    from_zero = observe(wm.initial(B))
    assert not np.allclose(from_zero["deter"][2:, 0], expected["deter"][2:, 0], atol=1e-2)
    np.testing.assert_allclose(from_zero["deter"][:2], expected["deter"][:2], atol=1e-5)
    # without a store's inputs every sequence starts from zero (the same compiled step)
    new, metrics = agent.train(state, {k: v for k, v in batch.items() if k != STEP_ID}, key)
    assert metrics["skipped"] == 0


def test_barlow_objective_shapes_the_latent_and_the_decoder_only_probes_it():
    """agent.objective barlow: a projection head from the features onto the tokens trains the encoder
    and RSSM through the posterior (the tokens are its stop-gradient target); the decoder's loss
    reaches the decoder alone, so viz draws what the features hold without shaping them."""
    cfg = config.resolve(["debug"], {"agent.objective": "barlow"})
    agent = Agent(cfg, obs_space(16), gymnasium.spaces.Discrete(3))
    state = agent.init(jax.random.PRNGKey(0))
    params = state["params"]
    assert params["prj"]["params"]["Dense_0"]["kernel"].shape[-1] == agent.wm.enc_dim()
    batch = {k: v for k, v in make_batch(agent).items() if k in agent.batch_keys}

    @jax.jit  # one program for both gradients: op by op, they cost more than its compile
    def grads_of_dec_and_barlow(p):
        def grad_of(name):
            return jax.grad(lambda q: agent.wm.loss(q, batch, jax.random.PRNGKey(1))[0][name].mean())(p)
        return grad_of("dec"), grad_of("barlow")

    def norm(tree):
        return float(sum(jnp.abs(x).sum() for x in jax.tree.leaves(tree)))

    dec, barlow = grads_of_dec_and_barlow(params)
    assert norm(dec["dec"]) > 0 and norm(dec["enc"]) == norm(dec["rssm"]) == 0
    assert norm(barlow["prj"]) > 0 and norm(barlow["enc"]) > 0 and norm(barlow["rssm"]) > 0
    assert norm(barlow["dec"]) == 0
    new, metrics = agent.train(state, batch, jax.random.PRNGKey(2))
    assert metrics["skipped"] == 0 and np.isfinite(float(metrics["loss/barlow"]))
    assert float(metrics["loss/wm"]) >= cfg.agent.loss_scales.barlow * float(metrics["loss/barlow"])
