"""Where data comes from is decided from the files (against the published sizes,
`PersonalWAB.data.published`), never from a name or a missing manifest:
official only when they match the published statistics and carry no synthetic marker, a
synthetic folder is checked against its manifest's counts, and a part gone is named."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from PersonalWAB.cli import run_command
from PersonalWAB.data import published
from PersonalWAB.data.loader import SYNTHETIC_MARKER, load_benchmark_data
from PersonalWAB.data.validate import main as validate
from PersonalWAB.errors import DataError
from PersonalWAB.paths import SYNTHETIC_MANIFEST
from PersonalWAB.results import read_run_file
from PersonalWAB.runner.cli import main

from conftest import rewrite


def _fit_published_counts(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the tiny data's users and instructions the 'published' ones for this test."""
    counts = published.count_summary(load_benchmark_data(data_dir))
    monkeypatch.setattr(published, "PUBLISHED_COUNTS", published.OfficialCounts(
        users=counts["users"], train=counts["train"], test=counts["test"], test_types=counts["test_types"]))


@pytest.fixture()
def unmarked(data_copy: Path) -> Path:
    """The tiny data with neither its manifest nor the generator's marker."""
    (data_copy / SYNTHETIC_MANIFEST).unlink()
    rewrite(data_copy / "user_profiles.json",
            lambda content: [entry.pop(SYNTHETIC_MARKER) for entry in content.values()])
    return data_copy


def test_the_generator_marks_the_files_themselves(tiny_data) -> None:
    assert tiny_data.synthetic_marker


def test_synthetic_files_without_their_manifest_are_never_official(data_copy: Path, monkeypatch, capsys) -> None:
    (data_copy / SYNTHETIC_MANIFEST).unlink()
    _fit_published_counts(data_copy, monkeypatch)
    data = load_benchmark_data(data_copy, reload=True)
    assert data.source == "custom" and not data.is_official
    assert "synthetic generator's marker" in (data.not_official_because() or "")
    assert validate(["--data_dir", str(data_copy)]) == 0
    out = capsys.readouterr().out
    assert "unknown origin" in out and "official)" not in out


def test_unmarked_files_with_the_published_counts_are_official(unmarked: Path, monkeypatch) -> None:
    _fit_published_counts(unmarked, monkeypatch)
    assert load_benchmark_data(unmarked, reload=True).source == "official"


@pytest.mark.parametrize("part", ["user_history_part_2.json", "all_products_part_2.json"])
def test_data_with_the_published_counts_that_lacks_a_part_is_refused_naming_it(unmarked: Path, monkeypatch,
                                                                               part: str) -> None:
    """It would pass for the release with its products or histories halved: refused, not merely custom."""
    _fit_published_counts(unmarked, monkeypatch)
    (unmarked / part).unlink()
    with pytest.raises(DataError, match=rf"{part} missing: the data has the release's published users and "
                                        "instructions, and the release comes in 2 such parts"):
        load_benchmark_data(unmarked, reload=True)


def test_a_history_emptied_of_half_its_users_is_not_official(unmarked: Path, monkeypatch) -> None:
    _fit_published_counts(unmarked, monkeypatch)
    rewrite(unmarked / "user_history_part_2.json", lambda content: content.clear())
    assert "have no history" in (load_benchmark_data(unmarked, reload=True).not_official_because() or "")


def test_a_missing_history_part_is_refused_against_the_manifest(data_copy: Path) -> None:
    manifest = json.loads((data_copy / SYNTHETIC_MANIFEST).read_text())
    (data_copy / "user_history_part_2.json").unlink()
    with pytest.raises(DataError, match=rf"behaviours where .*{SYNTHETIC_MANIFEST} says "
                                        rf"{manifest['counts']['behaviours']}; found user_history_part_1.json"):
        load_benchmark_data(data_copy, reload=True)


def test_a_missing_product_part_is_named(data_copy: Path, capsys) -> None:
    (data_copy / "all_products_part_2.json").unlink()
    assert run_command(validate, ["--data_dir", str(data_copy)]) == 2
    err = capsys.readouterr().err
    assert "products where" in err and "found all_products_part_1.json: is a part missing?" in err


def test_a_manifest_claiming_another_scale_is_refused(data_copy: Path) -> None:
    rewrite(data_copy / SYNTHETIC_MANIFEST, lambda manifest: manifest.update(scale="full"))
    with pytest.raises(DataError, match=r"scale 'full' has the published counts, but the data holds 16 users"):
        load_benchmark_data(data_copy, reload=True)


def test_duplicated_behaviours_are_named_with_their_place(data_copy: Path) -> None:
    path = data_copy / "user_history_part_1.json"
    user = next(iter(json.loads(path.read_text())))
    rewrite(path, lambda histories: histories[user].append(histories[user][0]))
    rewrite(data_copy / SYNTHETIC_MANIFEST, lambda manifest: manifest["counts"].update(
        behaviours=manifest["counts"]["behaviours"] + 1))
    warnings = load_benchmark_data(data_copy, reload=True).warnings
    assert any(re.search(rf"user_history_part_1.json.*\[{user!r}\]\[\d+\]: repeats \[{user!r}\]\[0\]", w)
               for w in warnings), warnings


def test_an_empty_instruction_is_refused_with_its_place(data_copy: Path) -> None:
    rewrite(data_copy / "user_instructions.json", lambda content: content["test"][3].update(task="  "))
    with pytest.raises(DataError, match=r"user_instructions.json: \['test'\]\[3\].task: is empty"):
        load_benchmark_data(data_copy, reload=True)


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
