"""The learner over several devices (CPU devices forced with XLA_FLAGS, in subprocesses): the same
update (with replay context) on four devices as on one, and one-line errors for device counts
that cannot work. The offline learner run of tests/learner/test_offline.py trains on 2 devices and
resumes on 1."""

import subprocess
import sys
import textwrap

import pytest

from tests.learner.test_offline import FORCE_FOUR, REPO, command, cpu_env

# One update from the same state and batch on 1 and 4 devices, with replay context (the stored
# latents split like the batch; the posteriors come back split). LaProp's first step is
# ~lr * sign(g), which turns float noise in a near-zero gradient into a full step, so a large eps
# makes the step ~lr * g and the parameters show the gradients themselves.
SAME_UPDATE = textwrap.dedent("""
    import jax, numpy as np, gymnasium
    from dreamer_live import config
    from dreamer_live.agent import Agent, devices
    cfg = config.resolve(["debug"], {"agent.opt.eps": 1.0, "agent.opt.lr": 1.0, "agent.opt.agc": 0.0,
                                     "agent.replay_context": 2})
    obs = {"image": gymnasium.spaces.Box(0, 255, (16, 16, 1), np.uint8),
           "vec": gymnasium.spaces.Box(-1, 1, (3,), np.float32)}
    rng = np.random.default_rng(0)
    b, t = cfg.batch_size, cfg.batch_length
    batch = {"image": rng.integers(0, 256, (b, t, 16, 16, 1), np.uint8),
             "vec": rng.normal(size=(b, t, 3)).astype(np.float32),
             "action": np.eye(3, dtype=np.float32)[rng.integers(0, 3, (b, t))],
             "reward": rng.normal(size=(b, t)).astype(np.float32),
             "is_first": np.arange(t)[None].repeat(b, 0) == 0,
             "is_last": np.zeros((b, t), bool), "is_terminal": np.zeros((b, t), bool),
             "context/deter": rng.normal(size=(b, cfg.agent.rssm.deter)).astype(np.float32)}
    start = jax.device_get(Agent(cfg, obs, gymnasium.spaces.Discrete(3)).init(jax.random.PRNGKey(0)))
    steps = {}
    for n in (1, 4):
        mesh = devices.learner_mesh(cfg.update({"learner.devices": n}))
        state, metrics, post = Agent(cfg, obs, gymnasium.spaces.Discrete(3), mesh=mesh).train_context(
            start, batch, jax.random.PRNGKey(1))
        assert len(state["params"]["enc"]["params"]["conv0"]["kernel"].sharding.device_set) == n
        assert post["deter"].shape[:2] == (b, t - 2) and len(post["deter"].sharding.device_set) == n
        steps[n] = jax.tree.map(lambda new, old: np.asarray(new, np.float64) - old,
                                jax.device_get(state["params"]), start["params"])
    for n in (4,):
        diff = max(np.abs(a - b).max() for a, b in zip(jax.tree.leaves(steps[1]), jax.tree.leaves(steps[n])))
        size = max(np.abs(a).max() for a in jax.tree.leaves(steps[1]))
        print(f"devices {n}: largest difference {diff:.2e} of a largest step {size:.2e}")
        assert size > 1e-3 and diff < 1e-4 * size
""")


@pytest.mark.slow  # two train steps compiled (~14 s on 2 cores)
def test_one_update_on_four_devices_equals_one_device():
    """The sharded train step gives the single-device step's parameters to float tolerance."""
    result = subprocess.run([sys.executable, "-c", SAME_UPDATE], cwd=REPO, env=cpu_env(FORCE_FOUR),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("devices ") == 1, result.stdout


@pytest.mark.parametrize("devices, words", [
    (3, "batch_size 4 does not divide over learner.devices 3"),
    (8, "learner.devices 8 asks for more devices than JAX sees here: 4 (cpu)"),
])
def test_device_counts_that_cannot_work_get_one_line(actor_run, tmp_path, devices, words):
    """Exit status 2 and one line naming both numbers, before any replay is read."""
    result = command("dreamer_live.learner", "--logdir", tmp_path / "run", "--replay",
                     actor_run / "replay", "--offline", "--learner.devices", devices,
                     xla_flags=FORCE_FOUR)
    assert result.returncode == 2, result.stdout + result.stderr
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
