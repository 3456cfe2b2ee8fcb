"""The agent's architecture against the official DreamerV3 (danijar/dreamerv3) in known values: its
weight init (variance scaling), its parameter counts per part for every size preset, its decoder's
split input projection (`bspace`) and its stride-2 transposed up-sampling convs; the encoder's conv
implementations (agent.enc.conv) as one function; the patch stem and pixel-shuffle head
(agent.enc.patch, agent.dec.patch) against a direct computation."""

import functools
import math

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dreamer_live import config
from dreamer_live.agent import Agent
from dreamer_live.agent.nets import CONVS, Decoder, Encoder, SplitSpace, Upsample, max_pool2, weight_init
from dreamer_live.envs.base import step_spaces
from dreamer_live.errors import UserError

# The reference's trunc_normal init: a normal truncated to [-2, 2], times 1.1368 (1 / its std 0.87963,
# rounded; weight_init uses the unrounded 1.13685), times outscale / sqrt(fan_in).
TRUNC_GAIN = 1.1368

# The paper's size presets: (deter, hidden, classes, CNN depth, units); stoch 32, 8 GRU blocks.
SIZES = {"size1m": (512, 64, 4, 4, 64), "size12m": (2048, 256, 16, 16, 256),
         "size25m": (3072, 384, 24, 24, 384), "size50m": (4096, 512, 32, 32, 512),
         "size100m": (6144, 768, 48, 48, 768), "size200m": (8192, 1024, 64, 64, 1024)}


def image_agent(presets, overrides=None, size=64, actions=18):
    """An agent for size x size x 3 frames and `actions` discrete actions."""
    obs = {**step_spaces(), "image": gymnasium.spaces.Box(0, 255, (size, size, 3), np.uint8)}
    return Agent(config.resolve(presets, overrides or {}), obs, gymnasium.spaces.Discrete(actions))


def reference_counts(deter, hidden, classes, depth, units, stoch=32, actions=18, blocks=8, bspace=8,
                     kernel=5, channels=3, res=64) -> dict:
    """Parameters per part of the reference's agent on res x res x channels images, counted from
    its layer list (dreamerv3/rssm.py, embodied/jax/heads.py): weights, biases and RMSNorm scales."""
    linear = lambda i, o: i * o + o  # noqa: E731
    normed = lambda i, o: linear(i, o) + o  # noqa: E731 a linear layer followed by an RMSNorm
    depths = [depth * m for m in (2, 3, 4, 4)]
    grid = (res // 16) ** 2 * depths[-1]  # the 4x4 low-res image, flattened (the token)
    feat = deter + stoch * classes
    enc = sum(normed(kernel ** 2 * i, o) for i, o in zip([channels] + depths[:-1], depths))
    rssm = (normed(deter, hidden) + normed(stoch * classes, hidden) + normed(actions, hidden)
            + blocks * (deter // blocks + 3 * hidden) * (deter // blocks) + 2 * deter  # dynhid
            + blocks * (deter // blocks) * (3 * deter // blocks) + 3 * deter  # dyngru
            + normed(deter + grid, hidden) + linear(hidden, stoch * classes)  # posterior
            + normed(deter, hidden) + normed(hidden, hidden) + linear(hidden, stoch * classes))
    if bspace:  # sp0 (block-diagonal from deter), sp1 and sp2 (from stoch), the norm's scale
        dec = (bspace * (deter // bspace) * (grid // bspace) + grid
               + normed(stoch * classes, 2 * units) + linear(2 * units, grid) + depths[-1])
    else:
        dec = linear(feat, grid) + depths[-1]
    ups = list(reversed(depths))
    dec += sum(normed(kernel ** 2 * i, o) for i, o in zip(ups[:-1], ups[1:]))
    dec += linear(kernel ** 2 * depths[0], channels)
    mlp = lambda n: normed(feat, units) + (n - 1) * normed(units, units)  # noqa: E731
    return {"enc": enc, "rssm": rssm, "dec": dec, "rew": mlp(1) + linear(units, 255),
            "con": mlp(1) + linear(units, 1), "actor": mlp(3) + linear(units, actions),
            "critic": mlp(3) + linear(units, 255)}


def counts(agent) -> dict:
    """Parameters per part of an agent (shapes only, nothing allocated)."""
    params = jax.eval_shape(agent.init, jax.random.PRNGKey(0))["params"]
    return {k: sum(math.prod(x.shape) for x in jax.tree.leaves(v)) for k, v in params.items()}


def test_weight_init_is_the_references_variance_scaling():
    """std = outscale / sqrt(fan_in) with fan_in every axis but the last (a conv's k x k x in, a
    block layer's whole input), drawn from a normal truncated at 2 of its own stds."""
    cases = [((512, 256), 1.0, 512), ((5, 5, 64, 96), 1.0, 5 * 5 * 64), ((8, 88, 64), 1.0, 8 * 88),
             ((256, 18), 0.01, 256)]
    for shape, outscale, fan_in in cases:
        w = np.asarray(weight_init(outscale)(jax.random.PRNGKey(0), shape))
        std = outscale / math.sqrt(fan_in)
        sigma = 1 / math.sqrt(w.size)  # sampling error, relative to the std
        assert w.std() == pytest.approx(std, rel=3 * sigma), shape
        assert abs(w.mean()) < 4 * sigma * std
        assert np.abs(w).max() <= 2 * TRUNC_GAIN * std * (1 + 1e-4)
        assert np.abs(w).max() >= 1.9 * TRUNC_GAIN * std  # truncated at 2, not narrower
    assert not np.any(weight_init(0.0)(jax.random.PRNGKey(0), (64, 255)))


def test_init_scales_in_the_agent_match_the_reference():
    """size1m: the GRU's block layers (fan-in their whole input: 8 x (512 / 8 + 3 x 64) and 512, not
    per block), the policy output (outscale 0.01 multiplies the std, not inside the square root),
    the decoder's block projection from deter (fan-in 512) and a transposed conv (5 x 5 x 16)."""
    params = image_agent(["size1m"]).init(jax.random.PRNGKey(0))["params"]
    expected = {
        ("rssm", "dynhid_0"): 1 / np.sqrt(8 * (512 // 8 + 3 * 64)),  # 0.0221 (per-block fan-in: 0.0625)
        ("rssm", "dyngru"): 1 / np.sqrt(512),
        ("actor", "Dense_0"): 0.01 / np.sqrt(64),  # 0.00125 (outscale inside the sqrt: 0.0125)
        ("dec", "space/sp0"): 1 / np.sqrt(512),
        ("dec", "up2"): 1 / np.sqrt(5 * 5 * 16),
    }
    for (part, layer), std in expected.items():
        kernel = np.asarray(functools.reduce(dict.get, layer.split("/"), params[part]["params"])["kernel"])
        assert np.std(kernel) == pytest.approx(std, rel=0.05), (part, layer)
    assert params["dec"]["params"]["up2"]["kernel"].shape == (5, 5, 16, 16)


@pytest.mark.parametrize("strided", [True, False])
def test_parameter_counts_match_the_reference_for_every_size(strided):
    """64x64x3 frames, 18 actions: each part of each size preset has the reference's parameter count
    (size1m 688,004, size200m 165,967,124), with either up-sampling conv."""
    for preset, dims in SIZES.items():
        expected = reference_counts(*dims)
        assert counts(image_agent([preset], {"agent.dec.strided": strided})) == expected, preset
    assert sum(reference_counts(*SIZES["size1m"]).values()) == 688_004
    assert sum(reference_counts(*SIZES["size200m"]).values()) == 165_967_124


def test_one_dense_projection_when_bspace_is_zero():
    """agent.dec.bspace 0: one dense layer from deter and stoch to the low-res grid (16% more in all
    for size1m: 785,796)."""
    got = counts(image_agent(["size1m"], {"agent.dec.bspace": 0}))
    assert got == reference_counts(*SIZES["size1m"], bspace=0)
    assert sum(got.values()) == 785_796


def test_split_projection_maps_each_deter_block_to_its_channel_group():
    """Block k of deter reaches only channel group k at every low-res position (the reference's
    '(g h w c) -> h w (g c)'); stoch reaches every channel; the result is the sum of the two."""
    deter, stoch, grid = 32, 12, (2, 3, 8)
    split = SplitSpace(grid, deter, blocks=4, hidden=16)
    feat = jax.random.normal(jax.random.PRNGKey(1), (5, deter + stoch))
    params = split.init(jax.random.PRNGKey(0), feat)
    base = split.apply(params, feat)
    assert base.shape == (5, *grid)
    for block in range(4):
        moved = feat.at[:, block * 8:(block + 1) * 8].add(1.0)
        diff = np.abs(np.asarray(split.apply(params, moved) - base)).max((0, 1, 2))
        group = diff[block * 2:(block + 1) * 2]
        assert np.all(group > 1e-4) and diff.sum() == pytest.approx(group.sum()), block
    diff = np.abs(np.asarray(split.apply(params, feat.at[:, deter:].add(1.0)) - base))
    assert np.all(diff.max((0, 1, 2)) > 1e-4)
    # The deter part computed by hand from sp0's kernel [4 blocks, 8 in, 2 x 3 x 2 out] and bias.
    sp0 = params["params"]["sp0"]
    y = np.einsum("ngi,gio->ngo", np.asarray(feat[:, :deter]).reshape(5, 4, 8), sp0["kernel"])
    y = y + np.asarray(sp0["bias"]).reshape(4, 12)
    y = y.reshape(5, 4, 2, 3, 2).transpose(0, 2, 3, 1, 4).reshape(5, *grid)
    only_stoch = split.apply(params, feat.at[:, :deter].set(0.0)) - np.asarray(sp0["bias"]).reshape(
        4, 2, 3, 2).transpose(1, 2, 0, 3).reshape(grid)
    np.testing.assert_allclose(base, y + np.asarray(only_stoch), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kernel", [5, 3, 4])
def test_strided_upsample_is_the_references_transposed_conv(kernel):
    """The input placed on the odd positions of a zero 2x grid, then a SAME k x k conv plus bias,
    as the reference's `Conv2D(transp=True)`, computed here directly and compared."""
    x = jax.random.normal(jax.random.PRNGKey(1), (2, 5, 4, 3))
    up = Upsample(6, kernel, strided=True)
    params = up.init(jax.random.PRNGKey(0), x)
    params = jax.tree.map(lambda a: a + 0.1 * jax.random.normal(jax.random.PRNGKey(2), a.shape), params)
    w, b = params["params"]["kernel"], params["params"]["bias"]
    assert w.shape == (kernel, kernel, 3, 6)
    grid = jnp.zeros((2, 10, 8, 3)).at[:, 1::2, 1::2].set(x)
    expected = jax.lax.conv_general_dilated(grid, w, (1, 1), "SAME",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC")) + b
    np.testing.assert_allclose(up.apply(params, x), expected, rtol=1e-5, atol=1e-5)


def test_max_pool_has_reduce_windows_value_and_gradient():
    """The conv + max-pool layout's 2x2 pool (a reshape and a max) against the reference's
    reduce_window max-pool: value and gradient, on input without ties."""
    x = jax.random.normal(jax.random.PRNGKey(0), (2, 8, 6, 3))
    pool = functools.partial(jax.lax.reduce_window, init_value=-jnp.inf, computation=jax.lax.max,
                             window_dimensions=(1, 2, 2, 1), window_strides=(1, 2, 2, 1),
                             padding="VALID")
    (y, vjp), (y2, vjp2) = jax.vjp(max_pool2, x), jax.vjp(pool, x)
    np.testing.assert_array_equal(y, y2)
    g = jax.random.normal(jax.random.PRNGKey(1), y.shape)
    np.testing.assert_array_equal(vjp(g)[0], vjp2(g)[0])


@pytest.mark.parametrize("kernel, stride, size", [(5, 2, (8, 10)), (4, 2, (7, 6)), (3, 1, (5, 5))])
def test_phase_conv_has_xlas_value_and_gradients(kernel, stride, size):
    """agent.enc.conv phase: XLA's SAME conv with its input gradient computed per phase as a stride-1
    conv; value, input gradient and weight gradient equal XLA's own (odd sizes too)."""
    x = jax.random.normal(jax.random.PRNGKey(0), (2, *size, 3))
    w = jax.random.normal(jax.random.PRNGKey(1), (kernel, kernel, 3, 4))
    (y, vjp), (y2, vjp2) = (jax.vjp(lambda x, w: CONVS[impl](x, w, stride), x, w)
                            for impl in ("xla", "phase"))
    np.testing.assert_array_equal(y, y2)
    dy = jax.random.normal(jax.random.PRNGKey(2), y.shape)
    for got, want in zip(vjp2(dy), vjp(dy)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_encoder_conv_implementations_share_parameters_and_gradients():
    """The encoder with either conv: the same parameters from one key, the same tokens, the same
    gradients (float32 rounding apart)."""
    image = {"image": jax.random.randint(jax.random.PRNGKey(0), (3, 16, 16, 3), 0, 256, jnp.uint8)}
    xla = Encoder(("image",), (), depth=2, kernel=5, conv="xla")
    phase = xla.clone(conv="phase")
    params = xla.init(jax.random.PRNGKey(1), image)
    jax.tree.map(np.testing.assert_array_equal, params, phase.init(jax.random.PRNGKey(1), image))
    dy = jax.random.normal(jax.random.PRNGKey(2), xla.apply(params, image).shape)
    (value, grads), (value2, grads2) = (
        jax.value_and_grad(lambda p: (enc.apply(p, image) * dy).sum())(params) for enc in (xla, phase))
    assert value == value2
    for got, want in zip(jax.tree.leaves(grads2), jax.tree.leaves(grads)):
        np.testing.assert_allclose(got, want, atol=1e-5 * np.abs(want).max())


def test_bspace_that_does_not_divide_is_one_line():
    """A split the decoder cannot make names the keys to change."""
    with pytest.raises(UserError, match=r"agent.dec.bspace 8 must divide agent.rssm.deter \(36\)"):
        image_agent(["debug"], {"agent.dec.bspace": 8, "agent.rssm.deter": 36}, size=32)
    with pytest.raises(UserError, match=r"low-res depth \(6:"):  # debug's depth 2 x 3 at 16x16
        image_agent(["debug"], {"agent.dec.bspace": 8}, size=16)
    image_agent(["debug"], {"agent.dec.bspace": 4, "agent.rssm.deter": 36}, size=32)


def test_patch_stem_is_one_dense_layer_on_each_patch():
    """agent.enc.patch 4 on 16x16x3 (two stages to 4x4): each 4 x 4 patch's 48 pixels, rows then
    columns then channels, times the stem's kernel plus its bias, is the token at that patch."""
    image = jax.random.randint(jax.random.PRNGKey(0), (2, 16, 16, 3), 0, 256, jnp.uint8)
    enc = Encoder(("image",), (), depth=2, patch=4, norm="none", act="none")
    params = enc.init(jax.random.PRNGKey(1), {"image": image})
    w, b = (np.asarray(params["params"]["patch"][k]) for k in ("kernel", "bias"))
    assert w.shape == (4 * 4 * 3, 6) and list(params["params"]) == ["patch"]  # depth 2 x mults[1]
    x = np.asarray(image, np.float32) / 255.0 - 0.5
    expected = np.stack([x[:, 4 * i:4 * i + 4, 4 * j:4 * j + 4].reshape(2, -1) @ w + b
                         for i in range(4) for j in range(4)], 1)
    np.testing.assert_allclose(enc.apply(params, {"image": image}), expected.reshape(2, -1),
                               rtol=1e-5, atol=1e-5)


def test_fourier_features_give_the_mlp_sin_and_cos_of_each_raw_value_at_each_period():
    """agent.enc.fourier [16, 64]: the vector MLP's input is symlog of the values, then per value sin at
    each period and cos at each period; the config key reaches the world model's encoder."""
    pos = jnp.array([[3400.0, 100.0], [3408.0, 100.0]])
    enc = Encoder((), ("pos",), layers=1, units=5, fourier=(16, 64), norm="none", act="none")
    params = enc.init(jax.random.PRNGKey(0), {"pos": pos})
    w, b = (np.asarray(params["params"]["MLP_0"]["Dense_0"]["Dense_0"][k]) for k in ("kernel", "bias"))
    x = np.asarray(pos, np.float64)
    angles = x[..., None] * (2 * np.pi / np.array([16.0, 64.0]))
    waves = np.concatenate([np.sin(angles), np.cos(angles)], -1).reshape(2, -1)
    expected = np.concatenate([np.sign(x) * np.log1p(np.abs(x)), waves], -1) @ w + b
    np.testing.assert_allclose(enc.apply(params, {"pos": pos}), expected, rtol=1e-4, atol=1e-4)
    assert w.shape == (2 * (1 + 2 * 2), 5)
    assert image_agent(["debug"], {"agent.enc.fourier": [16, 64]}, size=16).wm.enc.fourier == (16, 64)


def test_pixel_shuffle_head_predicts_each_patch_from_its_neighbourhood():
    """agent.dec.patch 2 on 16x16 (an up-sampling conv to 8x8, then the head): output pixel
    (2i + r, 2j + s, c) is output channel (2r + s) x C + c of a 3 x 3 SAME conv (the taps of the
    kernel-5 up-sampling convs) at (i, j), through the sigmoid."""
    dec = Decoder((("a", (16, 16, 1)), ("b", (16, 16, 2))), (), deter=8, bspace=2, depth=2, patch=2,
                  units=4, norm="none", act="none")
    feat = jax.random.normal(jax.random.PRNGKey(0), (3, 12))
    params = dec.init(jax.random.PRNGKey(1), feat)
    out, seen = dec.apply(params, feat, capture_intermediates=True)
    x = np.asarray(seen["intermediates"]["up0"]["__call__"][0])  # the head's input, [3, 8, 8, 4]
    w, b = (np.asarray(params["params"]["patch"][k]) for k in ("kernel", "bias"))
    assert x.shape == (3, 8, 8, 4) and w.shape == (3, 3, 4, 2 * 2 * 3)
    assert "upout" not in params["params"]
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    y = sum(padded[:, dy:dy + 8, dx:dx + 8] @ w[dy, dx] for dy in range(3) for dx in range(3)) + b
    y = y.reshape(3, 8, 8, 2, 2, 3)  # [.., i, j, r, s, c]
    expected = 1 / (1 + np.exp(-y.transpose(0, 1, 3, 2, 4, 5).reshape(3, 16, 16, 3)))
    np.testing.assert_allclose(out["a"], expected[..., :1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["b"], expected[..., 1:], rtol=1e-5, atol=1e-6)


def test_patch_layout_parameter_counts_for_every_size():
    """64x64x3 frames, patch 4 both ways: the reference's counts with its two full- and
    half-resolution encoder convs replaced by one dense layer on 48-pixel patches, and its last two
    decoder layers by one 3 x 3 conv to each patch's 48 pixels; the rest is the same."""
    linear = lambda i, o: i * o + o  # noqa: E731
    normed = lambda i, o: linear(i, o) + o  # noqa: E731
    for preset, dims in SIZES.items():
        ref, d = reference_counts(*dims), [dims[3] * m for m in (2, 3, 4, 4)]
        enc = ref["enc"] - normed(25 * 3, d[0]) - normed(25 * d[0], d[1]) + normed(48, d[1])
        dec = ref["dec"] - normed(25 * d[1], d[0]) - linear(25 * d[0], 3) + linear(9 * d[1], 48)
        got = counts(image_agent([preset], {"agent.enc.patch": 4, "agent.dec.patch": 4}))
        assert got == {**ref, "enc": enc, "dec": dec}, preset


@pytest.mark.parametrize("key, value", [("agent.enc.patch", 3), ("agent.dec.patch", 32)])
def test_a_patch_the_image_cannot_take_is_one_line(key, value):
    """Not a power of 2, or more than the down-sampling to minres: one line naming the key."""
    with pytest.raises(UserError, match=rf"{key} {value} must be a power of 2 of at most 16 here"):
        image_agent(["debug"], {key: value})
