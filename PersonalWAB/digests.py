"""Content digests of derived files, recorded when they are built and checked when they are read.

A cache rewritten with other content of the same shape (random vectors of the right size, a
model file with bytes flipped) loads without an error and changes every score computed from
it. The SHA-256 of the file's bytes, kept beside it in `<file>.sha256`, tells such a file from
the one that was built: hashing a file costs far less than rebuilding or re-checking it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from PersonalWAB.scratch import atomic_write_bytes, atomic_write_text

CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in chunks (model files are tens of MB)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def digest_path(path: Path) -> Path:
    """Where the digest of `path` is recorded."""
    path = Path(path)
    return path.with_name(path.name + ".sha256")


def record_digest(path: Path, content: bytes | None = None) -> None:
    """Record the digest of `path` right after writing it whole (`content`: the bytes just
    written, which spares reading them back)."""
    digest = hashlib.sha256(content).hexdigest() if content is not None else file_sha256(path)
    atomic_write_text(digest_path(path), digest + "\n")


def write_with_digest(path: Path, content: bytes) -> None:
    """Write a derived file whole (the one atomic writer) and record its digest."""
    atomic_write_bytes(path, content)
    record_digest(path, content)


def digest_problem(path: Path) -> str | None:
    """Why `path` is not the file its recorded digest describes (None: it is); the file must exist."""
    record = digest_path(path)
    try:
        recorded = record.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return f"no content digest recorded for it ({record.name} is missing)"
    except (OSError, UnicodeDecodeError) as exc:
        return f"its content digest {record.name} cannot be read ({exc})"
    actual = file_sha256(path)
    if actual != recorded:
        return (f"its content (sha256 {actual[:12]}…) differs from the digest recorded when it was built "
                f"({recorded[:12]}…): it was changed after the build")
    return None
