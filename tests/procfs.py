"""Processes stopped for a while (SIGSTOP), and the /proc readings (dreamer_live.process) the tests and
the benches share."""

from __future__ import annotations

import contextlib
import os
import signal

from dreamer_live.process import alive, descendants, stat_fields  # noqa: F401


@contextlib.contextmanager
def stopped(*pids: int):
    """The processes `pids` stopped (SIGSTOP) within, continued after."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
