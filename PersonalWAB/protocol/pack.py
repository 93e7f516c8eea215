"""The release protocol pack: the original release's model-facing texts, read on the
user's machine from a checkout of the release and written to one JSON file.

The release's Python files are parsed with `ast`; nothing of them is imported or run.
`build_pack` checks every file against its digest at the pinned commit (a checkout at
another commit, or an edited one, is refused unless `allow_unpinned`, and a pack made
from it is marked as not pinned: runs with it are custom, never standard).

Pack layout (JSON):

    {"format": PACK_FORMAT,
     "release": {"repository", "commit", "pinned": bool},
     "files": {path: {"sha256": ..., "texts": {key: value}, "text_sha256": {key: digest}}}}

`read_pack` checks every text against the digest recorded beside it when the pack was built,
and the texts of a pack marked pinned against the known digest of the pinned commit's texts
(`RELEASE_TEXTS_SHA256`): an edited pack is refused, never run under the release's name.

`key` is a constant's name (`SYS_PROMPT_SINGLE`, `stop.__info__`) or, for a literal inside
a function, `<qualified function name>#<position>`. Values are strings, literal
structures (dicts), or `{"fstring": body}` for an f-string, whose `{expression}` fields
are kept as written.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path
from typing import Any

from PersonalWAB.errors import DataError
from PersonalWAB.protocol.spec import (
    RELEASE_COMMIT,
    RELEASE_FILES,
    RELEASE_REPOSITORY,
    RELEASE_TEXTS_SHA256,
    TEXTS,
    Constant,
    Inline,
    Joined,
)

PACK_FORMAT = "personalwab-release-protocol/1"
REBUILD = "rebuild it with `python -m PersonalWAB.data protocol --release_dir DIR`"


def text_digest(value: Any) -> str:
    """sha256 of one text as JSON (keys sorted), the form a pack stores it in."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def pack_texts_digest(pack: dict[str, Any]) -> str:
    """One digest of every text of a pack (what `RELEASE_TEXTS_SHA256` records for the pinned commit)."""
    return text_digest({relative: entry["texts"] for relative, entry in pack["files"].items()})


def _sources() -> dict[str, list[Constant | Inline]]:
    """Every constant and inline literal the pack needs, grouped by release file."""
    wanted: dict[str, list[Constant | Inline]] = {}
    for source in TEXTS.values():
        parts = [p for p in source.parts if isinstance(p, Inline)] if isinstance(source, Joined) else [source]
        for part in parts:
            if part not in wanted.setdefault(part.file, []):
                wanted[part.file].append(part)
    return wanted


def _constant(tree: ast.Module, name: str, where: str) -> Any:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(ast.unparse(t) == name for t in node.targets):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                raise DataError(f"{where}: {name} is not a literal") from None
    raise DataError(f"{where}: no module-level assignment to {name}")


def _function(tree: ast.Module, qualname: str, where: str) -> ast.FunctionDef:
    scope: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for part in qualname.split("."):
        node = next((n for n in scope if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part), None)
        if node is None:
            raise DataError(f"{where}: no function {qualname}")
        scope = node.body
    if not isinstance(node, ast.FunctionDef):
        raise DataError(f"{where}: {qualname} is not a function")
    return node


def string_literals(function: ast.FunctionDef) -> list[ast.Constant | ast.JoinedStr]:
    """The function's string literals in source order; an f-string counts as one."""
    found: list[ast.Constant | ast.JoinedStr] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            found.append(node)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    for statement in function.body:
        visit(statement)
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def fstring_body(node: ast.JoinedStr) -> str:
    """An f-string as written between its quotes: literal braces doubled, fields as `{expression}`."""
    out = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            out.append(str(value.value).replace("{", "{{").replace("}", "}}"))
        else:
            assert isinstance(value, ast.FormattedValue)
            conversion = "" if value.conversion == -1 else f"!{chr(value.conversion)}"
            spec = f":{fstring_body(value.format_spec)}" if isinstance(value.format_spec, ast.JoinedStr) else ""
            out.append("{" + ast.unparse(value.value) + conversion + spec + "}")
    return "".join(out)


def _inline(tree: ast.Module, source: Inline, where: str) -> Any:
    literals = string_literals(_function(tree, source.function, where))
    if source.position >= len(literals):
        raise DataError(f"{where}: {source.function} has {len(literals)} string literals, "
                        f"no literal #{source.position}")
    node = literals[source.position]
    return {"fstring": fstring_body(node)} if isinstance(node, ast.JoinedStr) else node.value


def build_pack(release_dir: Path | str, allow_unpinned: bool = False) -> dict[str, Any]:
    """Read the release's texts from `release_dir` (a checkout of the release)."""
    release_dir = Path(release_dir)
    if not release_dir.is_dir():
        raise DataError(f"{release_dir}: not a directory (expected a checkout of {RELEASE_REPOSITORY})")
    files: dict[str, Any] = {}
    changed: list[str] = []
    for relative, sources in _sources().items():
        path = release_dir / relative
        if not path.is_file():
            raise DataError(f"{path}: missing; is {release_dir} a checkout of {RELEASE_REPOSITORY}?")
        raw = path.read_bytes()
        digest = hashlib.sha256(raw).hexdigest()
        if digest != RELEASE_FILES[relative]:
            changed.append(relative)
        try:
            tree = ast.parse(raw.decode("utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError) as exc:
            raise DataError(f"{path}: cannot be parsed as Python ({exc})") from None
        texts = {}
        for source in sources:
            texts[source.key] = (_constant(tree, source.name, str(path)) if isinstance(source, Constant)
                                 else _inline(tree, source, str(path)))
        files[relative] = {"sha256": digest, "texts": texts,
                           "text_sha256": {key: text_digest(value) for key, value in texts.items()}}
    if changed and not allow_unpinned:
        raise DataError(
            f"{release_dir}: not the release at commit {RELEASE_COMMIT[:7]} ({len(changed)} file(s) differ, e.g. "
            f"{changed[0]}). Check out that commit (git checkout {RELEASE_COMMIT}), or pass --unpinned to build "
            "a pack anyway (runs with it are labelled custom)."
        )
    return {
        "format": PACK_FORMAT,
        "release": {"repository": RELEASE_REPOSITORY, "commit": RELEASE_COMMIT, "pinned": not changed},
        "files": files,
    }


def write_pack(pack: dict[str, Any], out: Path | str) -> Path:
    """Write the pack atomically (a reader never sees half a file), by the output rule."""
    from PersonalWAB.outputs import write_output

    out = Path(out)
    write_output(out, json.dumps(pack, indent=1, ensure_ascii=False))
    return out


def read_pack(path: Path | str) -> dict[str, Any]:
    """A pack file, checked for shape and for every text the project needs."""
    path = Path(path)
    try:
        pack = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: protocol pack not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise DataError(f"{path}: not a valid JSON protocol pack ({exc})") from None
    if not isinstance(pack, dict) or pack.get("format") != PACK_FORMAT:
        raise DataError(f"{path}: not a protocol pack (expected format {PACK_FORMAT!r}); {REBUILD}")
    release = pack.get("release")
    if not isinstance(release, dict) or release.get("commit") != RELEASE_COMMIT:
        raise DataError(f"{path}: pack of another release commit; this project reads {RELEASE_COMMIT[:7]}")
    files = pack.get("files")
    if not isinstance(files, dict):
        files = {}
    rebuild = f"; the pack was built by another version of this project: {REBUILD}"
    for relative, sources in _sources().items():
        texts = files.get(relative, {}).get("texts")
        if not isinstance(texts, dict):
            raise DataError(f"{path}: no texts of {relative}{rebuild}")
        for source in sources:
            if source.key not in texts:
                raise DataError(f"{path}: {relative} lacks {source.key!r}{rebuild}")
        _check_text_digests(path, relative, files[relative])
    if release.get("pinned") and pack_texts_digest(pack) != RELEASE_TEXTS_SHA256:
        raise DataError(f"{path}: marked as the pinned commit {RELEASE_COMMIT[:7]}, but its texts are not that "
                        f"commit's (the pack was edited); {REBUILD}")
    return pack


def _check_text_digests(path: Path, relative: str, entry: dict[str, Any]) -> None:
    """Every text of one release file as it was read: refused when its digest differs."""
    digests = entry.get("text_sha256")
    if not isinstance(digests, dict):
        raise DataError(f"{path}: records no digests of its texts (a pack of an older version of this project), "
                        f"so an edit to it could not be detected; {REBUILD}")
    edited = [key for key, value in entry["texts"].items() if digests.get(key) != text_digest(value)]
    if edited:
        raise DataError(f"{path}: {relative} text {edited[0]!r} differs from the digest recorded when the pack was "
                        f"built ({len(edited)} text(s) edited); an edited pack is refused: {REBUILD}, or use the "
                        "project's texts (no --protocol_file)")


def release_file_paths() -> list[str]:
    """The release files a pack is read from (what `download_data.sh --with_protocol` fetches)."""
    return list(_sources())


def describe(pack: dict[str, Any], out: Path) -> str:
    count = sum(len(entry["texts"]) for entry in pack["files"].values())
    pinned = "pinned commit" if pack["release"]["pinned"] else "NOT the pinned commit: runs with it are custom"
    return (f"wrote {out}: {count} texts from {len(pack['files'])} files of {pack['release']['repository']} "
            f"({pinned} {pack['release']['commit'][:7]})")
