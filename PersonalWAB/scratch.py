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
import itertools
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


# The most a scratch name adds to its target's: ".", "." + a pid (Linux allows 7 digits),
# "." + the write's number in this process, "." + the longest tag ("partial"); a lock adds
# ".lock". A target whose scratch name would not fit the file system's limit is refused
# before anything is written.
SCRATCH_NAME_OVERHEAD = len("..4194304.999999.partial")
DEFAULT_NAME_MAX = 255
# What `os.link` raises where the file system has no hard links (some FUSE and FAT mounts).
NO_HARD_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EXDEV)
_WRITES = itertools.count()


def name_too_long(path: Path) -> str | None:
    """Why `path`'s name cannot be written through a scratch file beside it (None: it can)."""
    folder = Path(path).parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = DEFAULT_NAME_MAX
    length = len(Path(path).name.encode("utf-8", "surrogateescape"))
    if length + SCRATCH_NAME_OVERHEAD <= limit:
        return None
    return (f"the name is {length} bytes; with its scratch and lock files it needs {length + SCRATCH_NAME_OVERHEAD}, "
            f"over this file system's limit of {limit}; use a name of at most {limit - SCRATCH_NAME_OVERHEAD} bytes")


def output_file_problem(path: Path) -> str | None:
    """Why the project cannot write `path` whole through a scratch file and a rename: not a
    regular file (renaming onto a device or FIFO would replace it; as root, /dev/null itself),
    or a name too long for its scratch file. None when it can."""
    return not_a_regular_file(path) or name_too_long(path)


# The running command's input files, by (device, inode) -> (path, flag): never replaced
# (`PersonalWAB.outputs` registers them when the command claims its outputs).
_inputs: dict[tuple[int, int], tuple[Path, str]] = {}


def protect_inputs(inputs: dict[Path, str]) -> None:
    """From now on the writer refuses to replace these files (path -> the flag naming it)."""
    _inputs.clear()
    for path, flag in inputs.items():
        try:
            status = os.stat(path)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(status.st_mode):
            _inputs[(status.st_dev, status.st_ino)] = (Path(path), flag)


def protected_inputs() -> dict[Path, str]:
    return {path: flag for path, flag in _inputs.values()}


def input_replaced(path: Path) -> str | None:
    """Why writing `path` would replace one of the running command's inputs (None: it would not)."""
    if not _inputs:
        return None
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return None
    held = _inputs.get((status.st_dev, status.st_ino))
    return None if held is None else f"is this command's input ({held[1]} {held[0]}); an input is never written over"


def atomic_write_bytes(path: Path, data: bytes, exclusive: bool = False) -> None:
    """Write a whole file or nothing: readers (and a killed writer) never leave half of it.
    The one writer of every file the project's commands produce.

    A failure (a full disk) leaves the target's last whole version and no scratch file, and
    raises OSError naming the target, not the scratch file. One of the running command's
    inputs (`protect_inputs`) is never replaced: DataError.

    `exclusive`: create the file only if the name is free (FileExistsError otherwise), still
    whole: the scratch file is hard-linked into place, so no reader ever sees it empty. On a
    file system without hard links (some FUSE and FAT mounts) the name is claimed with an
    exclusive create and then filled, so a reader may see it empty for that moment."""
    path = Path(path)
    problem = output_file_problem(path) or input_replaced(path)
    if problem:
        raise DataError(f"{path}: {problem}; not written")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = scratch_path(path, f"{next(_WRITES)}.tmp")  # numbered: threads may write one file at once
    try:
        tmp.write_bytes(data)
        if not exclusive:
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise
        except OSError as exc:
            if exc.errno not in NO_HARD_LINKS:
                raise
            with open(path, "xb") as handle:
                handle.write(data)
    except FileExistsError:
        raise
    except OSError as exc:  # named after the target: the scratch name means nothing to the user
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path: Path, text: str, exclusive: bool = False) -> None:
    """`atomic_write_bytes` of `text` in UTF-8. Text that UTF-8 cannot encode (a lone surrogate
    a model produced) is written as a `\\udXXX` escape, which is what JSON itself would write,
    so a result file holding one stays valid JSON that reads back to the same string."""
    atomic_write_bytes(path, text.encode("utf-8", "backslashreplace"), exclusive)


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
        problem = not_a_regular_file(self.path)
        if problem:  # flock on a FIFO or device fails with a bare "Invalid argument"
            raise DataError(f"{self.path}: {problem}, not the lock file of {self.target}; remove it or "
                            "choose another output name")
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
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError as exc:  # a full disk: leave no empty lock file behind
            self.path.unlink(missing_ok=True)
            os.close(fd)
            raise OSError(exc.errno, f"{exc.strerror}; cannot write the lock of {self.target}", str(self.path)) \
                from None
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
