"""Test-session set-up: in-process tests use JAX's persistent compilation cache, as the commands do,
so a step compiled by one test (or by an earlier run) is loaded, not compiled again, by the next."""

import os
import pathlib
import signal
import subprocess
import sys

import numpy as np
import pytest

from dreamer_live import cli
from dreamer_live.config import resolve

REPO = pathlib.Path(__file__).resolve().parent.parent
# For every test module, without an import that shadows them: the live tests' fixtures (xvfb) and how
# pytest-xdist groups the tests on workers.
pytest_plugins = ("live_fixtures", "xdist_groups")

# A tiny agent on 32x32 Catcher frames plus its state vector, learning fast (no warm-up): viz's run
# trains it, and test_agent's discrete case tests it, at batch 4 x 16 steps (the debug preset's), so
# the suite compiles its train step, and its 3 x 16 report, once (a cold train step: ~30-60 s).
IMAGE_AGENT = {
    "env.name": "dreamer_live/Catcher-v0", "env.clock": "lockstep", "env.obs": "both",
    "env.size": [32, 32], "batch_size": 4, "batch_length": 16,
    "agent.rssm.deter": 64, "agent.rssm.hidden": 32, "agent.rssm.stoch": 8,
    "agent.rssm.classes": 4, "agent.rssm.blocks": 4,
    "agent.enc.depth": 4, "agent.enc.mults": [2, 3], "agent.enc.minres": 8, "agent.enc.units": 32,
    "agent.dec.depth": 4, "agent.dec.mults": [2, 3], "agent.dec.minres": 8, "agent.dec.units": 32,
    "agent.dec.bspace": 4,
    "agent.reward_head.units": 32, "agent.reward_head.bins": 31, "agent.cont_head.units": 32,
    "agent.policy.units": 32, "agent.value.units": 32, "agent.value.bins": 31,
    "agent.imag_length": 5, "agent.opt.lr": 3e-3, "agent.opt.warmup": 0,
    # the reference's plain image loss: viz's test asks a small error on every pixel, which motion
    # weighting trades for the moving ones (observed error 0.033 at 100, under 0.01 at 0)
    "agent.dec.motion_weight": 0.0,
}
TRAIN_STEPS = 300  # run_dir's updates: the decoder picks up paddle and fruit after ~200


# cli.QUICK_COMPILE_XLA_FLAGS' options at XLA's defaults, per program: for a test that runs hundreds
# of updates.
RUN_FAST = {"xla_backend_optimization_level": 3, "xla_cpu_use_fusion_emitters": True}


def optimized(agent):
    """`agent` with its train step compiled at XLA's default optimisation (RUN_FAST); its policy stays
    at the suite's flags (a small program: the faster compile outweighs the slower calls)."""
    import jax
    agent._train = jax.jit(agent._train_impl, compiler_options=RUN_FAST)
    return agent


def pytest_configure(config):
    """Compile fast (cli.quick_compile: the processes the tests start too); turn on the compilation
    cache under the user's cache folder; a SIGTERM stops the suite as Ctrl-C does, so the tests'
    `finally` blocks stop what they started (raylets, games, commands) instead of leaving them
    running."""
    cli.quick_compile()
    cli.setup_jax(resolve())
    signal.signal(signal.SIGTERM, signal.default_int_handler)


@pytest.fixture(scope="session")
def actor_run(tmp_path_factory) -> pathlib.Path:
    """A logdir whose replay a real actor wrote: 200 steps of real-time Catcher (debug preset, 50 Hz)
    in 4 chunks. Shared by the modules that copy it (hostile files) or only read it (offline
    training): none may change it."""
    logdir = tmp_path_factory.mktemp("actor_run") / "run"
    result = subprocess.run(
        [sys.executable, "-m", "dreamer_live.actor", "--logdir", str(logdir), "--configs", "debug",
         "--run.quiet", "true", "--actor.hz", "50", "--actor.steps", "200"],
        cwd=REPO, env=dict(os.environ, JAX_PLATFORMS="cpu"), capture_output=True, text=True,
        timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    return logdir


def poll(what: str, predicate, timeout: float = 10.0, interval: float = 0.01):
    """Call `predicate` until it returns something true and return that; fail after `timeout` s."""
    import time

    import pytest

    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def stderr_lines(text: str) -> list[str]:
    """A command's stderr lines without XLA's slow-compile alarm, which XLA itself prints (in a
    banner of asterisks after a glog line) when a compile takes long on a loaded machine."""
    import re

    lines, inside = [], False
    for line in text.strip().splitlines():
        if re.match(r"^\*{8,}$", line.strip()):
            inside = not inside
        elif not inside and not re.match(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ .*\] ?", line):
            lines.append(line)
    return lines


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory):
    """A logdir as a short run of IMAGE_AGENT leaves it (config.yaml, replay/, checkpoint/, params/):
    random Catcher data in a real replay, TRAIN_STEPS real updates, saved with the real checkpoint
    and parameter modules. Shared by viz's and eval's tests (eval adds its metric lines and videos)."""
    from dreamer_live.actor.core import random_action
    from dreamer_live.steps import replay_keys, tick_fields

    logdir = tmp_path_factory.mktemp("viz") / "run"
    config = cli.logdir_config(logdir, ["debug"], IMAGE_AGENT)
    cli.setup_jax(config)
    import jax

    from dreamer_live import spaces
    from dreamer_live.agent import Agent
    from dreamer_live.envs import make_env
    from dreamer_live.learner.checkpoint import Checkpointer
    from dreamer_live.replay import Reader, Writer
    from dreamer_live.transport import sync

    env = make_env(config)
    rng = np.random.default_rng(0)
    spaces.save(logdir / "replay", {k: env.obs_space[k] for k in replay_keys(env.obs_space)},
                env.act_space)  # as the actor does
    with Writer.from_config(config, logdir / "replay") as writer:
        obs = env.reset()
        for _ in range(640):  # the actor's step format, random actions
            action = random_action(env.act_space, rng)
            step = {k: obs[k] for k in replay_keys(env.obs_space)}
            step.update(action=action, **tick_fields(0.0, 0.0))
            writer.add(step)
            obs = env.reset() if obs["is_last"] else env.step(action)
    agent = Agent(config, env.obs_space, env.act_space)
    env.close()
    state = agent.init(jax.random.PRNGKey(0))
    key = jax.random.PRNGKey(1)
    with Reader.from_config(config, logdir / "replay") as reader:
        for _ in range(TRAIN_STEPS):
            batch = reader.sample()
            key, sub = jax.random.split(key)
            state, _ = agent.train(state, batch, sub)
    Checkpointer(logdir / "checkpoint").save(state, {"updates": TRAIN_STEPS, "env_steps": 640})
    sync.Publisher(logdir / "params", sync.model_hash(config)).publish(
        agent.policy_params(state), TRAIN_STEPS)
    return logdir


# Under parallel workers a learner at its default SCHED_IDLE gets no CPU while another worker
# computes; tests whose learner must train within a time limit start it with these.
UNSTARVED_LEARNER = ("--learner.idle", "false")
# A learner with no actor beside it in its test: at the other workers' priority too (at its default
# nice 10 it gets about a tenth of a core that another worker's process shares), so that its test,
# which waits on it, is not the suite's longest wait.
LEARNER_ALONE = (*UNSTARVED_LEARNER, "--learner.nice", "0")
