"""The protocol module: the release pack read from a (stand-in) release checkout, an edited pack
or one that claims texts it does not hold refused (never run under the release's name), the
project's own texts, and golden tests of every renderer."""

import hashlib
import json
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import PersonalWAB.protocol.pack as pack_module
from PersonalWAB.errors import DataError
from PersonalWAB.memory import system_prompt
from PersonalWAB.protocol import check_shapes, load_protocol, project_protocol, protocol_from_pack
from PersonalWAB.protocol.pack import build_pack, read_pack, release_file_paths, write_pack
from PersonalWAB.protocol.spec import RELEASE_COMMIT, TEXTS
from PersonalWAB.runner.cli import main
from release_fixture import FAKE_TEXTS, write_release_tree

PRODUCT = {"main_category": "Grocery", "title": "Green Tea", "average_rating": 4.5, "rating_number": 10,
           "features": ["Loose leaf", "It's fresh"], "description": ["From Japan"], "price": 9.99, "store": "TeaCo",
           "categories": ["Grocery", "Tea"], "details": {"Weight": "100 g", "Origin": "Shizuoka"},
           "parent_asin": "B000TEA001"}
FIELDS = ("T=Green Tea|A=B000TEA001|R=4.5|N=10|P=9.99|S=TeaCo|F=['Loose leaf', \"It's fresh\"]|D=['From Japan']|"
          "X={\"Weight\": \"100 g\", \"Origin\": \"Shizuoka\"}|C=Grocery")
BEHAVIOUR = {"product_info": PRODUCT, "split": "history",
             "review": {"rating": 5.0, "title": "Great", "text": "Lovely <TITLE> tea.", "parent_asin": "B000TEA001",
                        "timestamp": 1600000000000}}
TASK = {"user_id": "U1", "task": "Help me review my tea.", "type": "review", "timestamp": 1700000000000,
        "target": {"product_info": PRODUCT, "review": BEHAVIOUR["review"]}}
PROFILE = {"Gender": "Female", "Age": "25-34", "Occupation": "Nurse", "Price Sensitivity": "High",
           "Shopping Interest": "Tea", "Brand Preference": "TeaCo", "Diversity Preference": "Low",
           "Interaction Complexity": "Medium", "Tone and Style": "Warm", "Item Reference": "Brands",
           "Focus Aspect": "Taste"}


def test_pack_from_a_release_tree_holds_its_texts(fake_pack, fake_protocol):
    pack = read_pack(fake_pack)
    assert pack["release"] == {"repository": "HongruCai/PersonalWAB", "commit": RELEASE_COMMIT, "pinned": False}
    assert set(pack["files"]) == set(release_file_paths())
    assert pack["files"]["PersonalWAB/envs/user.py"]["texts"]["NoUserSimulationEnv.reset#0"] == \
        {"fstring": "R:USER {instruction['user_id']}: {instruction['task']}"}
    assert fake_protocol.name == "release@unpinned" and not fake_protocol.is_pinned_release
    assert fake_protocol.texts == FAKE_TEXTS


def test_a_tree_at_another_commit_is_refused_unless_unpinned(fake_release_dir, tmp_path):
    with pytest.raises(DataError, match=r"not the release at commit 23ff65c .*--unpinned"):
        build_pack(fake_release_dir)
    missing = write_release_tree(tmp_path / "partial")
    (missing / "PersonalWAB/agents/utils.py").unlink()
    with pytest.raises(DataError, match=r"agents/utils.py: missing"):
        build_pack(missing, allow_unpinned=True)


def test_a_moved_literal_is_caught_by_the_renderers_shape_check(tmp_path):
    moved = dict(FAKE_TEXTS, **{"memory.behaviour": "R:MEM without placeholders"})
    built = build_pack(write_release_tree(tmp_path / "tree", moved), allow_unpinned=True)
    pack = write_pack(built, tmp_path / "p.json")
    with pytest.raises(DataError, match=r"text 'memory.behaviour' has \[\], the renderers need"):
        protocol_from_pack(pack)


def test_bad_pack_files_are_named(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DataError, match="bad.json: not a valid JSON protocol pack"):
        read_pack(bad)
    bad.write_text(json.dumps({"format": "other"}))
    with pytest.raises(DataError, match="not a protocol pack"):
        read_pack(bad)
    with pytest.raises(DataError, match="protocol pack not found"):
        read_pack(tmp_path / "absent.json")


def test_a_pack_of_another_project_version_asks_for_a_rebuild(fake_pack, tmp_path):
    pack = json.loads(fake_pack.read_text(encoding="utf-8"))
    entry = next(iter(pack["files"].values()))
    entry["texts"].pop(next(iter(entry["texts"])))
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps(pack), encoding="utf-8")
    with pytest.raises(DataError, match=r"stale.json: .* lacks .*another version of this project: rebuild it"):
        read_pack(stale)


def test_cli_builds_the_pack(fake_release_dir, tmp_path, capsys):
    from PersonalWAB.data.__main__ import main

    out = tmp_path / "pack.json"
    assert main(["protocol", "--release_dir", str(fake_release_dir), "--out", str(out)]) == 2
    assert "--unpinned" in capsys.readouterr().err and not out.exists()
    assert main(["protocol", "--release_dir", str(fake_release_dir), "--out", str(out), "--unpinned"]) == 0
    assert "NOT the pinned commit" in capsys.readouterr().out
    assert load_protocol(out).texts == FAKE_TEXTS


def test_download_builds_the_pack_from_served_release_files(fake_release_dir, tmp_path):
    from PersonalWAB.data.download import download_protocol

    handler = partial(SimpleHTTPRequestHandler, directory=str(fake_release_dir))
    handler.log_message = lambda *args: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        # the served files are not the pinned commit's: the download refuses them
        with pytest.raises(DataError, match="not the release at commit"):
            download_protocol(tmp_path, base_url=base, retries=0, log=lambda _: None)
        assert not (tmp_path / "release_protocol.json").exists()
    finally:
        server.shutdown()
        server.server_close()


def test_project_texts_have_every_text_in_the_renderers_shapes(fake_protocol):
    project = project_protocol()
    assert project.name == "project" and set(project.texts) == set(TEXTS)
    check_shapes(fake_protocol.texts, "fake")  # the fake texts share the project's shapes
    assert load_protocol() is load_protocol()  # no pack placed (tests): the project's texts, loaded once
    assert load_protocol().name == "project"


# --- golden tests of the renderers (fake release texts) --------------------------------------------------


def test_product_blocks(fake_protocol):
    assert fake_protocol.product_block(PRODUCT) == f"\nR:{FIELDS}\n"
    assert fake_protocol.recommendation_block(PRODUCT, 3) == f"\nR:rec 3:{FIELDS}\n"
    assert fake_protocol.details_block(PRODUCT) == f"\nR:details:{FIELDS}\n"
    assert fake_protocol.search_result(0, "CONTENTS") == "R:hit 0:\nCONTENTS\n"
    unknown_price = dict(PRODUCT, price="None", store=None)
    assert "|P=None|S=None|" in fake_protocol.product_block(unknown_price)


def test_first_observation_and_errors(fake_protocol):
    search = dict(TASK, type="search", task="Find tea")
    assert fake_protocol.first_observation(search) == "R:USER U1: Find tea"
    assert fake_protocol.first_observation(TASK) == f"R:USER U1: Help me review my tea.\nR:product: \nR:{FIELDS}\n"
    assert fake_protocol.error(KeyError("B0X")) == "R:Error: 'B0X'"
    assert fake_protocol.unknown_action("buy") == "R:unknown buy"


def test_memory_blocks(fake_protocol):
    block = fake_protocol.behaviour_block(BEHAVIOUR, 2)
    # placeholders are filled one after another in the release's order: the review text's
    # "<TITLE>" survives because the title was filled before the text went in
    assert block == ("\nR:MEM 2:T=Green Tea|A=B000TEA001|C=Grocery|R=4.5|N=10|P=9.99|S=TeaCo|"
                     "X={\"Weight\": \"100 g\", \"Origin\": \"Shizuoka\"}|D=['From Japan']|"
                     "F=['Loose leaf', \"It's fresh\"]|r=5.0|t=Lovely <TITLE> tea.|ts=1600000000000\n")
    assert fake_protocol.recmind_block(BEHAVIOUR, 0) == \
        "\nR:MINI 0:T=Green Tea|A=B000TEA001|C=Grocery|r=5.0|t=Lovely <TITLE> tea.|ts=1600000000000\n"
    assert fake_protocol.interecagent_block(BEHAVIOUR) == \
        "\nR:IR:T=Green Tea|A=B000TEA001|C=Grocery|r=5.0|t=Lovely <TITLE> tea.\n"
    assert fake_protocol.taskspe_entry(BEHAVIOUR, "search") == "R:s:Green Tea/Grocery/9.99/TeaCo\n"
    assert fake_protocol.taskspe_entry(BEHAVIOUR, "recommend") == "R:r:Green Tea/Grocery/B000TEA001\n"
    assert fake_protocol.taskspe_entry(BEHAVIOUR, "review") == "R:v:5.0/Lovely <TITLE> tea.\n"
    assert fake_protocol.numbered_memory("memory.last.header", ["a", "b"]) == "\nR:LAST:\na\nb"
    assert fake_protocol.interecagent_memory(["h1", "h2"], {"like": ["B1"], "dislike": [], "expect": ["tea"]}) == \
        "\nR:HISTORY:\nh1\nh2\nR:LIKE:\n['B1']\nR:DISLIKE:\n[]\nR:EXPECT:\n['tea']"
    assert fake_protocol.taskspe_agent_memory("search", "search_product_by_query", ["e1\n", "e2\n"]) == \
        "R:type search; tool search_product_by_query\nR:TASKSPE:\ne1\n|e2\n"


def test_system_prompts(fake_protocol):
    p = fake_protocol
    assert system_prompt(p, "last", -1) == "R:SYSTEM single-turn\n"
    assert system_prompt(p, "none", 7) == "R:SYSTEM multi-turn, 7 steps\n"
    assert system_prompt(p, "recmind", -1) == "R:SYSTEM recmind single-turn\n"
    assert system_prompt(p, "recmind", 5) == "R:SYSTEM recmind multi-turn, 5 steps\n"
    assert system_prompt(p, "interecagent", -1) == "R:SYSTEM interecagent, -1 steps\n"  # as the release fills it
    assert system_prompt(p, "taskspe", -1) == "R:SYSTEM taskspe single-turn\n"
    assert system_prompt(p, "taskspe", 3) == "R:SYSTEM taskspe multi-turn, 3 steps\n"
    tools = p.tools(["search_product_by_query", "stop"])
    assert p.react_system_prompt(-1, tools) == \
        "R:SYSTEM single-turn\n" + "\nR:TOOLS\n" + json.dumps(tools) + "\nR:REACT INSTRUCTIONS\n"


def test_reflection_and_interecagent_prompts(fake_protocol):
    p = fake_protocol
    assert p.reflection_prompt("T", "user:hi\n", "no") == "R:REFLECT task=T actions=user:hi\n feedback=no"
    assert p.interecagent_update_prompt("user:x\n") == "R:UPDATE user:x\n"
    assert p.interecagent_init_prompt([BEHAVIOUR, BEHAVIOUR]) == \
        "R:INIT " + "\nR:T=Green Tea|A=B000TEA001|C=['Grocery', 'Tea']|r=5.0|t=Lovely <TITLE> tea." * 2


def test_user_simulator_prompts(fake_protocol):
    profile = ("\nG=Female|A=25-34|O=Nurse|P=R:price-high|I=Tea|B=TeaCo|D=R:div-low|X=R:int-medium|T=Warm|R=Brands"
               "|F=Taste\n")
    assert fake_protocol.profile_block(PROFILE) == profile
    assert fake_protocol.user_prompt(dict(TASK, type="search"), PROFILE) == \
        f"R:USERSIM profile={profile} product=\nR:{FIELDS}\n"
    assert fake_protocol.user_prompt(TASK, PROFILE) == \
        f"R:USERSIM profile={profile} product=\nR:{FIELDS}\n review=Lovely <TITLE> tea."
    with pytest.raises(DataError, match="'Price Sensitivity' is 'Extreme'"):
        fake_protocol.profile_block(dict(PROFILE, **{"Price Sensitivity": "Extreme"}))


def test_puma_prompts(fake_protocol):
    p = fake_protocol
    assert p.puma_function_prompt("Find tea") == "R:FUNCTION Find tea\n### Tool:\n"
    assert p.puma_memory([BEHAVIOUR, BEHAVIOUR], "recommend") == \
        "R:pr:Green Tea/Grocery/B000TEA001\n|R:pr:Green Tea/Grocery/B000TEA001\n"
    assert p.puma_param_prompt("Review it", "add_product_review", "M", PRODUCT) == \
        "R:PARAM Review it\nR:t=Green Tea p=9.99 s=TeaCo c=Grocery\n mem=M tool=add_product_review\n" \
        "### Tool Parameter:\n"
    assert p.puma_search_label_prompt("Find tea", "m1|m2") == "R:QUERY for Find tea from m1|m2"


USER_FILE = "PersonalWAB/envs/user.py"


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
