"""Scratch files and folders that a killed process leaves behind, and their cleanup.

Everything the project writes atomically goes through a hidden scratch entry beside
its target whose name carries the writer's process id, `.{target}.{pid}.{tag}...`
(tag: tmp, build, old or partial), and is renamed into place when complete. A
SIGKILL between the two leaves the scratch entry; `remove_stale` deletes those whose
process is gone, so the next run starts clean without touching the scratch of a run
that is still going.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import stat
from pathlib import Path

from PersonalWAB.errors import DataError

SCRATCH_NAME = re.compile(r"^\..+?\.(\d+)\.(?:\d+\.)?(?:tmp|build|old|partial)(?:$|[.\-])")


def scratch_path(target: Path, tag: str = "tmp") -> Path:
    """A scratch name beside `target` owned by this process (same file system: renames are atomic)."""
    return target.with_name(f".{target.name}.{os.getpid()}.{tag}")


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (another user's process counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(folder: Path) -> list[Path]:
    """Delete the scratch entries in `folder` left by processes that no longer run; return them."""
    removed: list[Path] = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:  # absent or unreadable: nothing of ours to clean
        return removed
    for entry in entries:
        match = SCRATCH_NAME.match(entry.name)
        if match is None or pid_alive(int(match.group(1))):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry)
    return removed


def atomic_write_text(path: Path, text: str, exclusive: bool = False) -> None:
    """Write a whole file or nothing: readers (and a killed writer) never leave half of it.

    Text that UTF-8 cannot encode (a lone surrogate a model produced) is written as a
    `\\udXXX` escape, which is what JSON itself would write, so a result file holding one
    stays valid JSON that reads back to the same string.

    `exclusive`: create the file only if the name is free (FileExistsError otherwise), still
    whole: the scratch file is hard-linked into place, so no reader ever sees it empty. On a
    file system without hard links (some FUSE and FAT mounts) the name is claimed with an
    exclusive create and then filled, so a reader may see it empty for that moment."""
    problem = not_a_regular_file(path)
    if problem:  # renaming onto a device or FIFO would replace it (as root: /dev/null itself)
        raise DataError(f"{path}: {problem}; not written")
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8", "backslashreplace")
    tmp = scratch_path(path)
    if not exclusive:
        try:
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except BaseException:  # a full disk: the target keeps its last whole version, no scratch stays
            tmp.unlink(missing_ok=True)
            raise
        return
    try:
        tmp.write_bytes(data)
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError:  # no hard links here
        with open(path, "xb") as handle:
            handle.write(data)
    finally:
        tmp.unlink(missing_ok=True)


KERNEL_FILE_SYSTEMS = (Path("/proc"), Path("/sys"))  # their files look regular but are no data


def not_a_regular_file(path: Path) -> str | None:
    """Why `path` cannot hold a file the project writes or reads back (None: a regular file or
    a new name): a folder, a device, a FIFO, a socket, or a kernel file under /proc or /sys."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # a new name (whether its folder can be made is asked elsewhere)
        mode = None
    except OSError as exc:
        return f"cannot be examined ({exc.strerror})"
    resolved = Path(os.path.realpath(path))
    for root in KERNEL_FILE_SYSTEMS:
        if resolved == root or root in resolved.parents:
            return f"is a kernel file under {root}"
    if mode is None or stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a folder"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device"
    return "is not a regular file"


class RunLock:
    """`<file>.lock`, held while a run writes or resumes `file`: a second run is refused with the
    holder's pid. The lock is an flock on the lock file, so the kernel drops it when its
    process dies however it dies; a lock file left by a killed run is simply taken over."""

    def __init__(self, target: Path):
        self.target = Path(target)
        self.path = self.target.with_name(self.target.name + ".lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise DataError naming the holder's pid. In a folder where no file can
        be made (a read-only copy being resumed) no lock is taken: no run can write there either."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                    return
                raise
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
                os.close(fd)
                raise DataError(f"{self.target}: in use by another run (pid {holder}, lock {self.path}); "
                                "wait for it to end or stop it") from None
            if self._still_named(fd):
                break
            os.close(fd)  # the holder removed the lock file between our open and flock: take the new one
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def _still_named(self, fd: int) -> bool:
        try:
            return os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False

    def release(self) -> None:
        """Remove the lock file and drop the lock (a no-op when not held)."""
        if self._fd is None:
            return
        self.path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None
