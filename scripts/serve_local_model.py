"""llama-cpp-python's OpenAI-compatible server with one more chat format, `chatml-tools`.

llama-cpp-python's `chatml-function-calling` format parses tool calls from a ChatML model, but
its prompt template cannot render a conversation that goes on after a tool call: it reads the
`content` of every assistant message (an assistant message that only calls a tool has none, so
the request fails with HTTP 500) and writes nothing for a `tool` message (the model never sees
a function's result). `chatml-tools` is that format over the conversation rewritten so it can:
an assistant message without content gets an empty one, and a function's result comes as a user
turn that names the function. Multi-turn agents and the LLM user need it; a single tool call
renders as before. Started by scripts/serve_local_model.sh, whose environment (GGUF, PORT, ALIAS,
CHAT_FORMAT, N_CTX, THREADS, CACHE) makes the server's flags.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any


def renderable(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as the `chatml-function-calling` template can render it."""
    out = []
    for message in messages:
        if message.get("role") == "tool":
            name = message.get("name") or "the function"
            out.append({"role": "user", "content": f"Result of functions.{name}:\n{message.get('content') or ''}"})
        elif message.get("role") == "assistant" and message.get("content") is None:
            out.append({**message, "content": ""})
        else:
            out.append(message)
    return out


def register() -> None:
    """Add `chatml-tools` to llama-cpp-python's chat formats."""
    from llama_cpp import llama_chat_format

    @llama_chat_format.register_chat_completion_handler("chatml-tools")
    def chatml_tools(*, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        return llama_chat_format.chatml_function_calling(messages=renderable(messages), **kwargs)


def server_flags(env: Mapping[str, str]) -> list[str]:
    """llama-cpp-python's server flags from the serve script's settings."""
    threads = env.get("THREADS") or str(os.cpu_count() or 1)
    return ["--model", env["GGUF"], "--model_alias", env.get("ALIAS") or "smollm2-135m",
            "--chat_format", env.get("CHAT_FORMAT") or "chatml-tools", "--n_ctx", env.get("N_CTX") or "8192",
            "--n_threads", threads, "--n_threads_batch", threads,
            "--cache", "True" if env.get("CACHE", "0") == "1" else "False",
            "--host", "127.0.0.1", "--port", env["PORT"], "--verbose", "False"]


def main() -> None:
    from llama_cpp.server.__main__ import main as serve

    register()
    sys.argv = [sys.argv[0], *server_flags(os.environ)]
    serve()


if __name__ == "__main__":
    main()
