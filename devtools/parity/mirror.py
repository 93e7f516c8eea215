"""A throw-away mirror of the original release's package that runs on this project's data.

The parity harness (`scripts/tools/release_parity.py`) runs the release's own code side by
side with this project's. The release reads its data, Lucene index and SASRec checkpoint
from fixed paths next to its own package, so the harness never edits the user's checkout:
it builds a temporary directory whose `.py` files are unchanged byte copies of the release's
and whose data and artefact paths are symbolic links to a data directory of this project
(`DATA/*.json`, the Lucene index of DATA that this project's run reads,
`DATA/recommender/{pwab.pth,1000_ids.json}`).
Nothing of the release is ever copied into the project; the mirror lives in a temp folder
and is deleted after the run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from collections.abc import Iterator
from typing import Any

from devtools.parity.release.worker import Request

PINNED_COMMIT = "23ff65c4c2288198b4b3d00d835760da2c2ff8e8"
PACKAGE = "PersonalWAB"
# Files of the release the harness runs; their absence means DIR is not a checkout of it.
REQUIRED_FILES = (
    "run.py",
    f"{PACKAGE}/envs/base.py",
    f"{PACKAGE}/envs/user.py",
    f"{PACKAGE}/envs/pwab/__init__.py",
    f"{PACKAGE}/envs/pwab/data/__init__.py",
    f"{PACKAGE}/envs/pwab/functions/__init__.py",
    f"{PACKAGE}/agents/gpt_function_calling_agent.py",
    f"{PACKAGE}/agents/chat_react_agent.py",
    f"{PACKAGE}/agents/utils.py",
)
DATA_FOLDER = f"{PACKAGE}/envs/pwab/data"
INDEX_LINK = f"{PACKAGE}/envs/pwab/functions/search/indexes"
CHECKPOINT_LINK = f"{PACKAGE}/envs/pwab/functions/recommender/checkpoint/pwab.pth"
ITEM_MAP_LINK = f"{PACKAGE}/envs/pwab/functions/recommender/data/1000_ids.json"
DATA_PATTERNS = ("all_products_part_*.json", "user_history_part_*.json")
DATA_FILES = ("user_instructions.json", "user_profiles.json")


class ParityError(RuntimeError):
    """A setting or an input of the parity harness is wrong; the message says which and why."""


@dataclass
class ReleaseMirror:
    root: Path  # put this folder first on sys.path to import the release's package
    release_dir: Path
    data_dir: Path
    fingerprint: str  # sha256 over the release's .py files (path and bytes), to tell checkouts apart
    commit: str | None  # the checkout's HEAD when it is a git work tree

    @property
    def run_script(self) -> Path:
        return self.root / "run.py"

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def check_release_dir(release_dir: Path) -> None:
    if not release_dir.is_dir():
        raise ParityError(f"--release_dir {release_dir}: not a directory (give a checkout of "
                          f"HongruCai/PersonalWAB at {PINNED_COMMIT[:7]})")
    missing = [name for name in REQUIRED_FILES if not (release_dir / name).is_file()]
    if missing:
        raise ParityError(f"--release_dir {release_dir}: not a checkout of the release "
                          f"(missing {', '.join(missing[:3])})")


def lucene_index_of(data_dir: Path, protocol_file: str | None = None) -> Path:
    """The Lucene index this project's runs over `data_dir` with the texts of `protocol_file`
    read (one per product text and products), which the release is given too."""
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.engines.search import search_index_dir
    from PersonalWAB.errors import DataError
    from PersonalWAB.protocol import load_protocol

    try:
        return search_index_dir(load_benchmark_data(data_dir), "lucene", load_protocol(protocol_file))
    except DataError as exc:
        raise ParityError(f"--data_dir {data_dir}: {exc}") from None


def data_sources(data_dir: Path, protocol_file: str | None = None, index_dir: Path | None = None) -> dict[str, Path]:
    """The data files and artefacts the release reads, by their path inside the mirror
    (`index_dir`: the Lucene index, default `lucene_index_of`)."""
    if not data_dir.is_dir():
        raise ParityError(f"--data_dir {data_dir}: not a directory")
    sources: dict[str, Path] = {}
    for pattern in DATA_PATTERNS:
        parts = sorted(data_dir.glob(pattern))
        if not parts:
            raise ParityError(f"--data_dir {data_dir}: no {pattern} (the release reads its products and "
                              "histories in parts)")
        sources.update({f"{DATA_FOLDER}/{p.name}": p for p in parts})
    for name in DATA_FILES:
        sources[f"{DATA_FOLDER}/{name}"] = data_dir / name
    sources[INDEX_LINK] = index_dir or lucene_index_of(data_dir, protocol_file)
    sources[CHECKPOINT_LINK] = data_dir / "recommender" / "pwab.pth"
    sources[ITEM_MAP_LINK] = data_dir / "recommender" / "1000_ids.json"
    missing = [str(p) for p in sources.values() if not p.exists()]
    if missing:
        raise ParityError(f"--data_dir {data_dir}: missing {missing[0]}; build the artefacts with "
                          f"`.venv/bin/python -m PersonalWAB.build --data_dir {data_dir}`")
    return sources


def release_commit(release_dir: Path) -> str | None:
    """HEAD of `release_dir` when it is itself the top of a git work tree (not inside another one)."""

    def git(*args: str) -> str:
        out = subprocess.run(["git", "-C", str(release_dir), *args], capture_output=True, text=True, timeout=30)
        return out.stdout.strip() if out.returncode == 0 else ""

    try:
        top, head = git("rev-parse", "--show-toplevel"), git("rev-parse", "HEAD")
    except (OSError, subprocess.TimeoutExpired):
        return None
    if not top or Path(top).resolve() != release_dir.resolve():
        return None
    return head or None


PUMA_FILES = ("test.py", "PUMA/utils.py", "PUMA/prepare_function_data.py", "PUMA/prepare_param_data.py",
              "PUMA/prepare_dpo_data.py", "PUMA/test_llama.py", "PUMA/dpo_llama.py", "PUMA/finetune_llama.py",
              "PUMA/merge_save.py")  # the PUMA check's scripts; optional for the others


def python_files(release_dir: Path) -> list[Path]:
    files = [release_dir / "run.py", *sorted((release_dir / PACKAGE).rglob("*.py")),
             *(release_dir / name for name in PUMA_FILES if (release_dir / name).is_file())]
    return [f for f in files if "__pycache__" not in f.parts]


def build_mirror(release_dir: Path | str, data_dir: Path | str, parent: Path | str | None = None,
                 protocol_file: str | None = None, index_dir: Path | None = None) -> ReleaseMirror:
    """Copy the release's .py files unchanged into a temp folder and link its data paths to `data_dir`
    (and its index path to `index_dir`, default the one `protocol_file`'s runs read)."""
    release_dir, data_dir = Path(release_dir).resolve(), Path(data_dir).resolve()
    check_release_dir(release_dir)
    sources = data_sources(data_dir, protocol_file, index_dir)
    root = Path(tempfile.mkdtemp(prefix="release_mirror_", dir=parent))
    digest = hashlib.sha256()
    for source in python_files(release_dir):
        relative = source.relative_to(release_dir)
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        digest.update(str(relative).encode() + b"\0" + source.read_bytes())
    for relative, source in sources.items():
        link = root / relative
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(source, target_is_directory=source.is_dir())
    return ReleaseMirror(root, release_dir, data_dir, digest.hexdigest(), release_commit(release_dir))


WORKER = Path(__file__).resolve().parent / "release" / "worker.py"
EXIT_MISSING_PACKAGE = 3  # the release worker's exit status when the release needs a package not installed


def launch(command: list[str], log_path: Path, env: dict[str, str], cwd: Path | None = None) -> subprocess.Popen:
    """Start a process whose output goes to `log_path` (read back when it fails)."""
    with open(log_path, "w", encoding="utf-8") as log:  # the child keeps its own handle
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)


def finish(process: subprocess.Popen, label: str, log_path: Path, timeout_s: float) -> int:
    """Wait for a process started by `launch`; kill it after `timeout_s`. Returns its exit status."""
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise ParityError(f"{label} ran past {timeout_s:.0f} s and was stopped; see {log_path}") from None


@contextmanager
def reaped() -> Iterator[dict[str, subprocess.Popen]]:
    """A place to keep started processes; any still running on the way out (an error) is killed."""
    running: dict[str, subprocess.Popen] = {}
    try:
        yield running
    finally:
        for process in running.values():
            if process.poll() is None:
                process.kill()
                process.wait()


def log_tail(log_path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclass
class ReleaseRunner:
    """Starts the release worker (release/worker.py) on a mirror, with the extra package folders on its path and,
    when `release_libs` is set, the libraries of the release's time first. Every command writes
    the versions of the libraries it imported beside its log (`library_files`)."""

    mirror: ReleaseMirror
    extra_paths: list[str]
    python: str
    timeout_s: float
    release_libs: str | None = None
    library_files: list[Path] = field(default_factory=list, init=False)

    def environment(self, base_url: str | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OPENAI_BASE_URL")}
        env["PYTHONHASHSEED"] = "0"  # the release turns InteRecAgent memory lists into sets: fix their order
        if base_url:
            env["OPENAI_BASE_URL"] = base_url
        return env

    def start(self, command: str, log_path: Path, base_url: str | None = None,
              release_argv: list[str] | None = None, cwd: Path | None = None, **fields: Any) -> subprocess.Popen:
        """Start the worker on `command`; `fields` are the other fields of its `Request` (paths
        may be given as Path). The request is written beside the log (`<log>.request.json`)."""
        libs_out = log_path.with_name(log_path.stem + ".libs.json")
        libs_out.unlink(missing_ok=True)
        self.library_files.append(libs_out)
        request = Request(command=command, mirror=str(self.mirror.root), libs_out=str(libs_out),
                          release_libs=self.release_libs, extra_paths=list(self.extra_paths),
                          cwd=None if cwd is None else str(cwd), release_argv=list(release_argv or []),
                          **{name: str(value) if isinstance(value, Path) else value for name, value in fields.items()})
        request_file = log_path.with_name(log_path.stem + ".request.json")
        request_file.write_text(json.dumps(asdict(request), indent=1), encoding="utf-8")
        return launch([self.python, str(WORKER), str(request_file)], log_path, self.environment(base_url))

    def libraries(self) -> dict[str, dict[str, Any]]:
        """Per command started (its log's name): the libraries it imported, version and folder."""
        return {path.name.removesuffix(".libs.json"): json.loads(path.read_text(encoding="utf-8"))
                for path in self.library_files if path.exists()}

    def finish(self, process: subprocess.Popen, label: str, log_path: Path, must_succeed: bool = True) -> int:
        status = finish(process, label, log_path, self.timeout_s)
        if status == EXIT_MISSING_PACKAGE:
            raise ParityError(log_tail(log_path, 1))
        if status != 0 and must_succeed:
            raise ParityError(f"{label} failed (exit {status}); last lines of {log_path}:\n{log_tail(log_path)}")
        return status
