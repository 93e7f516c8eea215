"""`pwab reproduce` end to end against the scripted OpenAI-compatible server on 127.0.0.1: one
valid result file per row and the comparison with the paper; a re-run after a stop asks
nothing for a finished task; the cost estimate sends nothing and guards the budget."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from PersonalWAB.agents.react import ReActAgent
from PersonalWAB.leaderboard.validate import validate_file
from PersonalWAB.llm import LLMClient
from PersonalWAB.reproduce.cli import main
from PersonalWAB.reproduce.cost import conversation_mix
from PersonalWAB.reproduce.paper import compared_row, paper_row
from PersonalWAB.reproduce.rows import MULTI, ROWS, SINGLE, ReproduceSettings, row_config, select_rows
from PersonalWAB.reproduce.table import Cell, Comparison, render_html
from PersonalWAB.results import load_result_file
from devtools.doubles.responders import instruction_of, react_writer, tool_caller
from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply
from PUMA.agent_settings import PumaInputs

ROW_NAMES = ("none", "last", "react")
TASKS = 4


def scripted_model(request: dict) -> ScriptedReply:
    """Native tool calls for the function-calling rows, ReAct text for the ReAct row."""
    return tool_caller(request) if "tools" in request else react_writer(request)


def reproduce(server, data_dir: Path, out: Path, *extra: str, model: str = "openai/gpt-4o-mini") -> int:
    return main(["--model", model, "--api_base", server.url, "--data_dir", str(data_dir), "--rows",
                 ",".join(ROW_NAMES), "--out", str(out), "--end_index", str(TASKS), *extra])


def instructions(requests: list[dict]) -> list[str]:
    return [instruction_of(r) for r in requests]


@pytest.fixture(autouse=True)
def no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_reproduce_writes_a_valid_file_per_row_and_the_comparison(tiny_data, tiny_engines, tiny_data_dir, tmp_path,
                                                                  capsys):
    with ScriptedLLMServer(scripted_model) as server:
        assert reproduce(server, tiny_data_dir, tmp_path) == 0
        assert len(server.requests) == TASKS * len(ROW_NAMES)  # single-turn: one call per task
    out = capsys.readouterr().out
    assert out.index("Cost estimate") < out.index("Paper vs reproduced")
    for row in ROW_NAMES:
        path = tmp_path / "singleturn" / f"{row}.json"
        report = validate_file(path, tiny_data)
        assert report.valid, report.lines()
        assert len(report.result.records) == TASKS and report.result.header is not None
    for name in ("comparison.txt", "comparison.md", "comparison.html"):
        text = (tmp_path / "singleturn" / name).read_text()
        assert all(f"{row} (custom)" in text for row in ROW_NAMES)  # the project's texts: custom, said so
    assert "Function Acc [95% CI]" in out and "not comparable" in out
    page = (tmp_path / "singleturn" / "comparison.html").read_text()
    assert "Content-Security-Policy" in page and "<script" not in page


def test_a_rerun_asks_nothing_for_a_finished_task(tiny_engines, tiny_data_dir, tmp_path):
    with ScriptedLLMServer(scripted_model) as server:
        assert reproduce(server, tiny_data_dir, tmp_path) == 0
    # a kill: `last` stopped after two tasks (its checkpoint), `react` had not started
    last = tmp_path / "singleturn" / "last.json"
    header, records = load_result_file(last)
    last.write_text(json.dumps([{"run_args": header["run_args"], "unfinished": True}, *records[:2]]))
    (tmp_path / "singleturn" / "react.json").unlink()
    tasks = tiny_engines.data.tasks["test"]
    with ScriptedLLMServer(scripted_model) as server:
        assert reproduce(server, tiny_data_dir, tmp_path) == 0
        tool_requests = [r for r in server.requests if "tools" in r]  # none's and last's; none is finished
        react_requests = [r for r in server.requests if "tools" not in r]
    assert sorted(instructions(tool_requests)) == sorted(t["task"] for t in tasks[2:TASKS])
    assert sorted(instructions(react_requests)) == sorted(t["task"] for t in tasks[:TASKS])
    for row in ROW_NAMES:
        header, records = load_result_file(tmp_path / "singleturn" / f"{row}.json")
        assert header is not None and sorted(r["task_id"] for r in records) == list(range(TASKS))
    with ScriptedLLMServer(scripted_model) as server:  # everything finished: reused as it is
        assert reproduce(server, tiny_data_dir, tmp_path) == 0
        assert server.requests == []


def test_a_row_record_edited_to_an_invalid_score_runs_again(tiny_data, tiny_engines, tiny_data_dir, tmp_path):
    """A row's file is read back as resume reads it: the record validate refuses is run again."""
    with ScriptedLLMServer(scripted_model) as server:
        assert reproduce(server, tiny_data_dir, tmp_path) == 0
    path = tmp_path / "singleturn" / "none.json"
    content = json.loads(path.read_text())
    content[1]["res_acc"] = [5.0]
    path.write_text(json.dumps(content))
    with ScriptedLLMServer(scripted_model) as server:
        assert reproduce(server, tiny_data_dir, tmp_path) == 0
        assert len(server.requests) == 1  # that one task, nothing else
    report = validate_file(path, tiny_data)
    assert report.valid, report.lines()
    assert all(0 <= score <= 1 for record in report.result.records for score in record["res_acc"])


def test_ctrl_c_leaves_every_row_resumable_and_says_how_to_continue(tiny_engines, tiny_data_dir, tmp_path,
                                                                     monkeypatch, capsys):
    solve = ReActAgent.solve
    calls = {"n": 0}

    def interrupted_at_third(self, env, task_id):
        calls["n"] += isinstance(self.client, LLMClient)  # the estimate's stand-in is not counted
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return solve(self, env, task_id)

    monkeypatch.setattr(ReActAgent, "solve", interrupted_at_third)
    with ScriptedLLMServer(scripted_model) as server:
        assert reproduce(server, tiny_data_dir, tmp_path, "--max_concurrency", "1") == 130
    err = capsys.readouterr().err
    assert "interrupted: row react: 2 of 4 task(s)" in err and "pwab reproduce --model openai/gpt-4o-mini" in err
    assert load_result_file(tmp_path / "singleturn" / "react.json")[0] is None  # a checkpoint
    monkeypatch.setattr(ReActAgent, "solve", solve)
    with ScriptedLLMServer(scripted_model) as server:
        assert reproduce(server, tiny_data_dir, tmp_path) == 0
        assert len(server.requests) == TASKS - 2


def test_dry_run_sends_nothing_and_prints_a_cost_per_row(tiny_engines, tiny_data_dir, tmp_path, capsys):
    with ScriptedLLMServer(scripted_model) as server:
        assert reproduce(server, tiny_data_dir, tmp_path, "--dry_run") == 0
        assert server.requests == []
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.split()}
    for row in ROW_NAMES:
        assert f" {TASKS} " in lines[row] and "$0.0" in lines[row]
    assert "$" in lines["total"] and "price unknown" not in out
    assert not list(tmp_path.rglob("*.json"))


def test_a_dry_run_prices_relevant_memory_without_encoding_a_text(tiny_engines, tiny_data_dir, tmp_path, capsys,
                                                                   monkeypatch):
    """The estimate's memory holds as many behaviours as the run's, the newest: it needs their
    texts' length, not MiniLM's ranking, so nothing is encoded (on `full` that was minutes)."""
    from PersonalWAB.memory import embeddings

    def no_encoding(*args, **kwargs):
        raise AssertionError("the estimate encoded texts")

    monkeypatch.setattr(embeddings, "encode_with_store", no_encoding)
    monkeypatch.setattr(embeddings.BehaviourEmbeddings, "ensure", no_encoding)
    assert main(["--model", "openai/gpt-4o-mini", "--data_dir", str(tiny_data_dir), "--rows", "relevant",
                 "--out", str(tmp_path), "--end_index", str(TASKS), "--dry_run"]) == 0
    relevant = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("relevant"))
    assert f" {TASKS} " in relevant and "$0.0" in relevant


def test_a_dry_run_needs_no_key(tiny_engines, tiny_data_dir, tmp_path, capsys):
    """Nothing is sent, so the estimate runs without a provider key (the fixture removed it)."""
    assert main(["--model", "openai/gpt-4o-mini", "--data_dir", str(tiny_data_dir), "--rows", "none",
                 "--out", str(tmp_path), "--end_index", str(TASKS), "--dry_run"]) == 0
    assert "dry run: no request was sent" in capsys.readouterr().out


@pytest.mark.slow
def test_a_dry_run_names_what_it_priced_and_scales_to_the_official_split(tiny_engines, tiny_data_dir, tmp_path,
                                                                         capsys):
    from PersonalWAB.reproduce.cli import main as reproduce_main

    assert reproduce_main(["--model", "openai/gpt-4o-mini", "--data_dir", str(tiny_data_dir), "--rows", "none",
                           "--out", str(tmp_path), "--end_index", "4", "--dry_run", "--quiet", "1"]) == 0
    out = capsys.readouterr().out
    assert f"priced: the test split of synthetic(scale=tiny, seed=0) data ({tiny_data_dir};" in out
    assert "tasks 0 to 3 run), single track, project texts (custom run)" in out
    assert "scaled to the official test split (2,174 tasks per row)" in out


def test_max_usd_below_the_estimate_refuses_to_start(tiny_engines, tiny_data_dir, tmp_path, capsys):
    with ScriptedLLMServer(scripted_model) as server:
        assert reproduce(server, tiny_data_dir, tmp_path, "--max_usd", "0.000001") == 2
        assert server.requests == []
    assert "above --max_usd 1e-06; nothing was run" in capsys.readouterr().err
    assert not list(tmp_path.rglob("*.json"))


def test_a_model_without_a_price_is_price_unknown_never_zero(tiny_engines, tiny_data_dir, tmp_path, capsys):
    with ScriptedLLMServer(scripted_model) as server:
        assert reproduce(server, tiny_data_dir, tmp_path, "--dry_run", model="openai/scripted-model") == 0
        assert reproduce(server, tiny_data_dir, tmp_path, "--max_usd", "5", model="openai/scripted-model") == 2
        assert server.requests == []
    captured = capsys.readouterr()
    totals = [line for line in captured.out.splitlines() if line.startswith("total")]
    assert totals and all("price unknown" in line and "$" not in line for line in totals)
    assert "no price for openai/scripted-model" in captured.out
    assert "--max_usd 5.0 cannot be kept" in captured.err


def test_the_running_cost_stops_at_max_usd_and_a_rerun_finishes(tiny_engines, tiny_data_dir, tmp_path, capsys):
    def expensive(request):  # a million prompt tokens a call: $0.15 with gpt-4o-mini, far above the estimate
        reply = scripted_model(request)
        reply.prompt_tokens = 1_000_000
        return reply

    with ScriptedLLMServer(expensive) as server:
        assert reproduce(server, tiny_data_dir, tmp_path, "--max_usd", "0.4", "--max_concurrency", "1") == 4
        # $0.45 after the third task of the first row; the fourth may be in flight by then (kept)
        sent = len(server.requests)
        assert sent in (3, 4)
    err = capsys.readouterr().err
    assert "stopped at --max_usd 0.4" in err and "with a higher --max_usd, or without it" in err
    _, records = load_result_file(tmp_path / "singleturn" / "none.json")
    assert len(records) == sent
    with ScriptedLLMServer(scripted_model) as server:
        assert reproduce(server, tiny_data_dir, tmp_path) == 0
        assert len(server.requests) == TASKS - sent + 2 * TASKS


def test_rows_follow_the_release_and_need_their_inputs(tmp_path):
    settings = ReproduceSettings(model="gpt-4o", out=str(tmp_path))
    chosen, skipped = select_rows(settings)
    assert [s.name for s in chosen] == ["none", "random", "last", "relevant", "react", "recmind"]
    assert len(skipped) == 1 and "puma" in skipped[0]
    multi = ReproduceSettings(model="gpt-4o", out=str(tmp_path), track=MULTI)
    assert [s.name for s in select_rows(multi)[0]] == ["none", "random", "last", "relevant", "react", "reflection",
                                                       "recmind"]
    with pytest.raises(ValueError, match="--track multi only"):
        select_rows(ReproduceSettings(model="gpt-4o", out=str(tmp_path), rows="reflection"))
    with pytest.raises(ValueError, match="needs --puma_model_path"):
        select_rows(ReproduceSettings(model="gpt-4o", out=str(tmp_path), rows="puma"))
    react = row_config(ROWS["react"], settings)
    assert (react.agent_strategy, react.agent_memory, react.memory_length, react.max_steps, react.user_mode,
            react.temperature, react.seed) == ("react", "last", 10, -1, "no", 0.0, 2024)
    reflection = row_config(ROWS["reflection"], multi)
    assert (reflection.agent_strategy, reflection.agent_memory, reflection.max_steps, reflection.user_mode,
            reflection.user_model) == ("react_reflect", "relevant", 10, "naive", "gpt-4o-mini")
    puma = row_config(ROWS["puma"], ReproduceSettings(model="gpt-4o", out=str(tmp_path),
                                                      puma=PumaInputs(puma_model_path="m")))
    options = puma.options("puma")
    assert (puma.model, options.puma_generate, puma.agent_memory, options.recipe) == (None, True, "taskspe", "release")


def test_the_paper_column_is_only_for_the_model_the_paper_names():
    assert compared_row(SINGLE, "none", "gpt-4o", False).name == "No Memory (gpt-4o)"
    assert compared_row(SINGLE, "none", "openai/gpt-4o", False).figure("overall", "function") == 0.684
    assert compared_row(SINGLE, "none", "gpt-4o-mini", False) is None
    assert compared_row(SINGLE, "puma", None, True).figure("overall", "result") == 0.406
    assert compared_row(MULTI, "last", "gpt-4o", False) is None  # Table 4 names no model for it
    last = paper_row(MULTI, "last")
    assert last.source == "Table 4 (multi-turn track), row 'Last Memory'" and last.figure("overall", "steps") == 3.498
    assert paper_row(SINGLE, "react").figure("search", "steps") is None  # Table 3 has no Avg Steps


def test_the_flag_allows_for_the_papers_rounding():
    assert not Cell(0.5, 0.4, 0.6, paper=0.6004).outside
    assert Cell(0.5, 0.4, 0.6, paper=0.601).outside and Cell(1.0, 1.0, 1.0, paper=0.996).outside
    assert not Cell(0.5, 0.4, 0.6).outside


def test_multi_turn_conversations_average_the_papers_steps():
    for row in ("none", "reflection", "interecagent"):
        for kind in ("search", "recommend", "review"):
            mix = conversation_mix(ROWS[row], MULTI, kind, 10)
            assert math.isclose(sum(weight for _, weight in mix), 1.0)
            assert math.isclose(sum(steps * weight for steps, weight in mix),
                                max(2.0, paper_row(MULTI, row).figure(kind, "steps")))
    assert conversation_mix(ROWS["none"], SINGLE, "search", -1) == [(1, 1.0)]


def test_the_page_escapes_what_it_shows():
    evil = "<script>alert(1)</script>"
    page = render_html(Comparison(f"table {evil}", [], [evil]))
    assert "<script" not in page and "&lt;script&gt;" in page
