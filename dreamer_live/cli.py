"""Shared command-line plumbing: common flags, one-line errors, the logdir's config, JAX set-up."""

from __future__ import annotations

import argparse
import functools
import gc
import logging
import os
import pathlib
import signal
import sys
import threading
from collections.abc import Callable

from dreamer_live import config as configlib
from dreamer_live.atomic import write_atomic
from dreamer_live.errors import RunFailure, UserError


def usage_name(module: str) -> str:
    """How this command was started, for its usage line: its console script (dreamer-live-actor) or
    `python -m <module>`."""
    script = pathlib.Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return script if script.startswith("dreamer-live-") else f"python -m {module}"


def parser(module: str, description: str, logdir_required: bool = True) -> argparse.ArgumentParser:
    """An argument parser for the command `module` with --logdir, --configs and --force; dotted
    overrides pass through."""
    p = argparse.ArgumentParser(
        prog=usage_name(module), description=description,
        epilog=f"Presets: {', '.join(configlib.presets())}. Any config key can be overridden as "
               "--section.key value, e.g. --agent.opt.lr 1e-4 --run.train_ratio 32. Presets and "
               f"keys: presets.yaml, defaults.yaml in {configlib.CONFIG_DIR}.")
    p.add_argument("--logdir", required=logdir_required, type=pathlib.Path,
                   help="run directory (config.yaml, replay/, params/, checkpoint/, metrics.jsonl)")
    p.add_argument("--configs", nargs="*", default=[], metavar="PRESET",
                   help="presets merged in order: names (listed below) or paths of your own "
                        "YAML files, each one preset's body, relative to the current folder")
    p.add_argument("--force", action="store_true",
                   help="use this config even if it conflicts with the logdir's config.yaml (a command that "
                        "writes config.yaml overwrites it)")
    return p


def parse(p: argparse.ArgumentParser, argv: list[str] | None = None, write: bool = True):
    """Parse flags and overrides; return (args, config) with the logdir's config checked and written."""
    args, rest = p.parse_known_args(argv)
    overrides = configlib.parse_overrides(rest)
    if getattr(args, "logdir", None) is None:
        return args, configlib.resolve(args.configs, overrides)
    config = logdir_config(args.logdir, args.configs, overrides, args.force, write)
    return args, config


def logdir_config(logdir: pathlib.Path, names, overrides, force: bool = False,
                  write: bool = True) -> configlib.Config:
    """Resolve the config for `logdir`: reuse its config.yaml, refuse a conflicting one unless forced."""
    logdir = pathlib.Path(logdir)
    if logdir.exists() and not logdir.is_dir():
        raise UserError(f"--logdir {logdir} is a file, not a folder")
    path = logdir / "config.yaml"
    old = None
    if path.exists():
        old = configlib.saved(path)
    if names or old is None:
        new = configlib.resolve(names, overrides)
    else:  # no presets given: continue the run as it was configured
        new = configlib.resolve((), overrides, base=old)
    if old is not None and not force:
        diff = configlib.identity_diff(old, new)
        if diff:
            key = diff[0]
            more = f" and {len(diff) - 1} more" if len(diff) > 1 else ""
            raise UserError(
                f"{logdir} was configured with {key}={old.flat().get(key)!r}, this run asks "
                f"{new.flat().get(key)!r}{more}; use the same --configs, a new --logdir, or --force")
    if write:
        try:
            logdir.mkdir(parents=True, exist_ok=True)
            if old is None or force:
                write_atomic(path, new.yaml().encode())
            else:  # a read-only logdir fails here, not deep inside a run
                probe = logdir / f".write-check-{os.getpid()}"
                write_atomic(probe, b"")
                probe.unlink()
        except OSError as e:
            raise UserError(f"cannot write to --logdir {logdir}: {e.strerror or e}") from None
    return new


def command_name(module: str) -> str:
    """The command a main belongs to: dreamer_live.tools.viz -> viz, dreamer_live.actor.__main__ ->
    actor, also when run as __main__ (python -m, or a script)."""
    if module == "__main__":
        path = pathlib.Path(sys.argv[0])
        return path.parent.name if path.stem == "__main__" else path.stem
    return module.removesuffix(".__main__").split(".")[-1]


def main(fn: Callable[[list[str] | None], int | None]) -> Callable[[list[str] | None], int]:
    """Wrap a command's main: UserError becomes one line on stderr and exit status 2, RunFailure one
    line and exit status 1; Ctrl-C or SIGTERM one line (`stopped (SIGTERM)`) and 128 + the signal's
    number, after the command's `finally` blocks ran (a live game the env launched is stopped)."""

    @functools.wraps(fn)
    def wrapper(argv: list[str] | None = None) -> int:
        prog = command_name(fn.__module__)
        show_progress()
        interrupt_on_sigterm()
        try:
            return fn(argv) or 0
        except (UserError, RunFailure) as e:
            print(f"{prog}: error: {e}", file=sys.stderr)
            return 2 if isinstance(e, UserError) else 1
        except KeyboardInterrupt as e:
            name = stop_signal(e)
            print(f"\n{prog}: stopped ({name})", file=sys.stderr, flush=True)
            return stop_status(name)

    return wrapper


def interrupt_on_sigterm() -> None:
    """Make SIGTERM stop this command as Ctrl-C does (KeyboardInterrupt("SIGTERM")), where it would
    otherwise kill it before its `finally` blocks; the actor and learner install their own handlers."""
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL):
        signal.signal(signal.SIGTERM, _raise_interrupt)


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def stop_signal(interrupt: KeyboardInterrupt) -> str:
    """The signal a KeyboardInterrupt stands for: SIGTERM (interrupt_on_sigterm), else SIGINT (Ctrl-C)."""
    return "SIGTERM" if interrupt.args and interrupt.args[0] == "SIGTERM" else "SIGINT"


def stop_status(name: str) -> int:
    """The exit status of a command stopped by the signal `name`: 128 + its number, as a shell's."""
    return 128 + signal.Signals[name].value


def show_progress() -> None:
    """Print the package's log lines from INFO up (progress, e.g. a long replay load) on stderr as
    plain lines; without a handler Python prints WARNING and up only."""
    logger = logging.getLogger("dreamer_live")
    if logger.handlers or logging.getLogger().handlers:
        return  # already routed (a second command in one process, pytest, Ray's workers)
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def cache_dir() -> pathlib.Path:
    """The user's cache folder for dreamer_live (JAX compilation cache lives under it)."""
    if os.environ.get("DREAMER_LIVE_CACHE"):
        return pathlib.Path(os.environ["DREAMER_LIVE_CACHE"])
    if sys.platform == "win32":
        base = pathlib.Path(os.environ.get("LOCALAPPDATA", pathlib.Path.home() / "AppData/Local"))
    else:
        base = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache"))
    return base / "dreamer_live"


# XLA's CPU backend (jaxlib 0.10) hands convolutions to YNNPACK by default; XLA's own conv path
# computes the weight gradients of the image models' few-channel convs several times faster
# (docs/performance.md, "Encoder convs and XLA's CPU flags"), so YNNPACK keeps only the matrix
# products. GPU runs ignore it.
XLA_CPU_FLAGS = ("--xla_cpu_experimental_ynn_fusion_type=LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT",)


# For programs that run a few steps (the tests, the benches' --smoke runs): most of a cold CPU compile
# is LLVM optimising code, and at -O0 with XLA's older CPU fusion emitter the debug preset's train step
# compiles in ~4.5 s, not ~11 s (and runs in ~12 ms, not ~5 ms). XLA_FLAGS is part of the compilation
# cache's key, so these programs never mix with a run's. Also off for them: the CPU's tree reduction
# rewrite (each large reduction split in windows of 32, for its rounding: a few hundred more kernels
# to compile in a train step), LLVM module splitting (one module, not 32): test_agent's train step
# on 64x64 images, XLA's compile 7.3 -> 4.7 s; and XLA's HLO verifier, its check of its own passes'
# output after each pipeline (~11% of a compile;
# docs/experiments/2026-11-30-test-suite-time-slow-cpu.md).
QUICK_COMPILE_XLA_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false",
                           "--xla_disable_hlo_passes=tree_reduction_rewriter,hlo-verifier",
                           "--xla_cpu_parallel_codegen_split_count=1")


def add_xla_flags(flags: tuple[str, ...]) -> None:
    """Add `flags` to XLA_FLAGS, for this process and those it starts (before JAX starts a backend),
    each unless already named."""
    current = os.environ.get("XLA_FLAGS", "")
    extra = [f for f in flags if f.split("=")[0] not in current]
    os.environ["XLA_FLAGS"] = " ".join([current, *extra]).strip()


def quick_compile() -> None:
    """Add QUICK_COMPILE_XLA_FLAGS to XLA_FLAGS: compiles fast, runs slower; the commands never call it."""
    add_xla_flags(QUICK_COMPILE_XLA_FLAGS)


def set_xla_flags() -> None:
    """Add XLA_CPU_FLAGS to XLA_FLAGS (before JAX starts a backend), each unless already named."""
    add_xla_flags(XLA_CPU_FLAGS)


def setup_jax(config: configlib.Config) -> None:
    """Pick the platform, set XLA's CPU flags and turn on the persistent compilation cache (second
    start: no recompile)."""
    if config.jax.platform:
        os.environ.setdefault("JAX_PLATFORMS", config.jax.platform)
    set_xla_flags()
    import jax

    # Tracing a program allocates many short-lived objects, and each of Python's full collections
    # also scanned the ~100k objects the imports left: frozen, they are skipped, and collections
    # come less often (an actor's start -15% of CPU, a learner's -9%:
    # docs/experiments/2026-11-30-test-suite-time-slow-cpu.md).
    gc.freeze()
    gc.set_threshold(50_000)

    try:
        jax.devices()
    except RuntimeError as e:
        raise UserError(f"JAX cannot use platform {os.environ.get('JAX_PLATFORMS')!r} here "
                        f"(jax.platform): {str(e).splitlines()[0][:200]}") from None

    if config.jax.compile_cache:
        path = cache_dir() / "jax"
        path.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", str(path))
        jax.config.update("jax_persistent_cache_min_compile_time_secs",
                          float(config.jax.cache_min_compile_s))
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
