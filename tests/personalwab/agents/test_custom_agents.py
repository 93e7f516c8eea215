"""Agents of one's own: the example agent by `--agent_strategy module:Class` (run.py from the repo
root) and by a `pwab.agents` entry point of an installed distribution; clear messages for agents
that cannot be used, before anything is written."""

import os
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from PersonalWAB.agents.custom import ENTRY_POINT_GROUP, installed_agents
from PersonalWAB.leaderboard.validate import validate_file
from PersonalWAB.memory import memory_text, system_prompt
from PersonalWAB.protocol import project_protocol
from PersonalWAB.metrics import compute_statistics
from PersonalWAB.results import load_result_file
from PersonalWAB.runner.cli import main
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run
from devtools.doubles.responders import tool_caller
from devtools.doubles.scripted_server import ScriptedLLMServer
from examples.my_agent import TOOLS
from tests.conftest import HANG_GUARD_S, REPO_ROOT

EXAMPLE = "examples.my_agent:MyAgent"
KEY = "sk-test-custom-agent"


def check_example_run(path, strategy, tasks, data):
    header, records = load_result_file(path)
    assert len(records) == tasks and compute_statistics(records) == header["results"]
    assert header["results"]["overall"]["avg_action_acc"] == 1.0  # the scripted model calls the right function
    assert header["run_args"]["agent_strategy"] == strategy
    protocol = header["run_args"]["protocol"]
    assert f"agent_strategy {strategy}: a custom agent, not in the release" in protocol["departures"]
    assert protocol["standard"] is False
    for record in records:
        assert record["traj"][0]["role"] == "system" and record["traj"][2]["tool_calls"]
        assert record["traj"][3]["role"] == "tool" and len(record["info"]["usage"]["total_tokens"]) == 1
    report = validate_file(path, data)
    assert report.valid and "custom" in report.flags


@pytest.mark.slow
def test_example_agent_runs_from_the_flag_at_the_repo_root(tiny_data, tiny_engines, tmp_path):
    output = tmp_path / "mine.json"
    with ScriptedLLMServer(tool_caller) as server:
        finished = subprocess.run(
            [sys.executable, "run.py", "--agent_strategy", EXAMPLE, "--model", "openai/scripted", "--api_base",
             server.url, "--data_dir", str(tiny_data.data_dir), "--end_index", "5", "--out", str(output)],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S,
            env={**os.environ, "OPENAI_API_KEY": KEY})
        first = server.requests[0]
    assert finished.returncode == 0, finished.stderr
    assert "custom run (project texts; agent_strategy examples.my_agent:MyAgent" in finished.stdout
    check_example_run(output, EXAMPLE, 5, tiny_data)
    assert first["tools"] == project_protocol().tools(TOOLS) and first["tool_choice"] == "auto"


def install_distribution(site, name, entry_points_text):
    """A real installed distribution as pip leaves one: a dist-info folder with METADATA and
    entry_points.txt in a site directory, found by importlib.metadata on sys.path."""
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points_text)
    (info / "RECORD").write_text("")


def test_example_agent_runs_from_an_entry_point(tiny_data, tiny_engines, tmp_path, monkeypatch):
    site = tmp_path / "site"
    install_distribution(site, "pwab_demo_agents", f"[{ENTRY_POINT_GROUP}]\nmy-agent = {EXAMPLE}\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert [p.value for p in entry_points(group=ENTRY_POINT_GROUP) if p.name == "my-agent"] == [EXAMPLE]
    assert installed_agents()["my-agent"].value == EXAMPLE
    with ScriptedLLMServer(tool_caller) as server:
        _, path, _ = run(RunConfig(agent_strategy="my-agent", model="openai/scripted", api_base=server.url,
                                   data_dir=str(tiny_data.data_dir), end_index=4, agent_memory="last",
                                   out=str(tmp_path / "ep.json")), log=lambda _: None)
        system = server.requests[0]["messages"][0]["content"]
    check_example_run(path, "my-agent", 4, tiny_data)
    protocol, task = project_protocol(), tiny_data.split("test")[0]
    assert system == system_prompt(protocol, "last", -1) + memory_text(protocol, tiny_data, task, "last", 10)


BROKEN_MODULES = {
    "agent_broken_import": "import a_dependency_that_is_not_installed\n",
    "agent_no_solve": "class Helper:\n    def __init__(self, data, config):\n        pass\n\n"
                      "    def act(self, env, task_index):\n        return None\n",
    "agent_abstract": "from PersonalWAB.agents.base import Agent\n\nclass Half(Agent):\n"
                      "    def __init__(self, data, config):\n        pass\n",
    "agent_bad_init": "class NoArgs:\n    def __init__(self):\n        pass\n\n"
                      "    def solve(self, env, task_index):\n        return None\n",
}
CASES = [
    ("no_such_package.agents:Mine", "cannot import no_such_package.agents (ModuleNotFoundError: "
                                    "No module named 'no_such_package')"),
    ("agent_broken_import:Anything", "cannot import agent_broken_import (ModuleNotFoundError: "
                                     "No module named 'a_dependency_that_is_not_installed')"),
    ("agent_no_solve:Helper", "class Helper has no solve(env, task_index) method"),
    ("agent_no_solve:Missing", "module agent_no_solve has no 'Missing'"),
    ("agent_abstract:Half", "class Half leaves solve unimplemented"),
    ("agent_bad_init:NoArgs", "class NoArgs: its constructor (data, config) cannot be called that way"),
    ("examples.my_agent", "not a built-in strategy (heuristic, function_calling"),
    ("not-installed-agent", f"no installed package declares it in the '{ENTRY_POINT_GROUP}' entry point group"),
]


@pytest.mark.parametrize("strategy,message", CASES)
def test_unusable_agents_stop_with_one_clear_line(strategy, message, tiny_data_dir, tmp_path, monkeypatch, capsys):
    for name, source in BROKEN_MODULES.items():
        (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    output = tmp_path / "never.json"
    code = main(["--agent_strategy", strategy, "--data_dir", str(tiny_data_dir), "--out", str(output)])
    error = capsys.readouterr().err
    assert code == 2 and not output.exists()
    assert error.count("\n") == 1 and error.startswith(f"error: --agent_strategy {strategy}: ")
    assert message in error
    for module in BROKEN_MODULES:
        sys.modules.pop(module, None)


def test_default_result_name_of_a_custom_agent_is_a_plain_file_name(tmp_path):
    from PersonalWAB.runner.records import default_output_path

    path = default_output_path(RunConfig(agent_strategy=EXAMPLE, log_dir=str(tmp_path)), 10)
    assert path.parent == tmp_path / "singleturn" and ":" not in path.name
    assert path.name.startswith("step-1_examples.my_agent_MyAgent-offline-0.0_")
