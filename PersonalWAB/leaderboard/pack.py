"""The submission bundle: what a researcher sends to the leaderboard maintainers.

`<stem>.submission.tar.gz` holds the gzip-compressed result file, a SHA256SUMS
file (checkable with `sha256sum -c`) covering both the compressed and the
original file, and the validation summary as JSON, so the maintainers can check
integrity and see at a glance whether the run is complete, official and valid.
The bundle is byte-for-byte reproducible: every timestamp inside is fixed.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

from PersonalWAB import __version__
from PersonalWAB.outputs import write_output
from PersonalWAB.leaderboard.validate import ValidationReport, read_valid, validate_file

SUMMARY_NAME = "validation.json"
CHECKSUM_NAME = "SHA256SUMS"


def _add(archive: tarfile.TarFile, name: str, payload: bytes) -> None:
    member = tarfile.TarInfo(name)
    member.size = len(payload)
    member.mode = 0o644
    archive.addfile(member, io.BytesIO(payload))


def bundle_summary(report: ValidationReport, forced: bool) -> dict[str, Any]:
    return {**report.summary(), "packed_despite_errors": forced and not report.valid,
            "project_version": __version__}


def pack_file(path: Path | str, out_dir: Path | str | None = None, data: Any | None = None,
              force: bool = False) -> tuple[Path, ValidationReport]:
    """Validate `path` and write its bundle into `out_dir` (default: beside the file); an invalid
    file is refused (InvalidResultFile) unless `force`, and its bundle then says so."""
    path = Path(path)
    report = validate_file(path, data) if force else read_valid(path, data)
    raw = path.read_bytes()
    compressed = gzip.compress(raw, mtime=0)
    gz_name = f"{path.name}.gz"
    checksums = (f"{hashlib.sha256(compressed).hexdigest()}  {gz_name}\n"
                 f"{hashlib.sha256(raw).hexdigest()}  {path.name}\n")
    summary = json.dumps(bundle_summary(report, force), indent=2, ensure_ascii=False).encode("utf-8")
    bundle = (Path(out_dir) if out_dir else path.parent) / f"{path.stem}.submission.tar.gz"
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", fileobj=buffer, mode="wb", mtime=0) as zipped, \
            tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as archive:
        _add(archive, gz_name, compressed)
        _add(archive, CHECKSUM_NAME, checksums.encode("ascii"))
        _add(archive, SUMMARY_NAME, summary)
    write_output(bundle, buffer.getvalue())  # whole or not at all; never over a file this command did not write
    return bundle, report
