"""Scratch files and folders that a killed process leaves behind, and their cleanup.

Everything the project writes atomically goes through a hidden scratch entry beside
its target whose name carries the writer's process id, `.{target}.{pid}.{tag}...`
(tag: tmp, build, old or partial), and is renamed into place when complete. A
SIGKILL between the two leaves the scratch entry; `remove_stale` deletes those whose
process is gone, so the next run starts clean without touching the scratch of a run
that is still going.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

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
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8", "backslashreplace")
    tmp = scratch_path(path)
    tmp.write_bytes(data)
    if not exclusive:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError:  # no hard links here
        with open(path, "xb") as handle:
            handle.write(data)
    finally:
        tmp.unlink(missing_ok=True)
