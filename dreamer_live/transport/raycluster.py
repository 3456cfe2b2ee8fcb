"""Reaching a Ray cluster (the `ray` extra): a private one on this machine or a running one by
address, and a hand-started actor joining a run's cluster (its transport ends through Ray from then
on). Ray is imported inside the functions: without the extra, --ray.address gets one line saying so."""

from __future__ import annotations

import contextlib
import os
import pathlib
import socket
import threading
import time

from dreamer_live import transport
from dreamer_live.errors import UserError

AUTH_ENV = "RAY_AUTH_MODE"  # token: send this machine's Ray token (Ray never does for an address given)
JOIN_TIMEOUT_S = 5.0  # to reach a cluster's head before joining it
HEAD_GONE = "the Ray cluster's head is gone"  # the stop reason a loop gives when HeadWatch says so
# Ray's own processes wait this long for a lost head (its GCS), then exit at once, without saving
RAY_HEAD_WAIT_S = 60.0
# Set before Ray is imported, inherited by every process of the cluster: node addresses are the loopback
# one (Ray's own mode for one-machine clusters on Windows and macOS), and no usage report.
LOCAL_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
             "RAY_DEDUP_LOGS": "0"}  # every actor's lines, not "repeated 2x across cluster"


def require_ray():
    """The ray module, or a UserError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UserError("--ray.address needs Ray, which is not installed: "
                        "pip install -e '.[ray]'") from None
    return ray


def check_address(address: str) -> str:
    """`address` if it is local, auto or HOST:PORT; else a UserError."""
    host, _, port = address.rpartition(":")
    if address in ("local", "auto") or (host and port.isdigit() and 0 < int(port) < 65536):
        return address
    raise UserError(f"ray.address {address!r} is none of local (a private cluster on this machine), "
                    "auto (the running cluster this machine belongs to) or HOST:PORT (a running "
                    "cluster's head)")


def local_cluster(num_cpus: int):
    """Start a private Ray cluster on this machine, on the loopback address only; return ray."""
    return connect("local", num_cpus)[0]


def connect(address: str, num_cpus: int = 0, log_to_driver: bool = True):
    """Start a private cluster (local: loopback only, num_cpus) or join the running one at `address`
    (auto or HOST:PORT); return (ray, the connection's context)."""
    host, _, port = address.rpartition(":")
    loopback = address == "local" or host in ("localhost", "127.0.0.1", "::1")
    # Ray turns a loopback address into this machine's network one unless told it is one machine
    os.environ.update(LOCAL_ENV if loopback else {k: v for k, v in LOCAL_ENV.items()
                                                  if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"})
    ray = require_ray()
    if address == "local":
        return ray, ray.init(num_cpus=num_cpus, include_dashboard=False, namespace="dreamer_live",
                             log_to_driver=log_to_driver)
    if host:  # Ray itself would retry an address where nothing listens for minutes
        try:
            socket.create_connection((host, int(port)), timeout=JOIN_TIMEOUT_S).close()
        except OSError as e:
            raise UserError(f"cannot join the Ray cluster at {address}: nothing answers there "
                            f"({e.strerror or type(e).__name__}); start its head with ray start "
                            "--head, or give its address") from None
    try:
        return ray, ray.init(address=address, namespace="dreamer_live", log_to_driver=log_to_driver)
    except (ConnectionError, RuntimeError, ValueError) as e:
        token = "" if os.environ.get(AUTH_ENV, "").lower() == "token" else (
            f" (a cluster with token authentication, Ray's default, needs {AUTH_ENV}=token and its "
            "token in ~/.ray/auth_token or RAY_AUTH_TOKEN)")
        raise UserError(f"cannot join the Ray cluster at {address}: "
                        f"{str(e).strip().splitlines()[0][:300]}{token}") from None


def describe(context) -> str:
    """Where the cluster is (its address), and its dashboard when it has one."""
    dashboard = context.dashboard_url
    return context.address_info["gcs_address"] + (f" (Ray dashboard http://{dashboard})"
                                                  if dashboard else "")


def hub_exists(ray) -> bool:
    """Whether a run's Hub (raylink.HUB_NAME) lives in the connected cluster."""
    from dreamer_live.transport import raylink  # imports Ray

    try:
        ray.get_actor(raylink.HUB_NAME)
    except ValueError:
        return False
    return True


def attach(config, logdir: pathlib.Path) -> str:
    """Join this (hand-started) actor's process to a running learner's cluster: its transport ends
    go through Ray from now on; return where it joined."""
    address = check_address(config.ray.address)
    if address == "local":
        raise UserError("an actor joins a running learner's cluster: --ray.address auto or HOST:PORT "
                        "(local starts a private one, for python -m dreamer_live.run)")
    ray, context = connect(address, log_to_driver=False)
    from dreamer_live.transport import raylink  # imports Ray

    transport.use_ray(raylink.Link(logdir))
    where = describe(context)
    if not hub_exists(ray):
        print(f"actor {config.actor.id}: no learner on the Ray cluster at {where} yet; playing on, "
              "its chunks wait in the outbox until one starts", flush=True)
    return where


class HeadWatch:
    """Whether the connected cluster's head still answers: a TCP connection to its GCS, tried at most
    once a second; lost once none has been taken for ray.head_lost_s seconds."""

    def __init__(self, config):
        import ray

        self.where = ray.get_runtime_context().gcs_address
        host, _, port = self.where.rpartition(":")
        self.address, self.lost_after = (host, int(port)), config.ray.head_lost_s
        self.answered = self.checked = time.monotonic()

    def lost(self) -> bool:
        """Whether the head has not answered for lost_after seconds."""
        now = time.monotonic()
        if now - self.checked >= 1.0:
            self.checked = now
            try:
                socket.create_connection(self.address, timeout=1.0).close()
                self.answered = time.monotonic()
            except OSError:
                pass
        return time.monotonic() - self.answered >= self.lost_after


@contextlib.contextmanager
def stop_when_head_lost(config, stop):
    """Within: a thread that asks `stop` (a StopFlag) to end the loop (reason HEAD_GONE) once the
    connected cluster's head is lost, so that the loop saves what it holds while Ray's own processes
    still wait for the head."""
    watch, done = HeadWatch(config), threading.Event()

    def run() -> None:
        while not done.wait(1.0) and not stop.event.is_set():
            if watch.lost():
                stop.set(HEAD_GONE)

    thread = threading.Thread(target=run, name="head-watch", daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        done.set()
