"""Where each model-facing text of the original release lives, so a pack can be read
from a checkout of it (`pack.py`) and every renderer knows which text it fills.

The release (HongruCai/PersonalWAB) is pinned at one commit. A text comes from one of
three kinds of source in one of its Python files:

- `Constant`: a module-level assignment (`NAME = '...'`, `NAME = {...}`, `fn.__info__ = {...}`);
- `Inline`: a string literal inside a function, by its qualified name and its position
  among the function's string literals in source order (an f-string counts as one);
- `Joined`: several inline literals with fields between them, for texts the release builds
  by concatenation (`'Product ' + str(i) + ': \\n' + p + '\\n'`).

Each entry has a name of our own (`TEXTS` keys); the renderers in `protocol/__init__.py`
ask for texts by that name. `fields` maps the release's f-string expressions to our field
names, so an f-string becomes a `str.format` template (`USER {user_id}: {task}`).
No text of the release is stored here: only where to find it, and each file's digest at
the pinned commit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

RELEASE_REPOSITORY = "HongruCai/PersonalWAB"
RELEASE_COMMIT = "23ff65c4c2288198b4b3d00d835760da2c2ff8e8"
RELEASE_SHORT = RELEASE_COMMIT[:7]

# sha256 of each file the pack is read from, at RELEASE_COMMIT.
RELEASE_FILES: dict[str, str] = {
    "PersonalWAB/envs/base.py": "795def7d7aa77b704afd107721c713ff235b62ddf75eda0b5670421715ddeea2",
    "PersonalWAB/envs/user.py": "c8efb24f85909ec141823c8eff739d0aaab94efb53c350b240ce53ea39864bd2",
    "PersonalWAB/envs/pwab/__init__.py": "d32f913523dfd4dc2bb89f4d3db9f49bb9d7d5f28e57012020910a7b915454e4",
    "PersonalWAB/envs/pwab/functions/search_product_by_query.py":
        "dc5bcfaab095f7f06b9ccbd6324e8046522ca67d51358ae4a36b75a09a2514e6",
    "PersonalWAB/envs/pwab/functions/get_recommendations_by_history.py":
        "6006894e72be4ae39f0050d93bab13249f9f74c2f6adfdfcc027a21801d2f502",
    "PersonalWAB/envs/pwab/functions/add_product_review.py":
        "61a215bbd1e015d6cccca46e67523497b60aac9e10d1700404ff63991435ec4b",
    "PersonalWAB/envs/pwab/functions/get_product_details_by_asin.py":
        "dc77db923354928b66b6c42e9a89e3cadff9ba89f083e09e68fe0f3476d8df16",
    "PersonalWAB/envs/pwab/functions/stop.py": "2cf2dd1d457cfe0b87a3ac8d6b0f46cf7385d661d6290480d84f0da55b107fe7",
    "PersonalWAB/agents/gpt_function_calling_agent.py":
        "3bc80898e00c23de786499ad6393b7963fcbcdf760330a9130f42ad194cf1191",
    "PersonalWAB/agents/chat_react_agent.py": "8c6ad31a668509626d94e1522d6b08a4321ef2ffef25f32e2a79c9750f5937de",
    "PersonalWAB/agents/utils.py": "cfe511ae6ca81ff7ebd917a7167dc38fcda8508bef316ab08dc7c42b5dda6c28",
    "PersonalWAB/agents/puma_agent.py": "022af4b0a35f85ac81cebc63716c5d98849e2af82ac879a23a0cd92eac944a9b",
    "scripts/tools/init_interecagent_memory.py": "70462845df49d80487d6d8f8157a1e88925a1ea96eaf9f8776ee49430c8c946c",
    "PUMA/utils.py": "e644ccf007cbc03349bc0899d3d5852c6fb7493cff896ddfe1a2d1dfb8da6377",
}
# sha256 of every text a pack reads at RELEASE_COMMIT (`pack.pack_texts_digest`): a pack marked
# pinned must hold exactly these. Recompute it when TEXTS changes, from a checkout of the release:
# python -c "from PersonalWAB.protocol.pack import *; print(pack_texts_digest(build_pack('DIR')))"
RELEASE_TEXTS_SHA256 = "49cf98483d5a45c01fed1f65f1b090467609c6fbeb07a52da1347dcf71d97b45"
# The `protocol_texts_digest` a run with those texts records (`Protocol.texts_digest`: the texts
# and the renderers' version): the one digest a result file labelled with the release's texts may
# carry to count as standard; any other is "unknown texts". Recompute it with RENDERER_VERSION:
# python -c "from PersonalWAB.protocol import *; from PersonalWAB.protocol.pack import *; \
#   write_pack(build_pack('DIR'), '/tmp/p.json'); print(protocol_from_pack('/tmp/p.json').texts_digest)"
RELEASE_PROTOCOL_DIGEST = "c1a2883ce9b04fa6"


@dataclass(frozen=True)
class Constant:
    file: str
    name: str

    @property
    def key(self) -> str:
        return self.name


@dataclass(frozen=True)
class Inline:
    file: str
    function: str
    position: int
    fields: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.function}#{self.position}"


@dataclass(frozen=True)
class Field:
    """A value the renderer supplies between the literals of a `Joined` text."""

    name: str


@dataclass(frozen=True)
class Joined:
    parts: tuple[Inline | Field, ...]


Source = Constant | Inline | Joined

_ENV = "PersonalWAB/envs"
_FUNCTIONS = f"{_ENV}/pwab/functions"
_USER = f"{_ENV}/user.py"
_FC = "PersonalWAB/agents/gpt_function_calling_agent.py"
_REACT = "PersonalWAB/agents/chat_react_agent.py"
_UTILS = "PersonalWAB/agents/utils.py"
_PUMA_AGENT = "PersonalWAB/agents/puma_agent.py"
_PUMA_UTILS = "PUMA/utils.py"
_INTEREC_INIT = "scripts/tools/init_interecagent_memory.py"
_FIRST = "NoUserSimulationEnv.reset"
_OBS_FIELDS = {"instruction['user_id']": "user_id", "instruction['task']": "task",
               "pretty_product(product_info)": "product"}

TEXTS: dict[str, Source] = {
    # --- tools (OpenAI function-calling schemas) -------------------------------------------------
    "tool.search_product_by_query": Constant(f"{_FUNCTIONS}/search_product_by_query.py",
                                             "search_product_by_query.__info__"),
    "tool.get_recommendations_by_history": Constant(f"{_FUNCTIONS}/get_recommendations_by_history.py",
                                                    "get_recommendations_by_history.__info__"),
    "tool.add_product_review": Constant(f"{_FUNCTIONS}/add_product_review.py", "add_product_review.__info__"),
    "tool.get_product_details_by_asin": Constant(f"{_FUNCTIONS}/get_product_details_by_asin.py",
                                                 "get_product_details_by_asin.__info__"),
    "tool.stop": Constant(f"{_FUNCTIONS}/stop.py", "stop.__info__"),
    # --- observations ------------------------------------------------------------------------------
    "search.result": Joined((Inline(f"{_FUNCTIONS}/search_product_by_query.py", "search_product_by_query", 1),
                            Field("rank"),
                            Inline(f"{_FUNCTIONS}/search_product_by_query.py", "search_product_by_query", 2),
                            Field("contents"),
                            Inline(f"{_FUNCTIONS}/search_product_by_query.py", "search_product_by_query", 3))),
    "recommend.product": Constant(f"{_FUNCTIONS}/get_recommendations_by_history.py", "Product_Prompt"),
    "details.product": Constant(f"{_FUNCTIONS}/get_product_details_by_asin.py", "Product_Prompt"),
    "details.not_found": Inline(f"{_FUNCTIONS}/get_product_details_by_asin.py", "get_product_details_by_asin", 1),
    "review.empty": Inline(f"{_FUNCTIONS}/add_product_review.py", "add_product_review", 2),
    "stop.result": Inline(f"{_FUNCTIONS}/stop.py", "stop", 0),
    "env.error": Inline(f"{_ENV}/base.py", "PWABaseEnv.step", 17, {"e": "error"}),
    "env.unknown_action": Inline(f"{_ENV}/base.py", "PWABaseEnv.step", 21, {"action['name']": "name"}),
    "env.no_user_reply": Inline(_USER, "NoUserSimulationEnv.step", 0),
    "first_observation.request": Inline(_USER, _FIRST, 0, _OBS_FIELDS),
    "first_observation.product": Inline(_USER, _FIRST, 5, _OBS_FIELDS),
    "product": Constant(_USER, "PRODUCT_PROMPT"),
    # --- system prompts ------------------------------------------------------------------------------
    "system.single_turn": Constant(f"{_ENV}/pwab/__init__.py", "SYS_PROMPT_SINGLE"),
    "system.multi_turn": Constant(f"{_ENV}/pwab/__init__.py", "SYS_PROMPT_MULTI"),
    "system.recmind.single_turn": Constant(_UTILS, "RECMIND_ST_PROMPT"),
    "system.recmind.multi_turn": Constant(_UTILS, "RECMIND_MT_PROPMT"),
    "system.interecagent": Constant(_UTILS, "INTEREC_PROMPT"),
    "system.taskspe.single_turn": Constant(_UTILS, "TS_AGENT_PROMPT"),
    "system.taskspe.multi_turn": Constant(_UTILS, "TS_AGENT_MT_PROMPT"),
    # --- memory -----------------------------------------------------------------------------------
    "memory.behaviour": Constant(_UTILS, "HISTORY_PROMPT"),
    "memory.recmind.behaviour": Constant(_UTILS, "MINI_HISTORY_PROMPT"),
    "memory.interecagent.behaviour": Constant(_UTILS, "INTEREC_MEMORY_PROMPT"),
    "memory.taskspe.search": Constant(_UTILS, "TS_SEARCH_PROMPT"),
    "memory.taskspe.recommend": Constant(_UTILS, "TS_REC_PROMPT"),
    "memory.taskspe.review": Constant(_UTILS, "TS_REV_PROMPT"),
    "memory.last.header": Inline(_FC, "GPTFunctionCallingAgent.retrieve_memory", 9),
    "memory.relevant.header": Inline(_FC, "GPTFunctionCallingAgent.retrieve_memory", 19),
    "memory.random.header": Inline(_FC, "GPTFunctionCallingAgent.retrieve_memory", 30),
    "memory.recmind.header": Inline(_FC, "GPTFunctionCallingAgent.retrieve_memory", 41),
    "memory.interecagent.history": Inline(_FC, "GPTFunctionCallingAgent.retrieve_memory", 52),
    "memory.interecagent.like": Inline(_FC, "GPTFunctionCallingAgent.retrieve_memory", 54),
    "memory.interecagent.dislike": Inline(_FC, "GPTFunctionCallingAgent.retrieve_memory", 57),
    "memory.interecagent.expect": Inline(_FC, "GPTFunctionCallingAgent.retrieve_memory", 60),
    "memory.taskspe.intro": Inline(_FC, "GPTFunctionCallingAgent.retrieve_memory", 79,
                                   {"task_type": "task_type", "tool_name": "tool_name"}),
    "memory.taskspe.header": Inline(_FC, "GPTFunctionCallingAgent.retrieve_memory", 80),
    "react.memory.last.header": Inline(_REACT, "ChatReActAgent.retrieve_memory", 9),
    "react.memory.relevant.header": Inline(_REACT, "ChatReActAgent.retrieve_memory", 19),
    "react.memory.random.header": Inline(_REACT, "ChatReActAgent.retrieve_memory", 30),
    # --- ReAct and reflection -----------------------------------------------------------------------
    "react.tools_header": Inline(_REACT, "ChatReActAgent.__init__", 0),
    "react.instructions": Constant(_UTILS, "REACT_INST"),
    "react.action_marker": Inline(_REACT, "get_message_action", 4),
    "react.arguments_marker": Inline(_REACT, "get_message_action", 5),
    "react.api_output": Inline(_REACT, "ChatReActAgent.act", 9),
    "reflection.prompt": Constant(_UTILS, "REFLECTION_INST"),
    # --- InteRecAgent -------------------------------------------------------------------------------
    "interecagent.update": Constant(_UTILS, "INTEREC_UPDATE_MEM_PROMPT"),
    "interecagent.init.behaviour": Constant(_INTEREC_INIT, "PRODUCT_PROMPT"),
    "interecagent.init.prompt": Constant(_INTEREC_INIT, "USER_PROFILE_PROMPT"),
    # --- the LLM user simulator ---------------------------------------------------------------------
    "user.prompt": Constant(_USER, "USER_PROMPT"),
    "user.prompt.review": Constant(_USER, "USER_PROMPT_REVIEW"),
    "user.profile": Constant(_USER, "PROFILE_PROMPT"),
    "user.price_sensitivity": Constant(_USER, "PRICE"),
    "user.diversity_preference": Constant(_USER, "DIVERSITY"),
    "user.interaction_complexity": Constant(_USER, "INTERACTION"),
    "user.greeting": Inline(_USER, "LLMUserSimulationEnv.reset", 20),
    # --- PUMA -----------------------------------------------------------------------------------------
    "puma.agent.param_prompt": Constant(_UTILS, "PARAM_PORMPT"),
    "puma.agent.product": Constant(_UTILS, "PRODUCT_PROMPT"),
    "puma.agent.say_prefix": Inline(_PUMA_AGENT, "PUMAAgent.act", 5),
    "puma.agent.say_separator": Inline(_PUMA_AGENT, "PUMAAgent.act", 10),
    "puma.agent.stop_prefix": Inline(_PUMA_AGENT, "PUMAAgent.act", 11),
    "puma.agent.no_memory": Inline(_PUMA_AGENT, "PUMAAgent.retrieve_memory", 8),
    "puma.param_prompt": Constant(_PUMA_UTILS, "PARAM_PROMPT"),
    "puma.function_prompt": Constant(_PUMA_UTILS, "FUNCTION_PROMPT"),
    "puma.product": Constant(_PUMA_UTILS, "PRODUCT_INFO_PROMPT"),
    "puma.behaviour": Constant(_PUMA_UTILS, "HISTORY_PROMPT"),
    "puma.taskspe.search": Constant(_PUMA_UTILS, "TS_SEARCH_PROMPT"),
    "puma.taskspe.recommend": Constant(_PUMA_UTILS, "TS_REC_PROMPT"),
    "puma.taskspe.review": Constant(_PUMA_UTILS, "TS_REV_PROMPT"),
    "puma.search_label_prompt": Inline(_PUMA_UTILS, "generate_search_query", 0),
}
