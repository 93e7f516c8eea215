"""The served model's chat format renders a conversation that goes on after a tool call."""

from __future__ import annotations

from scripts.serve_local_model import renderable


def test_a_tool_call_and_its_result_become_turns_the_chatml_template_renders():
    call = {"id": "call_0", "type": "function", "function": {"name": "search_product_by_query",
                                                             "arguments": '{"query": "tea"}'}}
    conversation = [{"role": "system", "content": "rules"}, {"role": "user", "content": "find tea"},
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": "call_0", "name": "search_product_by_query",
                     "content": "[B01, B02]"},
                    {"role": "assistant", "content": "Found two."}]
    rendered = renderable(conversation)
    assert [m["role"] for m in rendered] == ["system", "user", "assistant", "user", "assistant"]
    assert all(isinstance(m["content"], str) for m in rendered)
    assert rendered[2] == {**conversation[2], "content": ""}
    assert rendered[3]["content"] == "Result of functions.search_product_by_query:\n[B01, B02]"
    assert rendered[:2] == conversation[:2] and rendered[4] == conversation[4]
    assert conversation[2]["content"] is None


def test_the_server_flags_come_from_the_serve_scripts_settings():
    from scripts.serve_local_model import server_flags

    flags = server_flags({"GGUF": "/m.gguf", "PORT": "8738", "THREADS": "2", "CACHE": "1", "N_CTX": "4096"})
    pairs = dict(zip(flags[::2], flags[1::2]))
    assert pairs == {"--model": "/m.gguf", "--model_alias": "smollm2-135m", "--chat_format": "chatml-tools",
                     "--n_ctx": "4096", "--n_threads": "2", "--n_threads_batch": "2", "--cache": "True",
                     "--host": "127.0.0.1", "--port": "8738", "--verbose": "False"}
    assert dict(zip(*[iter(server_flags({"GGUF": "/m.gguf", "PORT": "1"}))] * 2))["--cache"] == "False"
