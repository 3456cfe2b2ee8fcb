"""Network building blocks: norms, dense and block-diagonal layers, MLP heads, CNN encoder/decoder.

Parameters are always float32; `dtype` is the compute dtype (float32 or bfloat16). Norms compute in
float32 and hand back the compute dtype.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dreamer_live.agent.dists import symlog
from dreamer_live.errors import UserError

f32 = jnp.float32


def weight_init(scale: float = 1.0):
    """Fan-in truncated normal with std scale * sqrt(1 / fan_in), as the official DreamerV3 (its
    outscale multiplies the std); scale 0 gives zeros (output layers).

    The last axis is the output axis and every other axis counts into the fan-in, the blocks of a
    block-diagonal kernel too (the reference's fan-in of a block layer is its whole input). The draw
    is flat (see dists.uniform for why).
    """
    if scale == 0.0:
        return nn.initializers.zeros_init()

    def init(key, shape, dtype=f32):
        fan_in = math.prod(shape[:-1])
        std = scale * math.sqrt(1.0 / max(1, fan_in)) / 0.87962566103423978  # truncation correction
        flat = jax.random.truncated_normal(key, -2.0, 2.0, (math.prod(shape),), f32)
        return (flat * std).reshape(shape).astype(dtype)

    return init


def activation(name: str):
    """Activation function by name (silu, gelu, relu, tanh, none)."""
    if name == "none":
        return lambda x: x
    return {"silu": jax.nn.silu, "gelu": jax.nn.gelu, "relu": jax.nn.relu, "tanh": jnp.tanh}[name]


class Norm(nn.Module):
    """RMSNorm, LayerNorm or nothing over the last axis, computed in float32."""

    kind: str = "rms"

    @nn.compact
    def __call__(self, x):
        if self.kind == "none":
            return x
        dtype = x.dtype
        if self.kind == "rms":
            y = nn.RMSNorm(epsilon=1e-4, dtype=f32, param_dtype=f32)(x.astype(f32))
        elif self.kind == "layer":
            y = nn.LayerNorm(epsilon=1e-4, dtype=f32, param_dtype=f32)(x.astype(f32))
        else:
            raise ValueError(f"unknown norm '{self.kind}'")
        return y.astype(dtype)


class Dense(nn.Module):
    """Linear layer followed by norm and activation."""

    units: int
    norm: str = "rms"
    act: str = "silu"
    dtype: Any = f32

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(self.units, dtype=self.dtype, param_dtype=f32, kernel_init=weight_init())(
            x.astype(self.dtype))
        return activation(self.act)(Norm(self.norm)(x))


class BlockLinear(nn.Module):
    """Block-diagonal linear layer: `blocks` independent groups, input and output split evenly.

    An optional `shared` input [..., S] is seen by every block (as if concatenated to each group's
    input); it is applied as one dense matmul instead of being copied `blocks` times.
    Kernel [blocks, in/blocks + S, units/blocks].
    """

    units: int
    blocks: int
    dtype: Any = f32

    @nn.compact
    def __call__(self, x, shared=None, group_major: bool = False):
        """[..., in] -> [..., units], or [blocks, N, units / blocks] when group_major."""
        g = self.blocks
        lead, din = x.shape[:-1], x.shape[-1]
        extra = 0 if shared is None else shared.shape[-1]
        assert din % g == 0 and self.units % g == 0, (din, self.units, g)
        kernel = self.param("kernel", weight_init(),
                            (g, din // g + extra, self.units // g), f32).astype(self.dtype)
        bias = self.param("bias", nn.initializers.zeros_init(), (self.units,), f32)
        # Group-major layout keeps XLA's batched dot free of strided transposes.
        xg = x.astype(self.dtype).reshape(-1, g, din // g).transpose(1, 0, 2)
        y = jnp.einsum("gni,gio->gno", xg, kernel[:, :din // g])
        y = y + bias.astype(self.dtype).reshape(g, 1, -1)
        if shared is not None:
            dense = kernel[:, din // g:]  # [g, S, out]
            y = y + jnp.einsum("ns,gso->gno", shared.astype(self.dtype).reshape(-1, extra), dense)
        if group_major:
            return y
        return y.transpose(1, 0, 2).reshape(*lead, self.units)


class MLP(nn.Module):
    """A stack of Dense layers."""

    layers: int
    units: int
    norm: str = "rms"
    act: str = "silu"
    dtype: Any = f32

    @nn.compact
    def __call__(self, x):
        for _ in range(self.layers):
            x = Dense(self.units, self.norm, self.act, self.dtype)(x)
        return x


class Head(nn.Module):
    """MLP torso then a linear output layer (scaled init; 0 = zeros); returns float32 outputs."""

    layers: int
    units: int
    outputs: int
    outscale: float = 1.0
    norm: str = "rms"
    act: str = "silu"
    dtype: Any = f32

    @nn.compact
    def __call__(self, x):
        x = MLP(self.layers, self.units, self.norm, self.act, self.dtype)(x)
        x = nn.Dense(self.outputs, dtype=self.dtype, param_dtype=f32,
                     kernel_init=weight_init(self.outscale))(x.astype(self.dtype))
        return x.astype(f32)


def cnn_stages(size: Sequence[int], minres: int = 4) -> int:
    """Number of 2x down-samplings that take an image of `size` down to about `minres`."""
    h, w = size
    stages = 0
    while min(h, w) > minres and h % 2 == 0 and w % 2 == 0:
        h, w, stages = h // 2, w // 2, stages + 1
    return stages


def cnn_depths(depth: int, mults: Sequence[int], stages: int) -> list[int]:
    """Channels per stage: depth * mult, repeating the last multiplier if there are more stages."""
    return [depth * mults[min(i, len(mults) - 1)] for i in range(stages)]


def patch_stages(patch: int, stages: int, key: str = "agent.enc.patch") -> int:
    """How many of the `stages` 2x down-samplings a `patch` x `patch` stem replaces (log2 of it)."""
    k = patch.bit_length() - 1
    if patch != 1 << k or k > stages:
        raise UserError(f"{key} {patch} must be a power of 2 of at most {1 << stages} here (the "
                        f"image is down-sampled {stages} times to its minres)")
    return k


def fourier_features(x, periods: Sequence[float]):
    """sin and cos of each value of x (..., d) at each period, in the values' own units: (..., 2 d p)."""
    angles = x[..., None] * (2 * math.pi / jnp.asarray(periods, f32))
    return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], -1).reshape(*x.shape[:-1], -1)


class Encoder(nn.Module):
    """Observation encoder: strided CNN for image keys, symlog MLP for vector keys; returns tokens.

    With `fourier` periods the vector MLP also sees the sin and cos of each raw value at each period,
    which resolve differences that symlog squeezes together (a few pixels of a position in thousands).

    With `patch` p > 1 the first log2(p) stages are one patch stem: each p x p patch (space-to-depth)
    through a dense layer, so no conv runs at the full resolution over the image's few channels.
    """

    image_keys: tuple = ()
    vector_keys: tuple = ()
    depth: int = 16
    mults: tuple = (2, 3, 4, 4)
    kernel: int = 5
    strided: bool = True
    layers: int = 3
    units: int = 256
    symlog: bool = True
    fourier: tuple = ()
    minres: int = 4
    patch: int = 1
    conv: str = "phase"
    norm: str = "rms"
    act: str = "silu"
    dtype: Any = f32

    @nn.compact
    def __call__(self, obs):
        outs = []
        if self.vector_keys:
            x = jnp.concatenate([obs[k].reshape(obs[k].shape[0], -1).astype(f32)
                                 for k in self.vector_keys], -1)
            feats = [symlog(x) if self.symlog else x]
            if self.fourier:
                feats.append(fourier_features(x, self.fourier))
            x = jnp.concatenate(feats, -1)
            outs.append(MLP(self.layers, self.units, self.norm, self.act, self.dtype)(x))
        if self.image_keys:
            x = jnp.concatenate([obs[k] for k in self.image_keys], -1)
            x = x.astype(self.dtype) / 255.0 - 0.5
            act = activation(self.act)
            stages = cnn_stages(x.shape[1:3], self.minres)
            depths = cnn_depths(self.depth, self.mults, stages)
            first = patch_stages(self.patch, stages)
            if first:
                x = nn.Dense(depths[first - 1], dtype=self.dtype, param_dtype=f32,
                             kernel_init=weight_init(), name="patch")(space_to_depth(x, self.patch))
                x = act(Norm(self.norm, name="patchnorm")(x))
            for i in range(first, stages):
                x = Conv(depths[i], self.kernel, 2 if self.strided else 1, self.conv, self.dtype,
                         name=f"conv{i}")(x)
                if not self.strided:
                    x = max_pool2(x)
                x = act(Norm(self.norm, name=f"conv{i}norm")(x))
            outs.append(x.reshape(x.shape[0], -1))
        return jnp.concatenate(outs, -1)


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """(output size, padding before) of XLA's SAME padding along one axis."""
    out = -(-size // stride)
    return out, max((out - 1) * stride + kernel - size, 0) // 2


def _conv(x, w, stride: int):
    return jax.lax.conv_general_dilated(x, w, (stride, stride), "SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))


def phase_input_grad(dy, w, shape, stride: int):
    """The input gradient of the SAME conv `_conv(x, w, stride)` for x of `shape`, as a stride-1 conv.

    Input position s * q + r (phase r) receives dy[q - b] * w[s * b + r] summed over b, so each phase
    is a stride-1 conv of dy with every s-th tap of the flipped kernel: one conv whose outputs are
    the s * s phases, then depth-to-space. XLA's CPU backend runs that as a plain fast conv; its own
    input gradient of a strided conv (an input-dilated conv) takes several times as long.
    """
    k, _, c, o = w.shape
    n, h, width, _ = shape
    (ho, top), (wo, left) = same_padding(h, k, stride), same_padding(width, k, stride)
    b = -(-k // stride)  # taps per phase
    qh, qw = -(-(h + top) // stride), -(-(width + left) // stride)
    w = jnp.pad(w, ((0, stride * b - k), (0, stride * b - k), (0, 0), (0, 0)))
    w = w.reshape(b, stride, b, stride, c, o)[::-1, :, ::-1]
    w = w.transpose(0, 2, 5, 1, 3, 4).reshape(b, b, o, stride * stride * c)
    dx = jax.lax.conv_general_dilated(dy, w.astype(dy.dtype), (1, 1),
                                      ((b - 1, qh - ho), (b - 1, qw - wo)),
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))
    dx = depth_to_space(dx, stride)
    return dx[:, top:top + h, left:left + width]


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def phase_conv(x, w, stride: int):
    """XLA's SAME conv of NHWC x with an HWIO kernel, its input gradient from `phase_input_grad`."""
    return _conv(x, w, stride)


def _phase_conv_fwd(x, w, stride):
    return _conv(x, w, stride), (x, w)


def _phase_conv_bwd(stride, residuals, dy):
    x, w = residuals
    _, weight_vjp = jax.vjp(lambda w: _conv(x, w, stride), w)
    return phase_input_grad(dy, w, x.shape, stride), weight_vjp(dy)[0]


phase_conv.defvjp(_phase_conv_fwd, _phase_conv_bwd)
CONVS = {"xla": _conv, "phase": phase_conv}  # agent.enc.conv


class Conv(nn.Module):
    """k x k SAME conv with bias (the parameters of nn.Conv); `impl` picks the function from CONVS."""

    features: int
    kernel: int
    stride: int = 1
    impl: str = "phase"
    dtype: Any = f32

    @nn.compact
    def __call__(self, x):
        k = self.kernel
        w = self.param("kernel", weight_init(), (k, k, x.shape[-1], self.features), f32)
        b = self.param("bias", nn.initializers.zeros_init(), (self.features,), f32)
        y = CONVS[self.impl](x.astype(self.dtype), w.astype(self.dtype), self.stride)
        return y + b.astype(self.dtype)


def max_pool2(x):
    """2x2 max-pool with stride 2 on even [N, H, W, C] (cnn_stages halves only even sizes).

    A reshape and a max rather than flax's reduce_window: its gradient is an elementwise mask, which
    XLA's CPU runs ~3x faster than reduce_window's select-and-scatter (a tie shares its gradient)."""
    n, h, w, c = x.shape
    return x.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


def space_to_depth(x, factor: int = 2):
    """[N, H, W, C] -> [N, H / f, W / f, C * f * f]."""
    n, h, w, c = x.shape
    x = x.reshape(n, h // factor, factor, w // factor, factor, c).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(n, h // factor, w // factor, factor * factor * c)


def depth_to_space(x, factor: int = 2):
    """[N, H, W, C * f * f] -> [N, H * f, W * f, C]."""
    n, h, w, c = x.shape
    c //= factor * factor
    x = x.reshape(n, h, w, factor, factor, c).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(n, h * factor, w * factor, c)


def transposed_taps(kernel: int) -> np.ndarray:
    """Which tap of a `kernel`-wide stride-2 transposed conv each output phase takes at each
    low-resolution offset: [2R + 1, 2] indices into the kernel, `kernel` where none.

    The transposed conv (the reference's: the input on the odd positions of a zero 2x grid, then a
    SAME conv) gives output 2m + p from inputs m + o; its taps split by phase p into small convs.
    """
    lo = (kernel - 1) // 2  # XLA's SAME padding before the first element
    taps = {}
    for phase in (0, 1):
        for t in range(kernel):
            if (phase + t - lo) % 2:  # lands on an odd (occupied) position of the 2x grid
                taps[(phase, (phase + t - lo - 1) // 2)] = t
    radius = max(abs(o) for _, o in taps)
    index = np.full((2 * radius + 1, 2), kernel)
    for (phase, offset), t in taps.items():
        index[offset + radius, phase] = t
    return index


class Upsample(nn.Module):
    """2x spatial up-sampling conv: the reference's transposed conv (strided) or repeat-then-conv.

    Strided, it is computed at low resolution as one conv with 4x the outputs, each output phase's
    kernel gathered from the k x k parameter (`transposed_taps`), then depth-to-space: the
    reference's function and parameters with a 3x3 conv (k = 5), 9/25 of the FLOPs of its k x k conv
    over the zero-filled 2x grid, and a plain conv, which XLA's CPU backend runs far faster than
    conv_transpose.
    """

    features: int
    kernel: int
    strided: bool
    dtype: Any = f32

    @nn.compact
    def __call__(self, x):
        k, cin = self.kernel, x.shape[-1]
        if self.strided:
            w = self.param("kernel", weight_init(), (k, k, cin, self.features), f32)
            b = self.param("bias", nn.initializers.zeros_init(), (self.features,), f32)
            index = transposed_taps(k)
            w = jnp.pad(w, ((0, 1), (0, 1), (0, 0), (0, 0)))  # tap k: zero
            w = w[index[:, None, :, None], index[None, :, None, :]]  # [m, m, 2, 2, cin, out]
            w = w.transpose(0, 1, 4, 2, 3, 5).reshape(*w.shape[:2], cin, 4 * self.features)
            y = jax.lax.conv_general_dilated(
                x.astype(self.dtype), w.astype(self.dtype), (1, 1), "SAME",
                dimension_numbers=("NHWC", "HWIO", "NHWC"))
            return depth_to_space(y + jnp.tile(b, 4).astype(self.dtype), 2)
        x = jnp.repeat(jnp.repeat(x, 2, 1), 2, 2)
        return nn.Conv(self.features, (k, k), padding="SAME", dtype=self.dtype, param_dtype=f32,
                       kernel_init=weight_init())(x)


class SplitSpace(nn.Module):
    """The reference's split input projection of the image decoder (its `bspace`), before the norm.

    Block k of deter (the first `deter` features) maps to the k-th group of channels at every
    low-res position; the rest (stoch) goes through a `hidden`-unit layer to the whole grid; the two
    are summed. Returns [N, H, W, C] for `shape` (H, W, C).
    """

    shape: tuple
    deter: int
    blocks: int
    hidden: int
    norm: str = "rms"
    act: str = "silu"
    dtype: Any = f32

    @nn.compact
    def __call__(self, feat):
        g, (h, w, c) = self.blocks, self.shape
        deter, stoch = feat[..., :self.deter], feat[..., self.deter:]
        x = 0.0
        if self.deter:
            y = BlockLinear(h * w * c, g, self.dtype, name="sp0")(deter, group_major=True)
            x = y.reshape(g, -1, h, w, c // g).transpose(1, 2, 3, 0, 4).reshape(-1, h, w, c)
        if stoch.shape[-1]:
            y = Dense(self.hidden, self.norm, self.act, self.dtype, name="sp1")(stoch)
            y = nn.Dense(h * w * c, dtype=self.dtype, param_dtype=f32, kernel_init=weight_init(),
                         name="sp2")(y)
            x = x + y.reshape(-1, h, w, c)
        return x


class Decoder(nn.Module):
    """Reconstructs observations from features: CNN for image keys (sigmoid output), MLP for vectors.

    Returns {key: prediction}; images in [0, 1] space, vectors in symlog space.
    """

    image_shapes: tuple = ()  # ((key, (H, W, C)), ...)
    vector_shapes: tuple = ()  # ((key, shape), ...)
    deter: int = 0  # the leading features of `feat` that are the deterministic state (for bspace)
    bspace: int = 8  # images: the input projection as SplitSpace with this many blocks; 0 = one dense
    depth: int = 16
    mults: tuple = (2, 3, 4, 4)
    kernel: int = 5
    strided: bool = True
    layers: int = 3
    units: int = 256
    sigmoid: bool = True
    minres: int = 4
    patch: int = 1
    norm: str = "rms"
    act: str = "silu"
    dtype: Any = f32

    @nn.compact
    def __call__(self, feat):
        out = {}
        if self.vector_shapes:
            x = MLP(self.layers, self.units, self.norm, self.act, self.dtype)(feat)
            for key, shape in self.vector_shapes:
                y = nn.Dense(max(1, math.prod(shape)), dtype=self.dtype, param_dtype=f32,
                             kernel_init=weight_init(), name=f"out_{key}")(x)
                out[key] = y.astype(f32).reshape(*feat.shape[:-1], *shape)
        if self.image_shapes:
            (h, w, _), channels = self.image_shapes[0][1], [s[-1] for _, s in self.image_shapes]
            stages = cnn_stages((h, w), self.minres)
            depths = cnn_depths(self.depth, self.mults, stages)
            lh, lw = h >> stages, w >> stages
            act = activation(self.act)
            if self.bspace:
                x = SplitSpace((lh, lw, depths[-1]), self.deter, self.bspace, 2 * self.units,
                               self.norm, self.act, self.dtype, name="space")(feat)
            else:
                x = nn.Dense(lh * lw * depths[-1], dtype=self.dtype, param_dtype=f32,
                             kernel_init=weight_init(), name="space")(feat.astype(self.dtype))
            x = x.reshape(-1, lh, lw, depths[-1])
            x = act(Norm(self.norm, name="spacenorm")(x))
            last = max(patch_stages(self.patch, stages, "agent.dec.patch"), 1)
            for i in reversed(range(last - 1, stages - 1)):
                x = Upsample(depths[i], self.kernel, self.strided, self.dtype, name=f"up{i}")(x)
                x = act(Norm(self.norm, name=f"up{i}norm")(x))
            if self.patch > 1:  # each position at 1/patch resolution predicts its patch's pixels
                taps = transposed_taps(self.kernel).shape[0]  # the up-sampling convs' footprint
                x = nn.Conv(self.patch ** 2 * sum(channels), (taps, taps), padding="SAME",
                            dtype=self.dtype, param_dtype=f32, kernel_init=weight_init(),
                            name="patch")(x)
                x = depth_to_space(x, self.patch)
            elif stages:
                x = Upsample(sum(channels), self.kernel, self.strided, self.dtype, name="upout")(x)
            else:
                x = nn.Dense(sum(channels), dtype=self.dtype, param_dtype=f32, name="upout")(x)
            x = x.astype(f32)
            x = jax.nn.sigmoid(x) if self.sigmoid else x + 0.5
            x = x.reshape(*feat.shape[:-1], h, w, sum(channels))
            splits = list(itertools.accumulate(channels))[:-1]
            for (key, _), part in zip(self.image_shapes, jnp.split(x, splits, -1)):
                out[key] = part
        return out
