"""Learner throughput: gradient updates/s, replayed steps/s, FLOPs and GFLOP/s of one DreamerV3 update.

Compares against a large float32 matmul on this machine (the achievable GFLOP/s); against the
official DreamerV3 on the same machine: bench/peers.py.

    python bench/learner_throughput.py --presets size1m size12m --batch 16 --length 64 --image 64

Implementations side by side in one run, with each one's time as a ratio to the first:

    python bench/learner_throughput.py --presets size1m --variants agent.enc.conv=xla agent.enc.conv=phase

Where an update's time goes (`--parts`): pieces of it jitted and timed alone (the world-model loss,
encoder, decoder, imagination), then each conv layer's forward and backward with its GFLOP/s:

    python bench/learner_throughput.py --presets size1m --parts --no-flops

The path before against the default, in one process (`--compare-before`): for the pixel presets
catcher_pixels (16x16 grey), supertux (32x32 grey) and size1m (64x64x3), each with its own batch
shape, the update with BEFORE's overrides (the layout the defaults had before the patch stems) and with
none, and a last line `speedup: N.NNx`, the smallest of the three:

    python bench/learner_throughput.py --compare-before

Parameters per part for each preset and layout, beside the reference's layout (`agent.enc.patch 1`,
`agent.dec.patch 1`), from the shapes alone (`--counts`, nothing compiled):

    python bench/learner_throughput.py --counts --presets size1m size12m --variants "" \
        agent.enc.patch=4,agent.dec.patch=4

The learner over several devices (`--devices`, learner.devices), each count side by side with its
ratio to the first; on a CPU the devices are forced host devices sharing its cores, so this shows the
cost of splitting the batch, not a speed-up (a machine with several GPUs shows the scaling):

    python bench/learner_throughput.py --presets size1m --devices 1,2,4 --no-flops

`--smoke` runs every mode above in seconds on the `debug` agent and tiny batches (no figures to keep).

Random batches, no files: everything is printed to stdout.
"""

from __future__ import annotations

import argparse
import os
import time

from dreamer_live import cli

# --compare-before: the presets, and the overrides that give the layout the defaults had before.
COMPARE_PRESETS = ("catcher_pixels", "supertux", "size1m")
BEFORE = {"agent.enc.patch": 1, "agent.dec.patch": 1}


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--presets", nargs="+", default=["size1m"], help="size presets to measure")
    p.add_argument("--batch", type=int, default=16, help="sequences per batch")
    p.add_argument("--length", type=int, default=64, help="steps per sequence")
    p.add_argument("--image", type=int, default=64, help="image side in pixels (0 = no image)")
    p.add_argument("--channels", type=int, default=3, help="image channels (1 = grey)")
    p.add_argument("--vector", type=int, default=0, help="vector observation size (0 = none)")
    p.add_argument("--actions", type=int, default=6, help="discrete actions")
    p.add_argument("--updates", type=int, default=5,
                   help="timed updates of each config (after a warm-up), one of each in turn")
    p.add_argument("--dtype", default="", help="override agent.compute_dtype (float32 | bfloat16)")
    p.add_argument("--no-flops", action="store_true",
                   help="skip the FLOP count (it compiles a second, loop-unrolled program)")
    p.add_argument("--flops-only", action="store_true",
                   help="count FLOPs per update without timing (e.g. here, for a GPU run's --no-flops)")
    p.add_argument("--configs", nargs="*", default=[], help="extra presets merged after the size")
    p.add_argument("--xla-default", action="store_true",
                   help="leave XLA's CPU flags at its defaults (not dreamer_live.cli.XLA_CPU_FLAGS)")
    p.add_argument("--parts", action="store_true",
                   help="also time pieces of the update alone and each conv layer (where the time goes)")
    p.add_argument("--variants", nargs="+", default=[""], metavar="KEY=VALUE[,KEY=VALUE]",
                   help="config overrides measured one after another for each preset (\"\" = none)")
    p.add_argument("--compare-before", action="store_true",
                   help=f"the path before ({', '.join(f'{k}={v}' for k, v in BEFORE.items())}) "
                        f"against the default for {', '.join(COMPARE_PRESETS)}, each with its "
                        f"preset's batch and image shape; ends with the smallest speedup")
    p.add_argument("--counts", action="store_true",
                   help="only print each config's parameters per part beside the reference layout's")
    p.add_argument("--devices", default="", metavar="N[,N...]",
                   help="time each preset on these device counts (learner.devices), side by side; "
                        "on a CPU that many host devices are forced")
    p.add_argument("--smoke", action="store_true",
                   help="every mode in seconds: the debug agent, tiny batches, one update")
    p.epilog = "Other config keys as --section.key value, e.g. --agent.enc.patch 4."
    args, rest = p.parse_known_args(argv)
    if args.smoke:
        args.presets, args.batch, args.length, args.image, args.channels = ["debug"], 2, 8, 16, 1
        args.updates, args.no_flops, args.parts, args.counts = 1, True, True, True
        args.devices = "1,2"
        rest += ["--env.size", "[16, 16]", "--env.grayscale", "true"]  # --compare-before's images
    from dreamer_live import config

    args.overrides = config.parse_overrides(rest)
    try:
        args.device_counts = [int(n) for n in args.devices.split(",") if n]
    except ValueError:
        p.error(f"--devices: expected counts like 1,2,4, got {args.devices!r}")
    if any(n < 1 for n in args.device_counts):
        p.error(f"--devices: counts must be 1 or more, got {args.devices!r}")
    args.variant_overrides = []
    for spec in args.variants:
        pairs = [pair for pair in spec.split(",") if pair]
        if any(not pair.partition("=")[0] or "=" not in pair for pair in pairs):
            p.error(f"--variants: expected KEY=VALUE[,KEY=VALUE], got {spec!r}")
        args.variant_overrides.append(config.parse_overrides([f"--{pair}" for pair in pairs]))
    return args


def count_flops(lowered_on_cpu) -> float:
    """FLOPs from XLA's cost analysis of a program compiled for the CPU.

    Always the CPU backend: on a GPU the convolutions run as cuDNN custom calls that the analysis does
    not count (size12m: 214 GFLOP/update counted there against 697 on the CPU)."""
    cost = lowered_on_cpu.compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return float(cost.get("flops", 0.0)) if cost else 0.0


def matmul_gflops(dtype: str = "float32", reps: int = 10) -> float:
    """GFLOP/s of a square matrix product (what this machine's BLAS-like path reaches): 2048 on a
    CPU, 8192 on an accelerator (a smaller one does not fill it)."""
    import jax

    n = 2048 if jax.default_backend() == "cpu" else 8192
    a = jax.random.normal(jax.random.PRNGKey(0), (n * n,)).reshape(n, n).astype(dtype)
    f = jax.jit(lambda x: x @ a)
    x = f(f(a)).block_until_ready()
    start = time.perf_counter()
    for _ in range(reps):
        x = f(x)
    x.block_until_ready()
    return 2 * n**3 * reps / (time.perf_counter() - start) / 1e9


def make_batch(agent, batch, length, seed=0):
    """A random replay batch shaped like the learner's."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = {}
    for key, space in agent.obs_space.items():
        if key in agent.obs_keys:
            if np.dtype(space.dtype) == np.uint8:
                out[key] = rng.integers(0, 256, (batch, length, *space.shape), dtype=np.uint8)
            else:
                out[key] = rng.normal(size=(batch, length, *space.shape)).astype(np.float32)
    index = rng.integers(0, agent.act_dim, (batch, length))
    out["action"] = np.eye(agent.act_dim, dtype=np.float32)[index]
    out["reward"] = rng.normal(size=(batch, length)).astype(np.float32)
    out["is_first"] = np.zeros((batch, length), bool)
    out["is_first"][:, 0] = True
    out["is_last"] = np.zeros((batch, length), bool)
    out["is_terminal"] = np.zeros((batch, length), bool)
    return out


def timed_ms(fn, *args, reps: int = 3) -> float:
    """Best of `reps` calls of jitted `fn`, in ms, after a warm-up call."""
    import jax

    fn = jax.jit(fn)
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def time_parts(agent, state, batch, key, step_ms: float) -> None:
    """Print pieces of one update timed alone: the world-model loss (forward + backward), the
    encoder and decoder (each forward + backward of a squared-output loss) and imagination
    (forward: its states are constants to the losses) and the actor-critic's loss with it; the rest
    of the step is the replay value loss, the optimizer and whatever ran concurrently."""
    import jax

    from dreamer_live.agent import agent as agentlib, rssm as rssmlib

    wm, params = agent.wm, state["params"]
    b, t = batch["is_first"].shape
    obs = {k: batch[k] for k in wm.image_keys + wm.vector_keys}
    wm_loss = lambda p: sum(v.mean() for v in wm.loss(p, batch, key)[0].values())  # noqa: E731
    enc_loss = lambda p: (wm.encode(p, obs) ** 2).mean()  # noqa: E731
    dec_loss = lambda p, f: sum((v ** 2).mean() for v in wm.decode(p, f).values())  # noqa: E731
    states = jax.jit(lambda p: wm.loss(p, batch, key)[1])(params)  # the posterior, [B, T, ...]
    feat = rssmlib.features(states)
    start = jax.tree.map(lambda x: x.reshape(b * t, *x.shape[2:]), states)
    policy = agent.ac.policy_fn(params["actor"])
    imagine = lambda p, s: rssmlib.imagine(wm.rssm, p["rssm"], s, policy,  # noqa: E731
                                           agent.cfg.imag_length, key)
    wm_params = {k: params[k] for k in agentlib.WM_PARTS if k in params}
    ac_loss = lambda p: sum(v.mean() for v in agent.ac.imag_loss(  # noqa: E731
        p, state["slow_critic"], wm, wm_params, states, state["retnorm"], key)[0].values())
    parts = {"world-model loss, forward + backward": timed_ms(jax.grad(wm_loss), params),
             "  encoder, forward + backward": timed_ms(jax.grad(enc_loss), params),
             "  decoder, forward + backward (its input too)": timed_ms(
                 jax.grad(dec_loss, argnums=(0, 1)), params, feat),
             f"imagination, {b * t} starts x {agent.cfg.imag_length} steps, forward": timed_ms(
                 imagine, params, start),
             "actor-critic loss (imagination, heads, returns), forward + backward": timed_ms(
                 jax.grad(ac_loss), params)}
    for name, ms in parts.items():
        print(f"  {ms:8.1f} ms  {name}", flush=True)
    print(f"  {step_ms:8.1f} ms  the whole update (above)", flush=True)


def image_layers(cfg, shape) -> list:
    """The encoder's and decoder's image layers as (name, module, input shape, multiply-adds per
    image), in the layout `cfg` gives (patch stems, strided or not)."""
    import flax.linen as nn

    from dreamer_live.agent import nets

    e, d, (h, w, c) = cfg.enc, cfg.dec, shape
    stages = nets.cnn_stages((h, w), e.minres)
    depths = nets.cnn_depths(e.depth, e.mults, stages)
    first = nets.patch_stages(e.patch, stages)
    layers = []
    if first:
        cin, cout = e.patch ** 2 * c, depths[first - 1]
        layers.append(("enc patch", nn.Dense(cout), (h >> first, w >> first, cin),
                       (h >> first) * (w >> first) * cin * cout))
    for i in range(first, stages):
        cin, out = depths[i - 1] if i else c, i + 1 if e.strided else i  # out: the conv's resolution
        layers.append((f"enc conv{i}", nets.Conv(depths[i], e.kernel, 2 if e.strided else 1, e.conv),
                       (h >> i, w >> i, cin), (h >> out) * (w >> out) * e.kernel ** 2 * cin * depths[i]))
    # The decoder's up-sampling, strided: a taps x taps conv at the input's resolution, 4x outputs.
    depths, taps = nets.cnn_depths(d.depth, d.mults, stages), nets.transposed_taps(d.kernel).shape[0]
    last = nets.patch_stages(d.patch, stages, "agent.dec.patch")
    for i in reversed(range(last, stages)):
        cin, cout, lh, lw = depths[i], depths[i - 1] if i else c, h >> (i + 1), w >> (i + 1)
        macs = lh * lw * (taps ** 2 * 4 if d.strided else d.kernel ** 2 * 4) * cin * cout
        layers.append((f"dec up{i - 1}" if i else "dec upout", nets.Upsample(cout, d.kernel, d.strided),
                       (lh, lw, cin), macs))
    if last:
        cin, cout = depths[last - 1], d.patch ** 2 * c
        layers.append(("dec patch", nn.Conv(cout, (taps, taps), padding="SAME"),
                       (h >> last, w >> last, cin), (h >> last) * (w >> last) * taps ** 2 * cin * cout))
    return layers


def time_conv_layers(agent, frames: int) -> None:
    """Print each image layer of the encoder and decoder alone on `frames` images: forward,
    backward (input and kernel gradients; the first layer's input is data, so its kernel's only),
    and GFLOP/s of its multiply-adds."""
    import jax

    shape = agent.obs_space[agent.wm.image_keys[0]].shape
    for n, (name, module, shape, macs) in enumerate(image_layers(agent.cfg, shape)):
        x = jax.random.normal(jax.random.PRNGKey(0), (frames, *shape))
        params = module.init(jax.random.PRNGKey(1), x[:1])
        loss = lambda p, x: (module.apply(p, x) ** 2).mean()  # noqa: E731
        forward = timed_ms(module.apply, params, x)
        backward = timed_ms(jax.grad(loss, argnums=0 if n == 0 else (0, 1)), params, x) - forward
        flops = 2 * frames * macs / 1e9
        print(f"  {name:9s} {'x'.join(map(str, shape)):>9s} -> {module.features:3d}  "
              f"{flops:5.2f} GFLOP  forward {forward:6.1f} ms ({flops / forward * 1e3:5.1f} GFLOP/s)  "
              f"backward {backward:6.1f} ms", flush=True)


def resolve(preset, args, variant=None):
    """The config for one preset: the size preset, extra presets, then overrides (the variant's last)
    and batch shape."""
    from dreamer_live import config

    overrides = {**args.overrides, **(variant or {}), "batch_size": args.batch,
                 "batch_length": args.length}
    if args.dtype:
        overrides["agent.compute_dtype"] = args.dtype
    return config.resolve([preset, *args.configs], overrides)


class Update:
    """One config's agent, random batch and compiled train step; a call times one update."""

    def __init__(self, preset, cfg, args, variant=None, mesh=None):
        import gymnasium
        import jax
        import numpy as np

        from dreamer_live.agent import Agent, devices
        from dreamer_live.envs.base import step_spaces

        self.preset, self.cfg, self.args, self.variant = preset, cfg, args, variant or {}
        self.devices = 0 if mesh is None else mesh.size  # 0: no mesh, the default device
        self.obs_space = dict(step_spaces())
        if args.image:
            self.obs_space["image"] = gymnasium.spaces.Box(
                0, 255, (args.image, args.image, args.channels), np.uint8)
        if args.vector:
            self.obs_space["vector"] = gymnasium.spaces.Box(-np.inf, np.inf, (args.vector,),
                                                            np.float32)
        self.agent = Agent(cfg, self.obs_space, gymnasium.spaces.Discrete(args.actions), mesh=mesh)
        self.state = self.agent.init(jax.random.PRNGKey(0))
        self.batch = self.agent._filter(make_batch(self.agent, args.batch, args.length))
        if mesh is not None:
            self.batch = jax.device_put(self.batch, devices.batch_split(mesh))
        self.key = jax.random.PRNGKey(1)
        self.params = sum(np.size(x) for x in jax.tree.leaves(self.state["params"]))
        self.compile_s, self.times = 0.0, []
        if not args.flops_only:
            start = time.perf_counter()
            self.compiled = self.agent._train.lower(self.state, self.batch, self.key).compile()
            self.compile_s = time.perf_counter() - start
            self()  # warm-up
            self.times = []

    def __call__(self) -> float:
        import jax

        start = time.perf_counter()
        self.state, metrics, _ = self.compiled(self.state, self.batch,  # 3rd: replay latents
                                               jax.random.PRNGKey(len(self.times)))
        jax.block_until_ready(metrics)
        self.times.append(time.perf_counter() - start)
        return self.times[-1]

    def seconds(self) -> float:
        """Median seconds per timed update."""
        return float(sorted(self.times)[len(self.times) // 2])

    def flops(self) -> float:
        """FLOPs of one update, its time scans unrolled (XLA counts a while-loop body once)."""
        import gymnasium
        import jax

        from dreamer_live.agent import Agent

        length = self.args.length
        full = self.cfg.update({"agent.rssm.unroll": max(length, self.cfg.agent.imag_length + 1)})
        unrolled = Agent(full, self.obs_space, gymnasium.spaces.Discrete(self.args.actions))
        cpu = jax.devices("cpu")[0]
        with jax.default_device(cpu):
            lowered = unrolled._train.lower(*jax.device_put((self.state, self.batch, self.key), cpu))
            return count_flops(lowered)

    def report(self, peak: float) -> None:
        """Print the update's figures (and, with --parts, where its time goes)."""
        import jax

        args, cfg = self.args, self.cfg
        flops = 0.0 if args.no_flops else self.flops()
        if args.flops_only:
            print(f"{self.preset:9s} params {self.params / 1e6:6.2f}M  {flops / 1e9:8.1f} GFLOP/update",
                  flush=True)
            return
        seconds = self.seconds()
        gflops = flops / seconds / 1e9
        extra = " ".join(f"{k}={v}" for k, v in {**args.overrides, **self.variant}.items())
        extra += f" devices {self.devices}" if self.devices else ""
        print(f"{self.preset:9s} {cfg.agent.compute_dtype:8s} {args.batch}x{args.length} {extra} "
              f"params {self.params / 1e6:6.2f}M  compile {self.compile_s:6.1f}s  "
              f"{seconds:7.3f} s/update  {1 / seconds:7.3f} updates/s  "
              f"{args.batch * args.length / seconds:8.0f} replayed steps/s  "
              + (f"{flops / 1e9:8.1f} GFLOP/update  {gflops:7.1f} GFLOP/s  "
                 f"({gflops / peak:.1%} of matmul)" if flops else "FLOPs not counted (--no-flops)"),
              flush=True)
        if args.parts:
            time_parts(self.agent, self.state, jax.device_put(self.batch), self.key, seconds * 1e3)
            if args.image:
                time_conv_layers(self.agent, args.batch * args.length)


def side_by_side(updates: list[Update], rounds: int) -> list[float]:
    """Time `rounds` rounds of one update of each in turn (load that comes and goes falls on all of
    them alike); returns each one's median seconds per update."""
    if updates and not updates[0].args.flops_only:
        for _ in range(rounds):
            for update in updates:
                update()
    return [update.seconds() if update.times else 0.0 for update in updates]


def print_counts(args) -> None:
    """Each preset's and variant's parameters per part (from shapes alone), the reference layout's
    (BEFORE) beside them."""
    import gymnasium
    import jax
    import numpy as np

    from dreamer_live.agent import Agent
    from dreamer_live.envs.base import step_spaces

    obs_space = {**step_spaces(), "image": gymnasium.spaces.Box(
        0, 255, (args.image, args.image, args.channels), np.uint8)}

    def counts(cfg) -> dict:
        agent = Agent(cfg, obs_space, gymnasium.spaces.Discrete(args.actions))
        params = jax.eval_shape(agent.init, jax.random.PRNGKey(0))["params"]
        return {k: sum(np.prod(x.shape) for x in jax.tree.leaves(v)) for k, v in params.items()}

    print(f"parameters, {args.image}x{args.image}x{args.channels} images, {args.actions} actions: "
          f"this layout (the reference layout's)", flush=True)
    for preset in args.presets:
        for spec, variant in zip(args.variants, args.variant_overrides):
            cfg = resolve(preset, args, variant)
            got, ref = counts(cfg), counts(cfg.update(BEFORE))
            parts = "  ".join(f"{k} {got[k]:,} ({ref[k]:,})" for k in got)
            print(f"{preset:9s} {spec or 'as configured':34s} {sum(got.values()):>12,} "
                  f"({sum(ref.values()):,})  {parts}", flush=True)


def preset_args(args, cfg):
    """`args` with the batch and image shape of `cfg` (its preset's own)."""
    height, width = cfg.env.size
    assert height == width, cfg.env.size  # the bench draws square images
    return argparse.Namespace(**{**vars(args), "batch": cfg.batch_size, "length": cfg.batch_length,
                                 "image": height, "channels": 1 if cfg.env.grayscale else 3})


def compare_before(args, peak) -> None:
    """Time the update with BEFORE's overrides and with none, side by side, for each preset; print
    the speedups."""
    from dreamer_live import config

    rows = []
    for preset in ["debug"] if args.smoke else COMPARE_PRESETS:
        now = config.resolve([preset, *args.configs], args.overrides)
        shaped = argparse.Namespace(**{**vars(preset_args(args, now)), "parts": False})
        updates = [Update(preset, now.update(BEFORE), shaped, BEFORE), Update(preset, now, shaped)]
        side_by_side(updates, args.updates)
        for update in updates:
            update.report(peak)
        rows.append((preset, *(update.seconds() for update in updates)))
    for preset, before, now in rows:
        print(f"{preset:15s} before {before:7.3f} s/update  now {now:7.3f} s/update  "
              f"{before / now:.2f}x", flush=True)
    print(f"speedup: {min(before / now for _, before, now in rows):.2f}x", flush=True)


def over_devices(args, peak) -> None:
    """Time each preset's update on each of --devices' counts side by side; print the ratios."""
    from dreamer_live.agent import devices

    for preset in args.presets:
        cfg = resolve(preset, args)
        updates = [Update(preset, cfg, args, mesh=devices.learner_mesh(
            cfg.update({"learner.devices": n}))) for n in args.device_counts]
        seconds = side_by_side(updates, args.updates)
        for update in updates:
            update.report(peak)
        for update, s in zip(updates, seconds):
            print(f"{preset:15s} devices {update.devices}  {s:7.3f} s/update  "
                  f"{seconds[0] / s:.2f}x the speed of {updates[0].devices}", flush=True)


@cli.main
def main(argv=None):
    args = parse(argv)
    if args.device_counts:  # only the CPU backend reads it: that many host devices
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_"
                                   f"device_count={max(args.device_counts)}").strip()
    if not args.xla_default:
        cli.set_xla_flags()
    configs = {(preset, i): resolve(preset, args, variant) for preset in args.presets
               for i, variant in enumerate(args.variant_overrides)}  # bad keys fail here
    import jax

    print(f"backend {jax.default_backend()}  devices {jax.devices()}  cpus {os.cpu_count()}  "
          f"load {os.getloadavg()[0]:.1f}  XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}", flush=True)
    if args.counts:
        print_counts(args)
        if not args.smoke:
            return
    dtype = args.dtype or configs[args.presets[0], 0].agent.compute_dtype
    peak = 0.0 if args.flops_only else matmul_gflops(dtype)
    print(f"{dtype} matmul: {peak:.1f} GFLOP/s", flush=True)
    if args.compare_before and not args.smoke:
        return compare_before(args, peak)
    if args.device_counts:
        over_devices(args, peak)
        if not args.smoke:
            return
    for preset in args.presets:
        updates = [Update(preset, configs[preset, i], args, variant)
                   for i, variant in enumerate(args.variant_overrides)]
        seconds = side_by_side(updates, args.updates)
        for i, update in enumerate(updates):
            update.report(peak)
            if seconds[i] and i:
                print(f"  {args.variants[i]}: {seconds[0] / seconds[i]:.2f}x the speed of "
                      f"{args.variants[0] or 'the first'}", flush=True)
    if args.smoke:
        compare_before(args, peak)


if __name__ == "__main__":
    raise SystemExit(main())
