"""Reading another process's memory: pointer chains over a small per-OS reader.

A reader (the OS seam) reads bytes at an address, finds a module's base address and lists the
process's writable regions: `LinuxMemory` (/proc/PID/mem and /proc/PID/maps) and `WindowsMemory`
(pymem). `resolve` follows a pointer chain the way Cheat Engine shows one and `read_value` decodes the
value at its end; both work on any reader, so their logic is tested with a fake one.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import struct
import sys
from typing import Protocol

from dreamer_live.envs.live.profile import TYPES, ValueSpec
from dreamer_live.errors import UserError

PTRACE_FIX = ("fix: `sudo sysctl kernel.yama.ptrace_scope=0`, or run as the game's user with "
              "CAP_SYS_PTRACE (`sudo setcap cap_sys_ptrace=eip $(readlink -f $(which python))`)")


class MemoryReadError(Exception):
    """A read failed (unmapped address, null pointer in a chain); the game may be loading."""


class ProcessGone(Exception):
    """The process exited."""


@dataclasses.dataclass(frozen=True)
class Region:
    """A mapped memory region of the other process."""

    start: int
    end: int
    path: str = ""

    @property
    def size(self) -> int:
        """Length in bytes."""
        return self.end - self.start


class ProcessMemory(Protocol):
    """What the pointer-chain logic needs from an OS backend."""

    pid: int
    pointer_size: int

    def read(self, address: int, size: int) -> bytes:
        """`size` bytes at `address`, or MemoryReadError / ProcessGone."""

    def module_base(self, name: str) -> int:
        """Load address of module `name` (executable or library), or MemoryReadError."""

    def regions(self) -> list[Region]:
        """Writable regions (for scanning)."""

    def images(self) -> list[Region]:
        """Module images, path = module name (for pointer scans)."""

    def close(self) -> None:
        """Release the handle."""


def read_pointer(reader: ProcessMemory, address: int) -> int:
    """The pointer stored at `address` (the process's pointer size)."""
    fmt = "<Q" if reader.pointer_size == 8 else "<I"
    return struct.unpack(fmt, reader.read(address, reader.pointer_size))[0]


def resolve(spec: ValueSpec, reader: ProcessMemory) -> int:
    """The final address of a value: base = module + offset (or address), then each offset through a pointer.

    [[[base] + o1] + o2] + o3 for offsets [o1, o2, o3]: read a pointer at the current address, add the next
    offset; the last sum is the value's address.
    """
    address = reader.module_base(spec.module) + spec.offset if spec.module else spec.address
    for step, offset in enumerate(spec.offsets):
        try:
            pointer = read_pointer(reader, address)
        except MemoryReadError:
            raise MemoryReadError(f"{spec.name}: {spec.describe()}: cannot read the pointer at "
                                  f"0x{address:X} (step {step + 1})") from None
        if pointer == 0:
            raise MemoryReadError(f"{spec.name}: {spec.describe()}: null pointer at 0x{address:X} "
                                  f"(step {step + 1})")
        address = pointer + offset
    return address


def decode(kind: str, data: bytes) -> float:
    """Bytes to a number of memory type `kind` (i32, f64, ...)."""
    return float(struct.unpack(TYPES[kind], data)[0])


def read_value(spec: ValueSpec, reader: ProcessMemory) -> float:
    """Follow the value's pointer chain and decode it."""
    address = resolve(spec, reader)
    try:
        data = reader.read(address, spec.size)
    except MemoryReadError:
        raise MemoryReadError(f"{spec.name}: {spec.describe()}: cannot read {spec.type} at "
                              f"0x{address:X}") from None
    return decode(spec.type, data)


# --- Linux ----------------------------------------------------------------------------------------------
def process_name(pid: int) -> str:
    """The executable's file name of a Linux process ('' if gone)."""
    try:
        return pathlib.Path(os.readlink(f"/proc/{pid}/exe")).name
    except OSError:
        try:
            return pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            return ""


def find_pids(name: str) -> list[int]:
    """Processes whose executable or command name is `name`, oldest first (Linux: /proc; Windows:
    the first match pymem finds)."""
    if sys.platform == "win32":
        import pymem.process
        entry = pymem.process.process_from_name(name)
        return [int(entry.th32ProcessID)] if entry is not None else []
    pids = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            pid = int(entry.name)
            try:
                comm = (entry / "comm").read_text().strip()
            except OSError:
                continue
            if comm == name[:15] or process_name(pid) == name:
                pids.append(pid)
    return sorted(pids)


class LinuxMemory:
    """Reads a Linux process through /proc/PID/mem (the same permission rule as ptrace)."""

    def __init__(self, pid: int, pointer_size: int = 0):
        self.pid = int(pid)
        if not os.path.exists(f"/proc/{self.pid}"):
            raise ProcessGone(f"no process {self.pid}")
        try:
            self._fd = os.open(f"/proc/{self.pid}/mem", os.O_RDONLY)
        except PermissionError:
            raise UserError(f"not allowed to read the memory of process {self.pid} "
                            f"({process_name(self.pid) or '?'}); {PTRACE_FIX}") from None
        except FileNotFoundError:
            raise ProcessGone(f"no process {self.pid}") from None
        self.pointer_size = pointer_size or self._elf_pointer_size()
        self._modules: dict[str, int] = {}

    def _elf_pointer_size(self) -> int:
        try:
            with open(f"/proc/{self.pid}/exe", "rb") as f:
                header = f.read(5)
            return 4 if header[4:5] == b"\x01" else 8
        except OSError:
            return 8

    def read(self, address: int, size: int) -> bytes:
        """`size` bytes at `address`."""
        try:
            data = os.pread(self._fd, size, address)
        except PermissionError:
            raise UserError(f"not allowed to read the memory of process {self.pid}; "
                            f"{PTRACE_FIX}") from None
        except (OSError, OverflowError) as e:
            if not os.path.exists(f"/proc/{self.pid}"):
                raise ProcessGone(f"process {self.pid} exited") from None
            raise MemoryReadError(f"cannot read 0x{address:X} in process {self.pid}: {e}") from None
        if len(data) != size:
            if not os.path.exists(f"/proc/{self.pid}"):
                raise ProcessGone(f"process {self.pid} exited")
            raise MemoryReadError(f"short read at 0x{address:X} in process {self.pid}")
        return data

    def maps(self) -> list[tuple[int, int, str, int, str]]:
        """(start, end, perms, file offset, path) for each mapping."""
        try:
            text = pathlib.Path(f"/proc/{self.pid}/maps").read_text()
        except OSError:
            raise ProcessGone(f"process {self.pid} exited") from None
        out = []
        for line in text.splitlines():
            parts = line.split(None, 5)
            start, end = (int(v, 16) for v in parts[0].split("-"))
            path = parts[5] if len(parts) > 5 else ""
            out.append((start, end, parts[1], int(parts[2], 16), path))
        return out

    def module_base(self, name: str) -> int:
        """Lowest mapped address of the file named `name` (the executable or a shared library)."""
        if name in self._modules:
            return self._modules[name]
        bases: dict[str, int] = {}
        for start, _, _, _, path in self.maps():
            if path.startswith("/"):
                base = pathlib.Path(path).name
                bases[base] = min(bases.get(base, start), start)
        match = bases.get(name)
        if match is None:  # allow "libfoo" for "libfoo.so.1"
            candidates = [b for b in bases if b.split(".so")[0] == name.split(".so")[0]]
            match = bases[candidates[0]] if candidates else None
        if match is None:
            raise MemoryReadError(f"module {name!r} is not loaded in process {self.pid} "
                                  f"(modules: {', '.join(sorted(bases)[:12])}...)")
        self._modules[name] = match
        return match

    def images(self) -> list[Region]:
        """Each module's mapped image (path = module name), its .bss included: where statics live."""
        out: list[Region] = []
        for start, end, _, _, path in self.maps():
            if path.startswith("/"):
                name = pathlib.Path(path).name
                if out and out[-1].path == name and out[-1].end == start:
                    out[-1] = Region(out[-1].start, end, name)
                else:
                    out.append(Region(start, end, name))
            elif not path and out and out[-1].end == start:  # .bss: anonymous, right after the file
                out[-1] = Region(out[-1].start, end, out[-1].path)
        return out

    def regions(self) -> list[Region]:
        """Readable and writable private regions (heap, stack, anonymous, a module's data)."""
        out = []
        for start, end, perms, _, path in self.maps():
            if perms[0] == "r" and perms[1] == "w" and not path.startswith(("/dev/", "[v")):
                out.append(Region(start, end, path))
        return out

    def close(self) -> None:
        """Close /proc/PID/mem."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


# --- Windows --------------------------------------------------------------------------------------------
MEM_COMMIT = 0x1000
WRITABLE = {0x04, 0x08, 0x40, 0x80}  # PAGE_READWRITE, WRITECOPY, EXECUTE_READWRITE, EXECUTE_WRITECOPY
PAGE_GUARD = 0x100


class WindowsMemory:
    """Reads a Windows process through pymem (ReadProcessMemory); `pymem` is injectable for tests."""

    def __init__(self, pid: int, pointer_size: int = 0, pymem=None):
        if pymem is None:
            try:
                import pymem
            except ImportError:
                raise UserError("reading game memory on Windows needs pymem: pip install pymem") from None
        self._pymem = pymem
        self.pid = int(pid)
        try:
            self.pm = pymem.Pymem(self.pid)  # pymem >= 1.13 opens a process id given as an int
        except Exception as e:  # pymem.exception.CouldNotOpenProcess and friends
            raise UserError(f"cannot open process {self.pid} for reading ({type(e).__name__}): if the "
                            f"game runs as administrator, run the actor from an administrator prompt"
                            ) from None
        if pointer_size:
            self.pointer_size = pointer_size
        else:  # a 32-bit game on 64-bit Windows runs under WoW64
            self.pointer_size = 4 if getattr(self.pm, "is_WoW64", False) else 8

    def read(self, address: int, size: int) -> bytes:
        """`size` bytes at `address`."""
        try:
            return bytes(self.pm.read_bytes(address, size))
        except Exception as e:  # pymem.exception.MemoryReadError / WinAPIError
            if not self._alive():
                raise ProcessGone(f"process {self.pid} exited") from None
            raise MemoryReadError(f"cannot read 0x{address:X} in process {self.pid}: {e}") from None

    def _alive(self) -> bool:
        try:
            import ctypes
            code = ctypes.c_ulong()
            ok = ctypes.windll.kernel32.GetExitCodeProcess(self.pm.process_handle, ctypes.byref(code))
            return bool(ok) and code.value == 259  # STILL_ACTIVE
        except Exception:
            return True

    def module_base(self, name: str) -> int:
        """Base address of module `name` (game.exe, engine.dll), case-insensitive."""
        modules = {m.name.lower(): m.lpBaseOfDll for m in self.pm.list_modules()}
        base = modules.get(name.lower()) or modules.get(name.lower() + ".exe") \
            or modules.get(name.lower() + ".dll")
        if base is None:
            raise MemoryReadError(f"module {name!r} is not loaded in process {self.pid} "
                                  f"(modules: {', '.join(sorted(modules)[:12])}...)")
        return int(base)

    def images(self) -> list[Region]:
        """Each module's image (path = module name): where statics live."""
        return [Region(int(m.lpBaseOfDll), int(m.lpBaseOfDll) + int(m.SizeOfImage), m.name)
                for m in self.pm.list_modules()]

    def regions(self) -> list[Region]:
        """Committed writable regions (VirtualQueryEx walk)."""
        out, address = [], 0
        limit = 0x7FFF_FFFF_FFFF if self.pointer_size == 8 else 0x7FFF_FFFF
        query = self._pymem.memory.virtual_query
        while address < limit:
            try:
                info = query(self.pm.process_handle, address)
            except Exception:
                break
            size = int(info.RegionSize)
            if size <= 0:
                break
            if info.State == MEM_COMMIT and info.Protect & 0xFF in WRITABLE \
                    and not info.Protect & PAGE_GUARD:
                out.append(Region(int(info.BaseAddress or 0), int(info.BaseAddress or 0) + size))
            address = int(info.BaseAddress or 0) + size
        return out

    def close(self) -> None:
        """Close the process handle."""
        try:
            self.pm.close_process()
        except Exception:
            pass


def open_process(pid: int, pointer_size: int = 0) -> ProcessMemory:
    """The memory reader for this platform."""
    if sys.platform == "win32":
        return WindowsMemory(pid, pointer_size)
    return LinuxMemory(pid, pointer_size)
