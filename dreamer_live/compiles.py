"""Counting XLA compilations in this process: the actor's ticks and the learner's train step must
not recompile once warm (a recompile stalls a tick, or a GPU learner for a minute)."""

from __future__ import annotations

import collections


class CompileWatch:
    """Counts XLA compilations in this process (fresh ones vs. persistent-cache hits, and per program)."""

    def __init__(self):
        import jax

        self.compiles = 0
        self.cache_hits = 0
        self.programs: collections.Counter[str] = collections.Counter()  # 'jit(name)': both kinds
        self._hit = False
        jax.monitoring.register_event_listener(self._on_event)
        jax.monitoring.register_event_duration_secs_listener(self._on_duration)

    def _on_event(self, event: str, **kwargs) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            self._hit = True

    def _on_duration(self, event: str, duration: float, **kwargs) -> None:
        if event != "/jax/core/compile/backend_compile_duration":
            return
        self.programs[str(kwargs.get("fun_name"))] += 1
        if self._hit:
            self.cache_hits += 1
        else:
            self.compiles += 1
        self._hit = False

    def count(self, function) -> int:
        """How many times the jitted `function` (the Python function jax.jit wrapped) was compiled or
        loaded from the compilation cache."""
        return self.programs[f"jit({function.__name__})"]
