"""Key input for live games: portable key names, held keys, and release on every way out.

Backends: XTest through python-xlib on Linux (X11, including Xvfb), pydirectinput on Windows with its
default 0.1 s pause after every call turned off (`PAUSE = 0`). `KeyHolder` holds a set of keys for a
tick and releases what changes; every holder alive is released at exit (atexit), on SIGINT/SIGTERM
(before the previous handler runs, through a connection of its own) and on an uncaught exception. Only
SIGKILL cannot be caught.
"""

from __future__ import annotations

import atexit
import signal
import sys
import threading
import time
import weakref

# Portable key name -> (X keysym, pydirectinput name, Windows virtual-key code).
_SPECIAL = {
    "left": ("Left", "left", 0x25), "right": ("Right", "right", 0x27), "up": ("Up", "up", 0x26),
    "down": ("Down", "down", 0x28), "space": ("space", "space", 0x20),
    "enter": ("Return", "enter", 0x0D), "escape": ("Escape", "esc", 0x1B), "tab": ("Tab", "tab", 0x09),
    "backspace": ("BackSpace", "backspace", 0x08), "shift": ("Shift_L", "shiftleft", 0xA0),
    "shift_r": ("Shift_R", "shiftright", 0xA1), "ctrl": ("Control_L", "ctrlleft", 0xA2),
    "ctrl_r": ("Control_R", "ctrlright", 0xA3), "alt": ("Alt_L", "altleft", 0xA4),
    "alt_r": ("Alt_R", "altright", 0xA5), "insert": ("Insert", "insert", 0x2D),
    "delete": ("Delete", "delete", 0x2E), "home": ("Home", "home", 0x24), "end": ("End", "end", 0x23),
    "pageup": ("Prior", "pageup", 0x21), "pagedown": ("Next", "pagedown", 0x22),
    "minus": ("minus", "-", 0xBD), "equals": ("equal", "=", 0xBB), "comma": ("comma", ",", 0xBC),
    "period": ("period", ".", 0xBE), "slash": ("slash", "/", 0xBF),
}
KEYS: dict[str, tuple[str, str, int]] = dict(_SPECIAL)
KEYS.update({f"f{i}": (f"F{i}", f"f{i}", 0x6F + i) for i in range(1, 13)})
KEYS.update({c: (c, c, ord(c.upper())) for c in "abcdefghijklmnopqrstuvwxyz"})
KEYS.update({c: (c, c, ord(c)) for c in "0123456789"})
ALIASES = {"return": "enter", "esc": "escape", "control": "ctrl", "lctrl": "ctrl", "rctrl": "ctrl_r",
           "lshift": "shift", "rshift": "shift_r", "arrowleft": "left", "arrowright": "right",
           "arrowup": "up", "arrowdown": "down", "pgup": "pageup", "pgdn": "pagedown", "del": "delete"}
KEY_NAMES = tuple(KEYS)


def key_name(name: str) -> str | None:
    """The canonical key name for `name` (case-insensitive, aliases allowed), or None if unknown."""
    name = name.strip().lower()
    name = ALIASES.get(name, name)
    return name if name in KEYS else None


class XTestKeys:
    """Presses keys on an X display with the XTest extension (what a keyboard would send)."""

    def __init__(self, display):
        from Xlib import XK
        from Xlib.ext import xtest

        self.display = display
        self._xtest = xtest
        self._codes: dict[str, int] = {}
        for name, (sym, _, _) in KEYS.items():
            code = display.keysym_to_keycode(XK.string_to_keysym(sym))
            if code:
                self._codes[name] = code

    def _code(self, name: str) -> int:
        try:
            return self._codes[name]
        except KeyError:
            raise KeyError(f"key {name!r} has no keycode on this X display") from None

    def press(self, name: str) -> None:
        """Key down (sent on flush)."""
        from Xlib import X
        self._xtest.fake_input(self.display, X.KeyPress, self._code(name))

    def release(self, name: str) -> None:
        """Key up (sent on flush)."""
        from Xlib import X
        self._xtest.fake_input(self.display, X.KeyRelease, self._code(name))

    def flush(self) -> None:
        """Send queued key events and wait until the server has them."""
        self.display.sync()

    def release_apart(self, names) -> None:
        """Key up for `names` through a connection of its own, now.

        For a signal handler: it runs inside whatever the main thread was doing, maybe a request on
        `self.display` half sent or half read, and python-xlib (without Xlib.threaded) has no locks, so
        a request of the handler's own there spins forever waiting for the interrupted one."""
        from Xlib import X, display as xdisplay
        conn = xdisplay.Display(self.display.get_display_name())
        try:
            for name in names:
                self._xtest.fake_input(conn, X.KeyRelease, self._code(name))
            conn.sync()
        finally:
            conn.close()

    def pressed(self, names) -> set[str]:
        """Which of `names` are down on the display now (the keyboard's or any client's): one round trip."""
        keymap = self.display.query_keymap()
        return {n for n in names if n in self._codes
                and keymap[self._codes[n] // 8] & (1 << (self._codes[n] % 8))}


class DirectInputKeys:
    """Presses keys on Windows with pydirectinput (DirectInput scan codes games read), no pauses."""

    def __init__(self, module=None, user32=None):
        if module is None:
            import pydirectinput as module
        module.PAUSE = 0  # pydirectinput sleeps 0.1 s after every call by default
        if hasattr(module, "FAILSAFE"):
            module.FAILSAFE = False  # its mouse-corner failsafe would abort a long run
        self.module = module
        if user32 is None and sys.platform == "win32":
            import ctypes
            user32 = ctypes.windll.user32
        self.user32 = user32

    def press(self, name: str) -> None:
        """Key down now."""
        self.module.keyDown(KEYS[name][1], _pause=False)

    def release(self, name: str) -> None:
        """Key up now."""
        self.module.keyUp(KEYS[name][1], _pause=False)

    def flush(self) -> None:
        """Nothing queued: SendInput is synchronous."""

    def release_apart(self, names) -> None:
        """Key up for `names` now (SendInput keeps no connection a signal could interrupt)."""
        for name in names:
            self.release(name)

    def pressed(self, names) -> set[str]:
        """Which of `names` are down right now (GetAsyncKeyState)."""
        if self.user32 is None:
            return set()
        return {n for n in names if self.user32.GetAsyncKeyState(KEYS[n][2]) & 0x8000}


class ReadOnlyKeys:
    """A backend that reads the keyboard but never presses a key (a person plays: `record`)."""

    def __init__(self, backend):
        self.backend = backend

    def press(self, name: str) -> None:
        """Nothing is sent."""

    def release(self, name: str) -> None:
        """Nothing is sent."""

    def flush(self) -> None:
        """Nothing is queued."""

    def release_apart(self, names) -> None:
        """Nothing is sent."""

    def pressed(self, names) -> set[str]:
        """Which of `names` are down now (the hotkeys still work)."""
        return self.backend.pressed(names)


_HOLDERS: weakref.WeakSet = weakref.WeakSet()
# Set when SIGINT/SIGTERM arrives: waits inside the live env (for a window, for focus) give up on it.
STOP_EVENT = threading.Event()
_INSTALLED = False
_LOCK = threading.Lock()


def release_everything(apart: bool = False) -> None:
    """Release every key held by any KeyHolder of this process (exit, crash; `apart`: from a signal
    handler, through connections of its own)."""
    for holder in list(_HOLDERS):
        try:
            holder.release_all(apart)
        except Exception:  # the display may be gone already; nothing more to do
            pass


def _chain(signum: int, previous):
    def handler(sig, frame):
        STOP_EVENT.set()
        release_everything(apart=True)
        if callable(previous):
            previous(sig, frame)
        elif previous == signal.SIG_DFL:
            signal.signal(sig, signal.SIG_DFL)
            signal.raise_signal(sig)
    return handler


def install_safety() -> None:
    """Release keys at exit, on SIGINT/SIGTERM (then the previous handler runs) and on a crash."""
    global _INSTALLED
    with _LOCK:
        if _INSTALLED:
            return
        _INSTALLED = True
    atexit.register(release_everything)
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(signum)
            if previous not in (signal.SIG_IGN, None):
                signal.signal(signum, _chain(signum, previous))
    hook = sys.excepthook

    def excepthook(*args):
        release_everything()
        hook(*args)

    sys.excepthook = excepthook


class KeyHolder:
    """Holds a set of keys until told otherwise; the change costs are measured (input latency)."""

    def __init__(self, backend):
        self.backend = backend
        self.held: frozenset[str] = frozenset()
        _HOLDERS.add(self)
        install_safety()

    def set(self, keys) -> float:
        """Hold exactly `keys` from now on (release the others); return the milliseconds it took."""
        keys = frozenset(keys)
        start = time.perf_counter()
        if keys != self.held:
            for name in self.held - keys:
                self.backend.release(name)
            for name in keys - self.held:
                self.backend.press(name)
            self.held = keys
            self.backend.flush()
        return (time.perf_counter() - start) * 1000

    def tap(self, keys, hold_s: float = 0.1) -> None:
        """Press `keys` together, hold them `hold_s`, release them (for reset procedures)."""
        self.set(keys)
        time.sleep(hold_s)
        self.set(())

    def release_all(self, apart: bool = False) -> None:
        """Release every held key (`apart`: through the backend's own connection for a signal handler)."""
        if self.held:
            held, self.held = self.held, frozenset()
            if apart:
                self.backend.release_apart(held)
                return
            for name in held:
                self.backend.release(name)
            self.backend.flush()
