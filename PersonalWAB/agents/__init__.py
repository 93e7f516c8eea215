"""Agent strategies selectable with `run.py --agent_strategy`: the built-in ones below, or an
agent of one's own (`package.module:ClassName`, or a `pwab.agents` entry point; see
`PersonalWAB.agents.custom` and docs/agents.md)."""

from __future__ import annotations

from typing import Any

AGENT_STRATEGIES = ("heuristic", "function_calling", "react", "react_reflect", "recmind", "puma")
LLM_STRATEGIES = ("function_calling", "react", "react_reflect", "recmind")


def is_builtin(strategy: str) -> bool:
    """Whether `strategy` names one of this package's agents (else it names a custom one)."""
    return strategy in AGENT_STRATEGIES


def build_agent(strategy: str, data: Any, config: Any, random_memory: Any = None) -> Any:
    """Create the agent for `strategy`; modules are imported only when chosen.
    `random_memory` (a `ReleaseRandomMemory`) holds the run's draws for `random` memory."""
    if strategy == "heuristic":
        from PersonalWAB.agents.heuristic import HeuristicAgent

        return HeuristicAgent(data, config.agent_memory, config.memory_length, config.seed, random_memory)
    if strategy == "puma":
        return _puma_agent(data, config)
    if not is_builtin(strategy):
        from PersonalWAB.agents.custom import build_custom_agent

        return build_custom_agent(strategy, data, config)
    if not config.model:
        raise ValueError(f"--agent_strategy {strategy} needs --model (any litellm model string)")
    from PersonalWAB.agents.function_calling import FunctionCallingAgent, RecMindAgent
    from PersonalWAB.agents.llm_agent import MemorySettings
    from PersonalWAB.agents.react import ReActAgent, ReflectiveReActAgent
    from PersonalWAB.llm import LLMClient

    client = LLMClient(config.model, api_base=config.api_base, temperature=config.temperature,
                       max_retries=config.max_retries)
    memory = MemorySettings(config.agent_memory, config.memory_length, config.seed,
                            function_file=_function_file(config), interec_store=_interec_store(config),
                            random_memory=random_memory)
    agent_class = {"function_calling": FunctionCallingAgent, "react": ReActAgent,
                   "react_reflect": ReflectiveReActAgent, "recmind": RecMindAgent}[strategy]
    return agent_class(client, data, memory)


def _puma_agent(data: Any, config: Any) -> Any:
    from PersonalWAB.agents.puma import LiveGenerator, PumaAgent

    generator = None
    if config.puma_generate:
        if not config.puma_model_path:
            raise ValueError("--puma_generate needs --puma_model_path (a merged model or a LoRA adapter folder)")
        from PersonalWAB.memory_embeddings import build_behaviour_embeddings
        from PersonalWAB.protocol import load_protocol

        from PersonalWAB.agents.puma import AGENT_RELEVANCE_TEXT, DATA_RELEVANCE_TEXT
        from PUMA.recipe import get_recipe

        recipe = get_recipe(config.puma_recipe)
        # the task-specific memory ranks behaviours by relevance (the improved recipe by training's text)
        template = DATA_RELEVANCE_TEXT if recipe.training_prompt_at_eval else AGENT_RELEVANCE_TEXT
        build_behaviour_embeddings(data, load_protocol(config.protocol_file), log=None, template=template)
        generator = LiveGenerator(config.puma_model_path, config.puma_dtype, recipe.gpu_eval_dtype,
                                  release=recipe.name == "release")
    return PumaAgent(data, config.puma_function_file, config.puma_param_file, generator,
                     memory_length=config.memory_length, mem_token_length=config.mem_token_length,
                     recipe=config.puma_recipe)


def _function_file(config: Any) -> dict[str, str] | None:
    if not config.puma_function_file:
        return None
    from PersonalWAB.memory import load_function_file

    return load_function_file(config.puma_function_file)


def _interec_store(config: Any) -> Any:
    if config.agent_memory != "interecagent":
        return None
    if not config.interec_memory_file:
        raise ValueError("--agent_memory interecagent needs --interec_memory_file (create one with "
                         "scripts/tools/init_interecagent_memory.py)")
    from PersonalWAB.interec_memory import InterecMemoryStore

    return InterecMemoryStore(config.interec_memory_file)
