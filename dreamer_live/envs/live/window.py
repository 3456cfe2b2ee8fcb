"""Finding the game's window: by title and/or process, its client-area geometry on screen, focus.

`X11Windows` (python-xlib; any X server, Xvfb included) and `Win32Windows` (user32 through ctypes) share
one small interface; `open_windows(display)` picks the one for this platform. A window handle is the
X window id or the HWND (ints).
"""

from __future__ import annotations

import dataclasses
import sys

from dreamer_live.envs.live.memory import process_name
from dreamer_live.errors import UserError


@dataclasses.dataclass(frozen=True)
class Window:
    """A top-level window found on screen."""

    handle: int
    title: str
    pid: int | None


def _matches(title: str, pid: int | None, want_title: str, want_process: str, names) -> bool:
    if want_title and want_title not in title:
        return False
    if want_process:
        name = names(pid) if pid else ""
        if name.lower().removesuffix(".exe") != want_process.lower().removesuffix(".exe"):
            return False
    return True


class X11Windows:
    """Windows on an X display (python-xlib)."""

    def __init__(self, display_name: str = ""):
        from Xlib import display as xdisplay, error

        self._error = error
        try:
            self.display = xdisplay.Display(display_name or None)
        except Exception as e:  # Xlib.error.DisplayError / DisplayNameError / ConnectionClosedError
            shown = display_name or "$DISPLAY"
            raise UserError(f"cannot open X display {shown!r}: {e} (set env.live.display or DISPLAY)"
                            ) from None
        self.root = self.display.screen().root
        self._net_name = self.display.intern_atom("_NET_WM_NAME")
        self._net_pid = self.display.intern_atom("_NET_WM_PID")
        self._utf8 = self.display.intern_atom("UTF8_STRING")

    def _title(self, win) -> str:
        prop = win.get_full_property(self._net_name, self._utf8)
        if prop is not None and prop.value:
            value = prop.value
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        name = win.get_wm_name()
        return name.decode("latin-1") if isinstance(name, bytes) else (name or "")

    def _pid(self, win) -> int | None:
        from Xlib import X
        prop = win.get_full_property(self._net_pid, X.AnyPropertyType)
        return int(prop.value[0]) if prop is not None and len(prop.value) else None

    def list(self) -> list[Window]:
        """Mapped windows with a title, top-level first (any depth: a window manager reparents)."""
        out, stack = [], [(self.root, 0)]
        while stack:
            win, depth = stack.pop(0)
            try:
                children = win.query_tree().children
            except self._error.XError:
                continue
            for child in children:
                try:
                    if child.get_attributes().map_state != 2:  # IsViewable
                        continue
                    title = self._title(child)
                    if title:
                        out.append(Window(child.id, title, self._pid(child)))
                except self._error.XError:
                    continue
                if depth < 3:
                    stack.append((child, depth + 1))
        return out

    def find(self, title: str = "", process: str = "") -> Window | None:
        """The first window whose title contains `title` and whose process is `process`."""
        found = [w for w in self.list() if _matches(w.title, w.pid, title, process, process_name)]
        exact = [w for w in found if w.title == title]
        return (exact or found or [None])[0]

    def geometry(self, handle: int) -> tuple[int, int, int, int] | None:
        """(left, top, width, height) of the window on screen, or None if it is gone or unmapped."""
        win = self.display.create_resource_object("window", handle)
        try:
            if win.get_attributes().map_state != 2:
                return None
            geo = win.get_geometry()
            pos = win.translate_coords(self.root, 0, 0)
        except (self._error.XError, self._error.ConnectionClosedError):
            return None
        return -pos.x, -pos.y, geo.width, geo.height

    def focus(self, handle: int) -> None:
        """Give the window the keyboard focus (raise it too)."""
        from Xlib import X
        win = self.display.create_resource_object("window", handle)
        try:
            win.configure(stack_mode=X.Above)
            win.set_input_focus(X.RevertToParent, X.CurrentTime)
            self.display.sync()
        except self._error.XError:
            pass

    def has_focus(self, handle: int) -> bool:
        """Whether keyboard input goes to this window (or a window inside it, or its frame)."""
        try:
            focus = self.display.get_input_focus().focus
            if isinstance(focus, int):  # PointerRoot / None: input follows the pointer
                return False
            if focus.id == handle:
                return True
            node = focus  # the focus may be a child of ours...
            for _ in range(8):
                node = node.query_tree().parent
                if not node or node.id == self.root.id:
                    break
                if node.id == handle:
                    return True
            node = self.display.create_resource_object("window", handle)  # ...or our frame
            for _ in range(4):
                node = node.query_tree().parent
                if not node or node.id == self.root.id:
                    break
                if node.id == focus.id:
                    return True
        except self._error.XError:
            return False
        return False

    def close(self) -> None:
        """Close the X connection."""
        try:
            self.display.close()
        except Exception:
            pass


class Win32Windows:
    """Windows on the Windows desktop (user32 through ctypes)."""

    def __init__(self, display_name: str = "", user32=None, kernel32=None):
        import ctypes
        from ctypes import wintypes

        self._ctypes, self._wintypes = ctypes, wintypes
        self.user32 = user32 or ctypes.windll.user32
        self.kernel32 = kernel32 or ctypes.windll.kernel32
        try:  # physical pixels everywhere, so window rectangles match what mss captures
            ctypes.windll.shcore.SetProcessDpiAwareness(2)
        except Exception:
            try:
                self.user32.SetProcessDPIAware()
            except Exception:
                pass

    def _process_name(self, pid: int) -> str:
        ctypes = self._ctypes
        handle = self.kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
        if not handle:
            return ""
        try:
            size = ctypes.c_ulong(520)
            buf = ctypes.create_unicode_buffer(size.value)
            if self.kernel32.QueryFullProcessImageNameW(handle, 0, buf, ctypes.byref(size)):
                return buf.value.replace("\\", "/").rsplit("/", 1)[-1]
            return ""
        finally:
            self.kernel32.CloseHandle(handle)

    def list(self) -> list[Window]:
        """Visible top-level windows with a title."""
        ctypes, wintypes = self._ctypes, self._wintypes
        out = []

        @ctypes.WINFUNCTYPE(wintypes.BOOL, wintypes.HWND, wintypes.LPARAM)
        def callback(hwnd, _):
            if self.user32.IsWindowVisible(hwnd):
                length = self.user32.GetWindowTextLengthW(hwnd)
                if length:
                    buf = ctypes.create_unicode_buffer(length + 1)
                    self.user32.GetWindowTextW(hwnd, buf, length + 1)
                    pid = wintypes.DWORD()
                    self.user32.GetWindowThreadProcessId(hwnd, ctypes.byref(pid))
                    out.append(Window(int(hwnd), buf.value, int(pid.value) or None))
            return True

        self.user32.EnumWindows(callback, 0)
        return out

    def find(self, title: str = "", process: str = "") -> Window | None:
        """The first window whose title contains `title` and whose process is `process`."""
        found = [w for w in self.list() if _matches(w.title, w.pid, title, process, self._process_name)]
        exact = [w for w in found if w.title == title]
        return (exact or found or [None])[0]

    def geometry(self, handle: int) -> tuple[int, int, int, int] | None:
        """(left, top, width, height) of the client area on screen, or None if gone or minimised."""
        ctypes, wintypes = self._ctypes, self._wintypes
        if not self.user32.IsWindow(handle) or self.user32.IsIconic(handle):
            return None
        rect, origin = wintypes.RECT(), wintypes.POINT(0, 0)
        if not self.user32.GetClientRect(handle, ctypes.byref(rect)):
            return None
        if not self.user32.ClientToScreen(handle, ctypes.byref(origin)):
            return None
        return origin.x, origin.y, rect.right - rect.left, rect.bottom - rect.top

    def focus(self, handle: int) -> None:
        """Bring the window to the foreground (restore it if minimised)."""
        if self.user32.IsIconic(handle):
            self.user32.ShowWindow(handle, 9)  # SW_RESTORE
        self.user32.SetForegroundWindow(handle)

    def has_focus(self, handle: int) -> bool:
        """Whether the window is the foreground window."""
        return int(self.user32.GetForegroundWindow() or 0) == int(handle)

    def close(self) -> None:
        """Nothing to release."""


def open_windows(display: str = ""):
    """The window backend for this platform (`display`: the X display on Linux)."""
    if sys.platform == "win32":
        return Win32Windows()
    return X11Windows(display)
