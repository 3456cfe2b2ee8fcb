"""One command for a whole run: a learner and an actor as child processes on one logdir.

    python -m dreamer_live.run                      # the demo: real-time Catcher from its state vector
    python -m dreamer_live.run --configs debug --logdir /tmp/run
    python -m dreamer_live.run --configs debug --logdir /tmp/run --ray.address local --ray.actors 3
                                                    # on Ray instead (dreamer_live/launch/rayrun.py)

Ctrl-C, SIGTERM or SIGHUP is said in one line and forwarded to both children, which stop cleanly
(checkpoint, flush replay); another while they stop is said in one line and not forwarded, and a child
still running after STOP_GRACE_S is killed. A child that exits on its own is never restarted: the
launcher says which one and with what exit status, stops the other and exits with that status.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time

from dreamer_live import cli, config as configlib
from dreamer_live.envs import tick_hz
from dreamer_live.launch import rayrun
from dreamer_live.launch.status import STOP_GRACE_S, STOP_SIGNALS, Status
from dreamer_live.metrics import NO_STATUS_ENV, MetricsTail
from dreamer_live.process import PARENT_ENV, describe_exit, say
from dreamer_live.transport import silent_after_s

DEMO_PRESET = "catcher"
CHILDREN = ("learner", "actor")


def default_logdir(configs: list[str]) -> pathlib.Path:
    """logdir/<presets>-<date-time> under the current folder."""
    name = "-".join(pathlib.Path(c).stem for c in configs) or "default"
    return pathlib.Path("logdir") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


class Children:
    """Starts, watches and stops the two children."""

    def __init__(self, child_args: list[str], logdir: pathlib.Path, quiet: bool, hz: float,
                 silent_after: float):
        self.child_args, self.logdir, self.quiet, self.hz = child_args, logdir, quiet, hz
        self.silent_after = silent_after  # transport.silent_after_s of the children's config
        self.procs: dict[str, subprocess.Popen] = {}
        self.stopping = False
        self.deadline = float("inf")  # children asked to stop are killed when still running then
        self.signals: list[str] = []  # received, answered by the watch loop (no output in a handler)
        self.said_waiting = False  # a signal while stopping was answered
        self.tty = sys.stdout.isatty()

    def start(self) -> None:
        """Start the learner and the actor, each in its own process group (Ctrl-C comes via us)."""
        env = dict(os.environ, **{PARENT_ENV: str(os.getpid()), NO_STATUS_ENV: "1"})
        extra = {"process_group": 0} if os.name != "nt" else {}
        for name in CHILDREN:
            cmd = [sys.executable, "-m", f"dreamer_live.{name}", *self.child_args]
            self.procs[name] = subprocess.Popen(cmd, env=env, **extra)
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum, frame) -> None:
        self.signals.append(signal.Signals(signum).name)

    def watch(self) -> int:
        """Wait for the children; on a signal or one's exit stop the others; return the run's exit
        status."""
        tail, status = MetricsTail(self.logdir / "metrics.jsonl"), Status(self.hz, self.silent_after)
        last_draw, shown, answered = 0.0, frozenset(), 0
        failure = 0
        while any(p.poll() is None for p in self.procs.values()):
            time.sleep(0.2)
            answered = self._answer(answered)
            status.update(tail.read())
            warnings = status.warnings()
            if not self.quiet and (time.monotonic() - last_draw >= (1.0 if self.tty else 30.0)
                                   or warnings - shown):  # a warning that just began: at once
                last_draw = time.monotonic()
                say(("\r" if self.tty else "") + status.line(), end="" if self.tty else "\n")
            shown = warnings
            for name, proc in self.procs.items():
                code = proc.poll()
                if code is None or self.stopping:
                    continue
                verb = "finished" if code == 0 else f"failed ({describe_exit(code)})"
                say(f"\nrun: {name} {verb}; stopping {' and '.join(self._running()) or 'nothing'}",
                    error=bool(code))
                failure = code if code > 0 else (1 if code < 0 else 0)
                self._stop_all()
            if time.monotonic() >= self.deadline:
                for name in self._running():
                    say(f"run: {name} did not stop within {STOP_GRACE_S:.0f} s; killing it", error=True)
                    self.procs[name].kill()
                    self.procs[name].wait()
        status.update(tail.read())
        for name, proc in self.procs.items():
            if proc.returncode not in (0, None) and not failure:
                say(f"run: {name} exited with {describe_exit(proc.returncode)}", error=True)
                failure = proc.returncode if proc.returncode > 0 else 1
        say(f"\nrun: done; {status.line(final=True)}; logdir {self.logdir}")
        return failure

    def _answer(self, answered: int) -> int:
        """Say and act on the signals received after the first `answered`: one while running asks each
        child to stop (they save first); the next is said once and changes nothing (a second stop
        request would cut a child's saving short). Returns how many are answered."""
        for name in self.signals[answered:]:
            answered += 1
            running = " and ".join(self._running()) or "nothing"
            if not self.stopping:
                say(f"\nrun: {name}; stopping {running} (each saves before it exits)")
                self._stop_all(send=os.name != "nt")  # Windows: the console's Ctrl-C reached them
            elif not self.said_waiting:
                self.said_waiting = True
                left = max(0.0, self.deadline - time.monotonic())
                say(f"\nrun: {name}: already stopping; waiting up to {left:.0f} s for {running} to "
                    "exit (each saves first), then killing what still runs")
        return answered

    def _running(self) -> list[str]:
        return [name for name, proc in self.procs.items() if proc.poll() is None]

    def _stop_all(self, send: bool = True) -> None:
        """Ask every running child to stop (`send`: with a signal of ours); they are killed after
        STOP_GRACE_S."""
        if not self.stopping:
            self.stopping, self.deadline = True, time.monotonic() + STOP_GRACE_S
        for proc in self.procs.values():
            if send and proc.poll() is None:
                proc.send_signal(signal.SIGINT if os.name != "nt" else signal.SIGTERM)


@cli.main
def main(argv: list[str] | None = None) -> int:
    """Command line: python -m dreamer_live.run [--logdir DIR] [--configs PRESET...] [overrides]."""
    p = cli.parser("dreamer_live.run",
                   "Start a learner and an actor on one logdir (no arguments: the Catcher demo).",
                   logdir_required=False)
    argv = list(sys.argv[1:] if argv is None else argv)
    args, rest = p.parse_known_args(argv)
    overrides = configlib.parse_overrides(rest)
    configs = list(args.configs)
    logdir = args.logdir
    if logdir is None:
        logdir = default_logdir(configs or [DEMO_PRESET])
    if not configs and not (logdir / "config.yaml").exists():
        configs = [DEMO_PRESET]
    config = cli.logdir_config(logdir, configs, overrides, args.force)  # checks before any child
    if config.ray.address:
        return rayrun.launch(config, logdir)
    child_args = ["--logdir", str(logdir), *(["--configs", *configs] if configs else []), *rest]
    print(f"run: {config.env.name} in {logdir} (presets: {' '.join(configs) or 'as configured'}); "
          f"replay, params, checkpoint, metrics.jsonl, videos and tensorboard/ go there. "
          f"Ctrl-C stops both.", flush=True)

    launcher = Children(child_args, logdir, config.run.quiet, tick_hz(config), silent_after_s(config))
    launcher.start()
    return launcher.watch()


if __name__ == "__main__":
    raise SystemExit(main())
