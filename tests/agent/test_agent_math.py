"""The agent's math against hand-computed values: symlog, two-hot, KL balancing, return
normalization, lambda-returns, unimix, the optimizer's first steps and the image loss's motion weights."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dreamer_live.agent import behavior, dists, optim


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def test_symlog_symexp_known_values_and_inverse():
    e1 = math.e - 1
    close(dists.symlog(jnp.array([0.0, e1, -e1, 1e8])), [0.0, 1.0, -1.0, math.log(1e8 + 1)])
    close(dists.symexp(jnp.array([0.0, 1.0, -1.0, 2.0])), [0.0, e1, -e1, math.exp(2) - 1])
    x = jnp.array([-1e6, -123.4, -1.0, -1e-3, 0.0, 1e-3, 0.5, 7.0, 1e6])
    np.testing.assert_allclose(dists.symexp(dists.symlog(x)), x, rtol=1e-5)


def test_bins_are_symmetric_uniform_in_symlog_space():
    bins = dists.symexp_bins(255)
    assert bins.shape == (255,)
    assert float(bins[127]) == 0.0
    close(bins, -bins[::-1], 0)
    close(dists.symlog(bins), np.linspace(-20, 20, 255), 1e-4)


def test_twohot_weights_between_two_bins():
    bins = dists.symexp_bins(255)
    lo, hi = float(bins[130]), float(bins[131])
    x = lo + 0.25 * (hi - lo)
    target = dists.twohot_encode(jnp.array(x), bins)
    expected = np.zeros(255)
    expected[130], expected[131] = 0.75, 0.25
    close(target, expected)
    # On a bin and beyond the ends: all weight on one bin.
    close(dists.twohot_encode(jnp.array(0.0), bins)[127], 1.0)
    close(dists.twohot_encode(jnp.array(1e12), bins)[254], 1.0)
    close(dists.twohot_encode(jnp.array(-1e12), bins)[0], 1.0)


def test_twohot_round_trip_and_zero_at_init():
    bins = dists.symexp_bins(255)
    x = jnp.array([-5000.0, -3.7, -0.01, 0.0, 0.3, 1.0, 42.0, 1e5])
    logits = jnp.log(dists.twohot_encode(x, bins))  # -inf outside the two bins
    np.testing.assert_allclose(dists.twohot_pred(logits, bins), x, rtol=1e-4, atol=1e-5)
    assert float(dists.twohot_pred(jnp.zeros(255), bins)) == 0.0  # uniform -> exactly zero
    # Mirrored probabilities -> exactly zero (a plain sum of p * bin over bins up to 4.8e8 leaves
    # up to 8 here; test_devices checks the same under XLA's fusions for several devices).
    half = jax.random.normal(jax.random.PRNGKey(0), (64, 127))
    mirrored = jnp.concatenate([half, jnp.ones((64, 1)), half[:, ::-1]], -1)
    assert not np.any(np.asarray(jax.jit(dists.twohot_pred)(mirrored, bins)))
    # The loss is the cross-entropy against the two-hot target.
    logits = jnp.linspace(-1, 1, 255)
    logp = jax.nn.log_softmax(logits)
    value = float(bins[130] + 0.25 * (bins[131] - bins[130]))
    close(dists.twohot_loss(logits, bins, jnp.array(value)), -(0.75 * logp[130] + 0.25 * logp[131]))


def test_unimix_puts_a_floor_under_every_class():
    logp = dists.unimix_logits(jnp.array([100.0, 0.0, 0.0, 0.0]), 0.01)
    close(jnp.exp(logp), [0.99 + 0.0025, 0.0025, 0.0025, 0.0025])


POST = np.log(np.array([[0.7, 0.2, 0.1], [0.9, 0.05, 0.05]], np.float32))
PRIOR = np.log(np.array([[0.2, 0.5, 0.3], [0.1, 0.45, 0.45]], np.float32))
KL0 = 0.7 * math.log(3.5) + 0.2 * math.log(0.4) + 0.1 * math.log(1 / 3)  # 0.583815
KL1 = 0.8 * math.log(9)  # 1.757780


def test_kl_free_bits_hand_computed():
    dyn, rep, kl = dists.kl_losses(jnp.array(POST), jnp.array(PRIOR), free_nats=1.0)
    close(kl, KL0 + KL1)
    close(dyn, KL0 + KL1)
    close(rep, KL0 + KL1)
    # Only the first group: 0.58 nats is under the free bits, the loss is clipped to 1 and flat.
    dyn, rep, kl = dists.kl_losses(jnp.array(POST[:1]), jnp.array(PRIOR[:1]), free_nats=1.0)
    close(kl, KL0)
    close(dyn, 1.0)
    close(rep, 1.0)
    grad = jax.grad(lambda q: dists.kl_losses(jnp.array(POST[:1]), q, 1.0)[0])(jnp.array(PRIOR[:1]))
    close(grad, np.zeros_like(PRIOR[:1]))


def test_kl_balancing_routes_gradients():
    def total(post, prior, dyn_scale, rep_scale):
        dyn, rep, _ = dists.kl_losses(post, prior, 1.0)
        return dyn_scale * dyn + rep_scale * rep

    def plain_kl(post, prior):
        return dists.categorical_kl(post, prior).sum()

    post, prior = jnp.array(POST), jnp.array(PRIOR)
    g_post, g_prior = jax.grad(total, (0, 1))(post, prior, 1.0, 0.1)
    k_post, k_prior = jax.grad(plain_kl, (0, 1))(post, prior)
    close(g_prior, k_prior)  # dyn (scale 1.0) trains the prior
    close(g_post, 0.1 * k_post)  # rep (scale 0.1) trains the posterior
    g_post, g_prior = jax.grad(total, (0, 1))(post, prior, 0.5, 0.1)  # the older 0.5 / 0.1
    close(g_prior, 0.5 * k_prior)


def test_return_normalization_percentile_ema():
    ret = jnp.arange(101, dtype=jnp.float32)  # percentiles 5 and 95 are 5 and 95
    state = behavior.retnorm_update(behavior.retnorm_init(), ret, decay=0.99)
    close(state["lo"], 0.05)
    close(state["hi"], 0.95)
    lo, scale = behavior.retnorm_stats(state, limit=1.0)
    close(lo, 0.05)
    close(scale, 1.0)  # range 0.9 < 1: max(1, S) keeps small returns unscaled
    state = behavior.retnorm_update(state, ret, decay=0.99)
    close(state["lo"], 0.99 * 0.05 + 0.01 * 5)
    close(state["hi"], 0.99 * 0.95 + 0.01 * 95)
    for _ in range(2000):
        state = behavior.retnorm_update(state, ret, decay=0.99)
    close(behavior.retnorm_stats(state, 1.0)[1], 90.0, 1e-3)
    small = behavior.retnorm_init()
    for _ in range(2000):
        small = behavior.retnorm_update(small, ret / 1000, decay=0.99)
    close(behavior.retnorm_stats(small, 1.0)[1], 1.0)


def lam_ret(rew, boot, term=(0, 0, 0, 0), last=(0, 0, 0, 0)):
    row = lambda x: jnp.array([x], jnp.float32)  # noqa: E731
    return np.asarray(behavior.lambda_return(row(last), row(term), row(rew), row(boot), 0.9, 0.8))[0]


def test_lambda_returns_hand_computed():
    rew = (0.0, 1.0, 2.0, 3.0)
    val = (0.5, 1.0, 2.0, 4.0)
    # R2 = 3 + .9*4; R1 = 2 + .9*(.2*2 + .8*R2); R0 = 1 + .9*(.2*1 + .8*R1)
    close(lam_ret(rew, val), [6.30064, 7.112, 6.6])
    # Terminal at step 2: nothing flows back past it.
    close(lam_ret(rew, val, term=(0, 0, 1, 0)), [2.62, 2.0, 6.6])
    # is_last at step 2 only cuts the lambda mixing: R1 bootstraps from V2.
    close(lam_ret(rew, val, last=(0, 0, 1, 0)), [3.916, 3.8, 6.6])
    # lambda = 1 would be the discounted sum; check it with lam 1 directly.
    row = lambda x: jnp.array([x], jnp.float32)  # noqa: E731
    full = behavior.lambda_return(row((0, 0, 0, 0)), row((0, 0, 0, 0)), row(rew), row(val), 0.9, 1.0)
    close(full[0, 0], 1 + 0.9 * 2 + 0.81 * 3 + 0.729 * 4)


def opt_config(**over):
    """An `agent.opt` section: LaProp at lr 0.1, no clipping, warm-up or decay; `over` replaces keys."""
    keys = dict(name="laprop", lr=0.1, agc=0.0, eps=1e-20, beta1=0.9, beta2=0.999, wd=0.0, warmup=0,
                actor_lr=1.0)
    return type("Opt", (), {**keys, **over})


def test_laprop_first_step_and_agc():
    opt = optim.make(opt_config())
    params = {"w": jnp.array([1.0, -2.0, 3.0])}
    grads = {"w": jnp.array([0.5, -4.0, 1e-3])}
    updates, _ = opt.update(grads, opt.init(params), params)
    close(updates["w"], [-0.1, 0.1, -0.1])  # normalized per coordinate, bias corrected
    clip = optim.clip_by_agc(0.3)
    big = {"w": jnp.array([30.0, 40.0, 0.0])}  # norm 50 > 0.3 * ||w|| = 0.3 * sqrt(14)
    out, _ = clip.update(big, clip.init(params), params)
    close(jnp.linalg.norm(out["w"]), 0.3 * math.sqrt(14))
    close(out["w"] / jnp.linalg.norm(out["w"]), big["w"] / 50.0)
    small = {"w": jnp.array([0.1, 0.0, 0.0])}
    out, _ = clip.update(small, clip.init(params), params)
    close(out["w"], small["w"])


def test_actor_lr_scales_only_the_actors_step():
    def step(actor_lr):
        opt = optim.make(opt_config(actor_lr=actor_lr))
        params = {"actor": {"w": jnp.ones(2)}, "critic": {"w": jnp.ones(2)}}
        grads = {"actor": {"w": jnp.array([1.0, -1.0])}, "critic": {"w": jnp.array([1.0, -1.0])}}
        return opt.update(grads, opt.init(params), params)[0]

    full, tenth = step(1.0), step(0.1)
    close(full["actor"]["w"], [-0.1, 0.1])
    close(tenth["actor"]["w"], [-0.01, 0.01])
    close(tenth["critic"]["w"], full["critic"]["w"])


def test_warmup_schedule_is_linear():
    lr = optim.schedule(1e-3, 100)
    close([lr(0), lr(50), lr(100), lr(1000)], [0.0, 5e-4, 1e-3, 1e-3])


@pytest.mark.parametrize("minstd,maxstd", [(0.1, 1.0)])


def test_bounded_normal_ranges(minstd, maxstd):
    raw = jnp.array([[-50.0, 50.0, -50.0, 50.0]])
    mean, std = dists.bounded_normal(raw, minstd, maxstd)
    assert np.all(np.abs(mean) <= 1.0)
    assert np.all((std >= minstd) & (std <= maxstd))
    close(dists.normal_logp(jnp.zeros(1), jnp.ones(1), jnp.zeros(1)), -0.5 * math.log(2 * math.pi))


def test_motion_weights_hand_computed():
    from dreamer_live.agent.worldmodel import motion_weights
    frames = jnp.array([0.0, 0.5, 0.5, 0.1]).reshape(1, 4, 1, 1, 1)  # [B, T, H, W, C]
    close(motion_weights(frames, 10.0).reshape(-1), [1.0, 6.0, 1.0, 5.0])
    assert motion_weights(frames, 0.0) == 1.0


def test_barlow_loss_hand_computed():
    """R2-Dreamer's objective: zero when the standardized columns of x and y are the same and mutually
    uncorrelated, 4 per column when each is the other's negative; otherwise sum (C_ii - 1)^2 + lambda
    sum_(i != j) C_ij^2 of the cross-correlation C of the standardized columns."""
    from dreamer_live.agent.worldmodel import barlow_loss
    hadamard = np.array([[1, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]], np.float32)
    x = jnp.asarray(np.concatenate([hadamard[:, 1:]] * 2))  # three zero-mean, uncorrelated columns
    close(barlow_loss(x, 3.0 * x + 1.0, 0.5), 0.0)  # invariant to each column's scale and offset
    close(barlow_loss(x, -x, 0.5), 4.0 * 3)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
    za = (a - a.mean(0)) / a.std(0)
    zb = (b - b.mean(0)) / b.std(0)
    corr = za.T @ zb / 50
    off = (corr ** 2).sum() - (np.diag(corr) ** 2).sum()
    close(barlow_loss(jnp.asarray(a), jnp.asarray(b), 0.1), ((np.diag(corr) - 1) ** 2).sum() + 0.1 * off,
          1e-4)
