"""Labels that cannot lie: an edited protocol pack is refused, never run
under the release's name; resume refuses a checkpoint made with other texts; "official" data
is decided from the data's content; `leaderboard validate` never takes a file whose settings
were removed for a standard run."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

import PersonalWAB.protocol.pack as pack_module
from PersonalWAB.data import published
from PersonalWAB.data.loader import load_benchmark_data
from PersonalWAB.engines.text_embedding import cpu_has_bf16
from PersonalWAB.errors import DataError
from PersonalWAB.leaderboard.validate import validate_file
from PersonalWAB.paths import SYNTHETIC_MANIFEST
from PersonalWAB.protocol import protocol_from_pack
from PersonalWAB.protocol.pack import build_pack, read_pack, write_pack
from PersonalWAB.results import read_run_file, resume_mismatches
from PersonalWAB.runner.config import run_resume_keys
from PersonalWAB.runner.cli import main
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run

USER_FILE = "PersonalWAB/envs/user.py"


def quiet(_: str) -> None:
    pass


def edited_copy(pack_path: Path, out: Path, change) -> Path:
    """A copy of a pack with `change` applied to its parsed JSON."""
    content = json.loads(pack_path.read_text(encoding="utf-8"))
    change(content)
    out.write_text(json.dumps(content), encoding="utf-8")
    return out


def append_to_first_text(content: dict) -> None:
    texts = content["files"][USER_FILE]["texts"]
    key = next(iter(texts))
    texts[key] = texts[key] + " (edited)"


@pytest.fixture(scope="module")
def finished(tiny_data_dir, tmp_path_factory) -> Path:
    """A finished run of four tasks with the project's texts."""
    output = tmp_path_factory.mktemp("labels") / "r.json"
    run(RunConfig(data_dir=str(tiny_data_dir), out=str(output), end_index=4), log=quiet)
    return output


# -- protocol packs -----------------------------------------------------------------------------

def test_a_pack_with_one_text_edited_is_refused_naming_the_text(fake_pack, tmp_path):
    edited = edited_copy(fake_pack, tmp_path / "edited.json", append_to_first_text)
    with pytest.raises(DataError, match=rf"{USER_FILE} text '.+' differs from the digest .*1 text\(s\) edited"):
        read_pack(edited)


def test_run_with_an_edited_pack_stops_before_writing(fake_pack, tiny_data_dir, tmp_path, capsys):
    edited = edited_copy(fake_pack, tmp_path / "edited.json", append_to_first_text)
    output = tmp_path / "r.json"
    code = main(["--data_dir", str(tiny_data_dir), "--out", str(output), "--protocol_file", str(edited),
                 "--end_index", "2"])
    assert code == 2 and "an edited pack is refused" in capsys.readouterr().err
    assert not output.exists()


def test_a_pack_without_text_digests_says_it_is_of_an_older_format(fake_pack, tmp_path):
    def drop_digests(content: dict) -> None:
        for entry in content["files"].values():
            entry.pop("text_sha256")

    older = edited_copy(fake_pack, tmp_path / "older.json", drop_digests)
    with pytest.raises(DataError, match="records no digests of its texts .*older version.*rebuild it"):
        read_pack(older)


def test_a_pack_marked_pinned_must_hold_the_pinned_commits_texts(fake_release_dir, tmp_path, monkeypatch):
    """Even with its digests recomputed, a pack whose texts are not the release's never runs as
    `release@<commit>`: the stand-in tree is made to pass as the pinned checkout."""
    digests = {relative: hashlib.sha256((fake_release_dir / relative).read_bytes()).hexdigest()
               for relative in pack_module.RELEASE_FILES}
    monkeypatch.setattr(pack_module, "RELEASE_FILES", digests)
    pack = build_pack(fake_release_dir)
    assert pack["release"]["pinned"] is True
    path = write_pack(pack, tmp_path / "pinned.json")
    with pytest.raises(DataError, match="marked as the pinned commit 23ff65c, but its texts are not"):
        protocol_from_pack(path)


def test_an_unedited_pack_still_loads(fake_pack):
    assert protocol_from_pack(fake_pack).name == "release@unpinned"


# -- resume with other texts ---------------------------------------------------------------------

def test_resume_with_other_texts_is_refused_naming_both(finished, fake_pack, tiny_data_dir, tmp_path, capsys):
    before = finished.read_bytes()
    output = tmp_path / "other.json"
    code = main(["--data_dir", str(tiny_data_dir), "--end_index", "4", "--resume_from", str(finished),
                 "--out", str(output), "--protocol_file", str(fake_pack)])
    error = capsys.readouterr().err
    assert code == 2 and "protocol: 'project' (texts digest" in error and "'release@unpinned' (texts digest" in error
    assert finished.read_bytes() == before and not output.exists()


def test_texts_of_the_same_name_but_another_digest_differ():
    previous = {"protocol": {"texts": "release@unpinned"}, "protocol_texts_digest": "aaaa"}
    current = {"protocol": {"texts": "release@unpinned"}, "protocol_texts_digest": "bbbb"}
    assert resume_mismatches(previous, current, run_resume_keys()) == [
        "protocol: 'release@unpinned' (texts digest aaaa) in the file, 'release@unpinned' (texts digest bbbb) now"]
    older = {"protocol": {"texts": "release@unpinned"}}  # written before the digest was recorded
    assert resume_mismatches(older, current, run_resume_keys()) == []


# -- official data --------------------------------------------------------------------------------

@pytest.fixture()
def unmarked_copy(tiny_data_dir, tmp_path) -> Path:
    """The tiny data without its synthetic manifest: files that say nothing of where they come from."""
    copy = tmp_path / "unmarked"
    shutil.copytree(tiny_data_dir, copy, ignore=shutil.ignore_patterns("cache", "indexes", "checkpoint*"))
    (copy / SYNTHETIC_MANIFEST).unlink()
    profiles = copy / "user_profiles.json"  # and the generator's marker
    profiles.write_text(json.dumps({user_id: {"user_profile": entry["user_profile"]}
                                    for user_id, entry in json.loads(profiles.read_text()).items()}))
    return copy


def test_data_without_a_manifest_is_custom_unless_it_has_the_published_counts(unmarked_copy, monkeypatch):
    data = load_benchmark_data(unmarked_copy)
    assert data.synthetic_manifest is None
    assert data.source == "custom" and not data.is_official
    counts = published.count_summary(data)
    fitting = published.OfficialCounts(users=counts["users"], train=counts["train"], test=counts["test"],
                                      test_types=counts["test_types"])
    monkeypatch.setattr(published, "PUBLISHED_COUNTS", fitting)
    assert data.source == "official" and data.is_official


def test_a_run_on_custom_data_is_labelled_custom(unmarked_copy, tmp_path, capsys):
    output = tmp_path / "r.json"
    assert main(["--data_dir", str(unmarked_copy), "--out", str(output), "--end_index", "2",
                 "--search_backend", "bm25s"]) == 0
    assert read_run_file(output).run_args["data_source"] == "custom"
    assert "custom data, not the official benchmark" in capsys.readouterr().out


# -- leaderboard validate -------------------------------------------------------------------------

def _empty_run_args(header: dict) -> None:
    header["run_args"] = {}


def _drop_run_args(header: dict) -> None:
    del header["run_args"]


@pytest.mark.parametrize(("change", "reason"), [
    (_empty_run_args, "run_args is empty: the run's settings are unknown"),
    (_drop_run_args, "element 0 is a header without run_args"),
], ids=["emptied", "missing"])
def test_validate_refuses_a_header_whose_run_args_are_gone(finished, tiny_data, tmp_path, change, reason):
    content = json.loads(finished.read_text())
    change(content[0])
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(content))
    report = validate_file(edited, tiny_data)
    assert not report.valid and report.summary()["protocol"] == "custom"
    assert any(reason in line for line in report.lines())


def _relabelled(finished: Path, folder: Path, digest: str, standard: bool) -> Path:
    """The run's file as a hand would relabel it: the release's texts, no departures, `digest`."""
    content = json.loads(finished.read_text())
    run_args = content[0]["run_args"]
    run_args.update(agent_strategy="function_calling", model="gpt-4o-mini", memory_length=10,
                    protocol={"texts": "release@23ff65c", "departures": [], "standard": standard},
                    protocol_texts_digest=digest)
    path = folder / f"relabelled-{digest}-{standard}.json"
    path.write_text(json.dumps(content))
    return path


def test_a_label_of_the_release_texts_with_an_unknown_digest_is_custom_never_standard(finished, tmp_path):
    from PersonalWAB.leaderboard.summarize import summarize_files, tables
    from PersonalWAB.leaderboard.validate import protocol_label
    from PersonalWAB.protocol.spec import RELEASE_PROTOCOL_DIGEST

    forged = _relabelled(finished, tmp_path, "0123456789abcdef", standard=True)
    report = validate_file(forged)
    assert not report.valid and report.summary()["protocol"] == "custom"
    assert any("unknown texts (named release@23ff65c, but protocol_texts_digest '0123456789abcdef' is not the pinned "
               f"release's {RELEASE_PROTOCOL_DIGEST})" in line for line in report.lines())
    with pytest.raises(DataError):
        summarize_files([forged])  # an invalid file is refused, never ranked
    quiet_forgery = _relabelled(finished, tmp_path, "0123456789abcdef", standard=False)
    rows, _ = summarize_files([quiet_forgery])
    assert ["custom protocol" in title for title, _ in tables(rows)] == [True]
    genuine = json.loads(_relabelled(finished, tmp_path, RELEASE_PROTOCOL_DIGEST, standard=True).read_text())
    assert protocol_label(genuine[0]["run_args"]) == ("standard", [])
    older = {**genuine[0]["run_args"]}
    del older["protocol_texts_digest"]  # a label with no digest names no texts the project knows
    assert protocol_label(older)[0] == "custom"


def test_the_pinned_digest_is_checked_against_a_pinned_pack(fake_release_dir, tmp_path, monkeypatch):
    """A pack of the pinned commit's texts whose digest is not the pinned one (renderers changed
    without the pin) is refused, so a run with it is never labelled custom by mistake."""
    import PersonalWAB.protocol as protocol_module

    digests = {relative: hashlib.sha256((fake_release_dir / relative).read_bytes()).hexdigest()
               for relative in pack_module.RELEASE_FILES}
    monkeypatch.setattr(pack_module, "RELEASE_FILES", digests)
    pack = build_pack(fake_release_dir)
    monkeypatch.setattr(pack_module, "RELEASE_TEXTS_SHA256", pack_module.pack_texts_digest(pack))
    path = write_pack(pack, tmp_path / "pinned.json")
    with pytest.raises(DataError, match="update RELEASE_PROTOCOL_DIGEST"):
        protocol_from_pack(path)
    monkeypatch.setattr(protocol_module, "RELEASE_PROTOCOL_DIGEST", protocol_module.Protocol(
        protocol_module.texts_from_pack(pack), "release@23ff65c").texts_digest)
    assert protocol_from_pack(path).is_pinned_release


def test_validate_refuses_a_checkpoint_with_emptied_run_args(finished, tiny_data, tmp_path):
    content = json.loads(finished.read_text())
    checkpoint = tmp_path / "checkpoint.json"
    checkpoint.write_text(json.dumps([{"run_args": {}, "unfinished": True}, *content[1:]]))
    report = validate_file(checkpoint, tiny_data)
    assert not report.valid and "custom" in report.flags


@pytest.mark.parametrize(("memory", "departs"), [("relevant", True), ("taskspe", True), ("last", False)])
def test_bf16_embeddings_depart_from_the_release_where_memory_ranks_by_them(memory, departs):
    from PersonalWAB.runner.labels import setting_departures

    settings = {"agent_strategy": "function_calling", "agent_memory": memory, "memory_length": 10}
    line = "embedding_precision bf16: memory ranked by bf16 MiniLM vectors, not the release's fp32"
    departures = setting_departures({**settings, "embedding_precision": "bf16"})
    assert any(d.startswith(line) for d in departures) == departs
    assert setting_departures({**settings, "embedding_precision": "fp32"}) == setting_departures(settings) == []


@pytest.mark.skipif(not cpu_has_bf16(), reason="this CPU has no bf16 instructions")
def test_a_bf16_run_records_its_departure_and_what_computed_its_vectors(tiny_engines, tiny_data_dir, tmp_path):
    from PersonalWAB.runner.config import RunConfig
    from PersonalWAB.runner.execute import run

    config = RunConfig(data_dir=str(tiny_data_dir), agent_memory="relevant", embedding_precision="bf16", end_index=2,
                       out=str(tmp_path / "bf16.json"), quiet=True)
    header, _, _ = run(config, log=lambda _: None)
    run_args = header["run_args"]
    assert run_args["embedding_precision"] == "bf16" and run_args["memory_embedding_backend"] == "openvino"
    assert not run_args["protocol"]["standard"]
    assert any(d.startswith("embedding_precision bf16:") for d in run_args["protocol"]["departures"])
