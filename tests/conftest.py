"""Test-session set-up: in-process tests use JAX's persistent compilation cache, as the commands do,
so a step compiled by one test (or by an earlier run) is loaded, not compiled again, by the next."""

from dreamer_live import cli
from dreamer_live.config import resolve


def pytest_configure(config):
    """Turn on the compilation cache under the user's dreamer_live cache folder."""
    cli.setup_jax(resolve())
