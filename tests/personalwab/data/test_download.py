"""The downloader against a local HTTP server that mirrors the GitHub media layout.

The served files are a tiny release in the official schema, so the checks use small
expected counts instead of the published ones.
"""

from __future__ import annotations

import functools
import json
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from PersonalWAB.data import download
from PersonalWAB.data.download import OfficialCounts, download_official, verify_official
from PersonalWAB.data.loader import PARSED_CACHE
from PersonalWAB.errors import DataError

REPO_PREFIX = "HongruCai/PersonalWAB/main"
DATA_PREFIX = "PersonalWAB/envs/pwab/data"
SMALL = OfficialCounts(users=2, train=2, test=3, test_types={"search": 1, "recommend": 1, "review": 1}, products=4)
POINTER = b"version https://git-lfs.github.com/spec/v1\noid sha256:0123abcd\nsize 123456\n"


# ---------------------------------------------------------------- a tiny release


def _product(asin: str, price: object) -> dict:
    return {
        "main_category": "All Beauty",
        "title": f"Rose hand cream {asin}",
        "average_rating": 4.4,
        "rating_number": 57,
        "features": ["Non-greasy", "50 ml tube"],
        "description": ["A light cream for dry hands."],
        "price": price,
        "store": "Petal Works",
        "categories": ["Beauty", "Hand Care"],
        "details": {"Brand": "Petal Works", "Item Volume": "50 ml"},
        "parent_asin": asin,
    }


def _behaviour(product: dict, rating: float, timestamp: int, split: str) -> dict:
    review = {
        "rating": rating,
        "title": "Nice",
        "text": "Soaks in quickly and smells mild.",
        "parent_asin": product["parent_asin"],
        "timestamp": timestamp,
    }
    return {"product_info": product, "review": review, "split": split}


def _task(user: str, kind: str, behaviour: dict) -> dict:
    target = {"product_info": behaviour["product_info"], "review": behaviour["review"]}
    text = f"{kind} task of {user} at {behaviour['review']['timestamp']}"
    return {"user_id": user, "task": text, "type": kind, "timestamp": behaviour["review"]["timestamp"], "target": target}


def _profile(gender: str) -> dict:
    return {
        "user_profile": {
            "Gender": gender,
            "Age": "25-34",
            "Occupation": "Nurse",
            "Price Sensitivity": "Medium",
            "Shopping Interest": "Skin care",
            "Brand Preference": "Petal Works, Dew Lab",
            "Diversity Preference": "Low",
            "Interaction Complexity": "Medium",
            "Tone and Style": "Friendly and brief",
            "Item Reference": "Mentions earlier purchases",
            "Focus Aspect": "Scent",
        }
    }


def _release() -> dict[str, bytes]:
    """File name -> bytes of a two-user release split into two parts each."""
    products = [
        _product("B000000001", 12.5),
        _product("B000000002", None),
        _product("B000000003", "None"),
        _product("B000000004", 7),
    ]
    alice = [
        _behaviour(products[0], 5.0, 1_600_000_000_000, "history"),
        _behaviour(products[1], 4.0, 1_600_000_100_000, "train"),
        _behaviour(products[2], 3.0, 1_600_000_200_000, "test"),
    ]
    bob = [
        _behaviour(products[3], 2.0, 1_600_000_300_000, "history"),
        _behaviour(products[0], 4.0, 1_600_000_400_000, "train"),
        _behaviour(products[1], 5.0, 1_600_000_500_000, "test"),
        _behaviour(products[2], 4.0, 1_600_000_600_000, "test"),
    ]
    instructions = {
        "train": [_task("ALICE", "search", alice[1]), _task("BOB", "review", bob[1])],
        "test": [_task("ALICE", "search", alice[2]), _task("BOB", "recommend", bob[2]), _task("BOB", "review", bob[3])],
    }
    files = {
        "all_products_part_1.json": {p["parent_asin"]: p for p in products[:3]},
        "all_products_part_2.json": {p["parent_asin"]: p for p in products[3:]},
        "user_history_part_1.json": {"ALICE": alice},
        "user_history_part_2.json": {"BOB": bob},
        "user_instructions.json": instructions,
        "user_profiles.json": {"ALICE": _profile("Female"), "BOB": _profile("Male")},
    }
    return {name: json.dumps(content, indent=1).encode() for name, content in files.items()}


ARTIFACTS = {
    "PersonalWAB/envs/pwab/functions/recommender/checkpoint/pwab.pth": b"PK\x03\x04" + bytes(range(256)) * 8,
    "PersonalWAB/envs/pwab/functions/recommender/data/1000_ids.json": b'{"B000000001": 1, "B000000002": 2}',
}


# ---------------------------------------------------------------- the server


class _Handler(SimpleHTTPRequestHandler):
    """Serves the site folder, records each request, and plays scripted failures."""

    def do_GET(self) -> None:
        if not self._scripted():
            super().do_GET()

    def do_HEAD(self) -> None:
        if not self._scripted():
            super().do_HEAD()

    def _scripted(self) -> bool:
        name = self.path.rsplit("/", 1)[-1]
        self.server.requests.append((self.command, name))
        plan = self.server.failures.get(name)
        if not plan:
            return False
        failure = plan.pop(0)
        if failure == "short":  # announce the full size, send half, hang up
            body = (self.server.site / self.path.lstrip("/")).read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
        else:
            self.send_error(failure)
        return True

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


class Server:
    def __init__(self, site: Path, httpd: ThreadingHTTPServer) -> None:
        self.site = site
        self.httpd = httpd
        self.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/{REPO_PREFIX}"
        self.data = site / REPO_PREFIX / DATA_PREFIX

    @property
    def requests(self) -> list[tuple[str, str]]:
        return self.httpd.requests

    def fail(self, name: str, *failures: int | str) -> None:
        self.httpd.failures[name] = list(failures)

    def put(self, name: str, body: bytes) -> None:
        (self.data / name).write_bytes(body)


@pytest.fixture
def server(tmp_path: Path):
    site = tmp_path / "site"
    data = site / REPO_PREFIX / DATA_PREFIX
    data.mkdir(parents=True)
    for name, body in _release().items():
        (data / name).write_bytes(body)
    for path, body in ARTIFACTS.items():
        (site / REPO_PREFIX / path).parent.mkdir(parents=True, exist_ok=True)
        (site / REPO_PREFIX / path).write_bytes(body)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(site)))
    httpd.requests, httpd.failures, httpd.site = [], {}, site
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield Server(site, httpd)
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


def fetch(server: Server, dest: Path, **options) -> dict:
    options = {"expected": SMALL, "backoff": 0.0, "timeout": 5.0, "log": lambda line: None, **options}
    return download_official(dest, base_url=server.base_url, **options)


def _gets(server: Server, name: str) -> int:
    return server.requests.count(("GET", name))


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


# ---------------------------------------------------------------- tests


def test_full_download_is_byte_identical_and_verified(server: Server, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    summary = fetch(server, dest, with_artifacts=True)

    release = _release()
    # the check loads the data, which leaves the loader's parsed-data cache behind
    assert _files(dest) == set(release) | {"recommender/pwab.pth", "recommender/1000_ids.json",
                                           f"cache/{PARSED_CACHE}"}
    for name, body in release.items():
        assert (dest / name).read_bytes() == body
    assert (dest / "recommender" / "pwab.pth").read_bytes() == next(iter(ARTIFACTS.values()))
    assert summary["users"] == 2 and summary["products"] == 4 and summary["behaviours"] == 7
    assert (summary["train"], summary["test"]) == (2, 3)
    assert summary["test_types"] == {"search": 1, "recommend": 1, "review": 1}
    assert (summary["product_parts"], summary["history_parts"]) == (2, 2)
    assert sorted(summary["downloaded"]) == sorted([*release, "pwab.pth", "1000_ids.json"])
    assert summary["warnings"] == []


def test_parts_are_probed_until_404(server: Server, tmp_path: Path) -> None:
    server.put("all_products_part_3.json", b'{"B000000009": ' + json.dumps(_product("B000000009", 1.0)).encode() + b"}")
    summary = fetch(server, tmp_path / "dest", expected=OfficialCounts(**{**SMALL.__dict__, "products": 5}))

    assert summary["product_parts"] == 3 and summary["products"] == 5
    product_requests = [name for _, name in server.requests if name.startswith("all_products")]
    assert product_requests == [f"all_products_part_{n}.json" for n in (1, 2, 3, 4)]
    history_requests = [name for _, name in server.requests if name.startswith("user_history")]
    assert history_requests == [f"user_history_part_{n}.json" for n in (1, 2, 3)]


def test_release_without_parts_is_an_error(server: Server, tmp_path: Path) -> None:
    (server.data / "user_history_part_1.json").unlink()
    with pytest.raises(DataError, match=r"user_history_part_1\.json: not found \(404\)"):
        fetch(server, tmp_path / "dest")


def test_lfs_pointer_is_a_clear_error_and_leaves_nothing(server: Server, tmp_path: Path) -> None:
    server.put("user_instructions.json", POINTER)
    dest = tmp_path / "dest"
    with pytest.raises(DataError) as caught:
        fetch(server, dest)
    message = str(caught.value)
    assert "user_instructions.json" in message and "Git LFS pointer" in message
    assert "git lfs pull" in message and "Google Drive" in message
    assert _files(dest) == {"user_profiles.json"}  # fetched before; no pointer, no .part


def test_server_error_is_retried(server: Server, tmp_path: Path) -> None:
    server.fail("user_profiles.json", 500)
    server.fail("user_history_part_2.json", 503, "short")
    lines: list[str] = []
    fetch(server, tmp_path / "dest", log=lines.append)
    assert _gets(server, "user_profiles.json") == 2
    assert _gets(server, "user_history_part_2.json") == 3
    assert sum("retrying" in line for line in lines) == 3
    assert not any(p.name.endswith(".part") for p in (tmp_path / "dest").iterdir())


def test_persistent_server_error_gives_up(server: Server, tmp_path: Path) -> None:
    server.fail("user_profiles.json", 502, 502, 502)
    with pytest.raises(DataError, match=r"user_profiles\.json: failed after 3 attempts; last error: HTTP 502"):
        fetch(server, tmp_path / "dest", retries=2)
    assert _gets(server, "user_profiles.json") == 3


def test_missing_required_file_is_not_retried(server: Server, tmp_path: Path) -> None:
    (server.data / "user_profiles.json").unlink()
    with pytest.raises(DataError, match=r"user_profiles\.json: not found \(404\); check --base_url"):
        fetch(server, tmp_path / "dest")
    assert _gets(server, "user_profiles.json") == 1


def test_truncated_json_names_the_file(server: Server, tmp_path: Path) -> None:
    body = _release()["user_history_part_2.json"]
    server.put("user_history_part_2.json", body[: len(body) // 2])
    dest = tmp_path / "dest"
    with pytest.raises(DataError, match=r"user_history_part_2\.json: not valid JSON .*was not saved"):
        fetch(server, dest)
    assert "user_history_part_2.json" not in _files(dest)
    assert not any(name.endswith(".part") for name in _files(dest))


def test_wrong_shape_names_the_file_and_key(server: Server, tmp_path: Path) -> None:
    profiles = json.loads(_release()["user_profiles.json"])
    del profiles["BOB"]["user_profile"]["Focus Aspect"]
    server.put("user_profiles.json", json.dumps(profiles).encode())
    with pytest.raises(DataError, match=r"user_profiles\.json: \['BOB'\]\.user_profile: missing key 'Focus Aspect'"):
        fetch(server, tmp_path / "dest")


def test_count_mismatch_is_an_error(server: Server, tmp_path: Path) -> None:
    wrong = OfficialCounts(users=3, train=2, test=3, test_types={"search": 2, "recommend": 1}, products=4)
    with pytest.raises(DataError) as caught:
        fetch(server, tmp_path / "dest", expected=wrong)
    message = str(caught.value)
    assert "user_profiles.json: 2 users, the release has 3" in message
    assert "user_instructions.json: test instruction types" in message


def test_product_count_difference_only_warns(server: Server, tmp_path: Path) -> None:
    summary = fetch(server, tmp_path / "dest", expected=OfficialCounts(**{**SMALL.__dict__, "products": 35772}))
    assert len(summary["warnings"]) == 1 and "35,772" in summary["warnings"][0]


def test_rerun_keeps_valid_files_and_force_fetches_again(server: Server, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    fetch(server, dest, with_artifacts=True)
    stamps = {name: (dest / name).stat().st_mtime_ns for name in _release()}
    server.requests.clear()
    server.fail("all_products_part_1.json", 405)  # a server without HEAD gets a GET it can abandon

    summary = fetch(server, dest, with_artifacts=True)
    assert summary["downloaded"] == [] and len(summary["kept"]) == 8
    assert [r for r in server.requests if r[0] == "GET"] == [
        ("GET", "all_products_part_1.json"),
        ("GET", "all_products_part_3.json"),
        ("GET", "user_history_part_3.json"),
    ]
    assert {name: (dest / name).stat().st_mtime_ns for name in _release()} == stamps

    summary = fetch(server, dest, force=True)
    assert sorted(summary["downloaded"]) == sorted(_release())


def test_pointer_left_by_a_clone_is_replaced(server: Server, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "user_profiles.json").write_bytes(POINTER)
    summary = fetch(server, dest)
    assert "user_profiles.json" in summary["downloaded"]
    assert (dest / "user_profiles.json").read_bytes() == _release()["user_profiles.json"]


def test_stale_local_part_is_reported(server: Server, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    fetch(server, dest)
    (dest / "all_products_part_3.json").write_bytes((dest / "all_products_part_2.json").read_bytes())
    with pytest.raises(DataError, match=r"all_products_part_3\.json but the release has only parts 1-2"):
        fetch(server, dest)


def test_verify_only_on_an_existing_folder(server: Server, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    fetch(server, dest, with_artifacts=True)
    summary = verify_official(dest, SMALL, with_artifacts=True)
    assert summary["users"] == 2 and summary["test"] == 3

    (dest / "user_history_part_2.json").rename(dest / "user_history_part_3.json")
    with pytest.raises(DataError, match=r"numbered 1\.\.N without gaps, found parts \[1, 3\]"):
        verify_official(dest, SMALL)


def test_cli_download_and_verify_only(server: Server, tmp_path: Path, monkeypatch, capsys) -> None:
    from PersonalWAB.data.__main__ import main

    monkeypatch.setattr(download, "PUBLISHED_COUNTS", SMALL)
    dest = tmp_path / "dest"
    common = ["--out", str(dest), "--timeout", "5"]
    assert main(["download", "--base_url", server.base_url, "--with_artifacts", *common]) == 0
    out = capsys.readouterr().out
    assert "user_profiles.json" in out and "downloaded" in out
    assert "verified" in out and "2 users" in out
    assert (dest / "recommender" / "1000_ids.json").read_bytes() == list(ARTIFACTS.values())[1]

    assert main(["download", "--verify_only", *common]) == 0
    assert "verified" in capsys.readouterr().out

    assert main(["download", "--verify_only", "--out", str(tmp_path / "empty")]) == 2
    assert "empty" in capsys.readouterr().err


def test_download_old_dest_spelling_warns_and_config_gives_the_flags_settings(tmp_path: Path, capsys) -> None:
    from PersonalWAB.data.__main__ import main
    from PersonalWAB.settings import parse

    empty = tmp_path / "empty"
    assert main(["download", "--verify_only", "--dest", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "--dest is deprecated; use --out" in err and str(empty) in err  # the old flag's value was used
    config = tmp_path / "download.yaml"
    config.write_text(f"dest: {empty}\nwith_artifacts: yes\ntimeout: 5\nretries: 1\n")
    flags = ["--out", str(empty), "--with_artifacts", "--timeout", "5", "--retries", "1"]
    assert parse(download.DownloadSettings, ["--config", str(config)]) == parse(download.DownloadSettings, flags)
