"""A stand-in for a checkout of the original release: the same file names, constant names
and function layout the pack reads (`PersonalWAB.protocol.spec`), with made-up texts
(`FAKE_TEXTS`, short, every one marked `R:`), so tests build a pack and run with it
without the release's files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PersonalWAB.protocol.spec import TEXTS, Constant, Field, Inline, Joined


def _tool(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "required": list(properties)} if properties else {}
    return {"type": "function", "function": {"name": name, "description": f"R: {name} tool", "parameters": parameters}}


_PRODUCT_FIELDS = "T=<TITLE>|A=<PARENT_ASIN>|R=<AVERAGE_RATING>|N=<RATING_NUMBER>|P=<PRICE>|S=<STORE>|F=<FEATURES>|" \
                  "D=<DESCRIPTION>|X=<DETAILS>|C=<CATEGORY>"
_BEHAVIOUR_FIELDS = "T=<TITLE>|A=<PARENT_ASIN>|C=<MAIN_CATEGORY>|R=<AVERAGE_RATING>|N=<RATING_NUMBER>|P=<PRICE>|" \
                    "S=<STORE>|X=<DETAILS>|D=<DESCRIPTION>|F=<FEATURES>|r=<RATING>|t=<TEXT>|ts=<TIMESTAMP>"

FAKE_TEXTS: dict[str, Any] = {
    "tool.search_product_by_query": _tool("search_product_by_query", {"query": {"type": "string"}}),
    "tool.get_recommendations_by_history": _tool(
        "get_recommendations_by_history", {"product_sequence": {"type": "array", "items": {"type": "string"}}}),
    "tool.add_product_review": _tool("add_product_review", {"review": {"type": "string"}}),
    "tool.get_product_details_by_asin": _tool("get_product_details_by_asin", {"product_asin": {"type": "string"}}),
    "tool.stop": _tool("stop", {}),
    "search.result": "R:hit {rank}:\n{contents}\n",
    "recommend.product": f"\nR:rec <Num>:{_PRODUCT_FIELDS}\n",
    "details.product": f"\nR:details:{_PRODUCT_FIELDS}\n",
    "details.not_found": "R: no such product",
    "review.empty": "R: empty review",
    "stop.result": "R:STOPPED",
    "env.error": "R:Error: {error}",
    "env.unknown_action": "R:unknown {name}",
    "env.no_user_reply": "R:no user here",
    "first_observation.request": "R:USER {user_id}: {task}",
    "first_observation.product": "\nR:product: {product}",
    "product": f"\nR:{_PRODUCT_FIELDS}\n",
    "system.single_turn": "R:SYSTEM single-turn\n",
    "system.multi_turn": "R:SYSTEM multi-turn, <NUM> steps\n",
    "system.recmind.single_turn": "R:SYSTEM recmind single-turn\n",
    "system.recmind.multi_turn": "R:SYSTEM recmind multi-turn, <NUM> steps\n",
    "system.interecagent": "R:SYSTEM interecagent, <NUM> steps\n",
    "system.taskspe.single_turn": "R:SYSTEM taskspe single-turn\n",
    "system.taskspe.multi_turn": "R:SYSTEM taskspe multi-turn, <NUM> steps\n",
    "memory.behaviour": f"\nR:MEM <NUM>:{_BEHAVIOUR_FIELDS}\n",
    "memory.recmind.behaviour":
        "\nR:MINI <NUM>:T=<TITLE>|A=<PARENT_ASIN>|C=<MAIN_CATEGORY>|r=<RATING>|t=<TEXT>|ts=<TIMESTAMP>\n",
    "memory.interecagent.behaviour": "\nR:IR:T=<TITLE>|A=<PARENT_ASIN>|C=<MAIN_CATEGORY>|r=<RATING>|t=<TEXT>\n",
    "memory.taskspe.search": "R:s:<TITLE>/<MAIN_CATEGORY>/<PRICE>/<STORE>\n",
    "memory.taskspe.recommend": "R:r:<TITLE>/<MAIN_CATEGORY>/<ASIN>\n",
    "memory.taskspe.review": "R:v:<RATING>/<TEXT>\n",
    "memory.last.header": "\nR:LAST:\n",
    "memory.relevant.header": "\nR:RELEVANT:\n",
    "memory.random.header": "\nR:RANDOM:\n",
    "memory.recmind.header": "\nR:RECMIND:\n",
    "memory.interecagent.history": "\nR:HISTORY:\n",
    "memory.interecagent.like": "\nR:LIKE:\n",
    "memory.interecagent.dislike": "\nR:DISLIKE:\n",
    "memory.interecagent.expect": "\nR:EXPECT:\n",
    "memory.taskspe.intro": "R:type {task_type}; tool {tool_name}\n",
    "memory.taskspe.header": "R:TASKSPE:\n",
    "react.memory.last.header": "\n\nR:REACT LAST:\n",
    "react.memory.relevant.header": "\nR:REACT RELEVANT:\n",
    "react.memory.random.header": "\nR:REACT RANDOM:\n",
    "react.tools_header": "\nR:TOOLS\n",
    "react.instructions": "\nR:REACT INSTRUCTIONS\n",
    "react.action_marker": "Action:",
    "react.arguments_marker": "Arguments:",
    "react.api_output": "R:API: ",
    "reflection.prompt": "R:REFLECT task=<TASK> actions=<ACTIONS> feedback=<FEEDBACK>",
    "interecagent.update": "R:UPDATE {conversation}",
    "interecagent.init.behaviour": "\nR:T=<TITLE>|A=<PARENT_ASIN>|C=<CATEGORIES>|r=<RATING>|t=<REVIEW_TEXT>",
    "interecagent.init.prompt": "R:INIT {History}",
    "user.prompt": "R:USERSIM profile=<PROFILE> product=<PRODUCT>",
    "user.prompt.review": "R:USERSIM profile=<PROFILE> product=<PRODUCT> review=<REVIEW>",
    "user.profile": "\nG=<GENDER>|A=<AGE>|O=<OCCUPATION>|P=<PRICE_SENSITIVITY>|I=<SHOPPING_INTEREST>|"
                    "B=<BRAND_PREFERENCE>|D=<DIVERSITY_PREFERENCE>|X=<INTERACTION_STYLE>|T=<TONE_AND_STYLE>|"
                    "R=<ITEM_REFERENCE>|F=<FOCUS>\n",
    "user.price_sensitivity": {"High": "R:price-high", "Medium": "R:price-medium", "Low": "R:price-low"},
    "user.diversity_preference": {"High": "R:div-high", "Medium": "R:div-medium", "Low": "R:div-low"},
    "user.interaction_complexity": {"High": "R:int-high", "Medium": "R:int-medium", "Low": "R:int-low"},
    "user.greeting": "R:Hello?",
    "puma.agent.param_prompt": "R:AGENT PARAM <Insturction> mem=<Memory> tool=<Tool>\n### Tool Parameter:\n",
    "puma.agent.product": "\nR:t=<Title> p=<Price> s=<Store> c=<Main Category>\n",
    "puma.agent.say_prefix": "Say:",
    "puma.agent.say_separator": "Say: ",
    "puma.agent.stop_prefix": "stop",
    "puma.agent.no_memory": "R:none",
    "puma.param_prompt": "R:PARAM <Instruction> mem=<Memory> tool=<Tool>\n### Tool Parameter:\n",
    "puma.function_prompt": "R:FUNCTION <Instruction>\n### Tool:\n",
    "puma.product": "\nR:t=<Title> p=<Price> s=<Store> c=<Main Category>\n",
    "puma.behaviour": f"\nR:PMEM <NUM>:{_BEHAVIOUR_FIELDS}\n",
    "puma.taskspe.search": "R:ps:<TITLE>/<MAIN_CATEGORY>/<PRICE>/<STORE>\n",
    "puma.taskspe.recommend": "R:pr:<TITLE>/<MAIN_CATEGORY>/<ASIN>\n",
    "puma.taskspe.review": "R:pv:<RATING>/<TEXT>\n",
    "puma.search_label_prompt": "R:QUERY for <Instruction> from <Memory>",
}


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fstring(template: str, fields: dict[str, str]) -> str:
    """Our format template as the release's f-string source, fields as its expressions."""
    import string

    expression = {ours: theirs for theirs, ours in fields.items()}
    out = []
    for literal, name, _, _ in string.Formatter().parse(template):
        out.append(_escaped(literal).replace("{", "{{").replace("}", "}}"))
        if name is not None:
            out.append("{" + expression[name] + "}")
    return 'f"' + "".join(out) + '"'


def _joined_literals(template: str, source: Joined) -> dict[Inline, str]:
    """The literals between a Joined text's fields, as Python source."""
    import string

    literals = [literal for literal, _, _, _ in string.Formatter().parse(template)]
    inline_parts = [part for part in source.parts if not isinstance(part, Field)]
    literals += [""] * (len(inline_parts) - len(literals))
    return {part: '"' + _escaped(literal) + '"' for part, literal in zip(inline_parts, literals)}


def write_release_tree(root: Path, texts: dict[str, Any] | None = None) -> Path:
    """Write the fake release's Python files under `root`; returns `root`."""
    texts = texts or FAKE_TEXTS
    constants: dict[str, list[str]] = {}
    infos: dict[str, list[tuple[str, Any]]] = {}
    functions: dict[str, dict[str, dict[int, str]]] = {}
    for name, source in TEXTS.items():
        value = texts[name]
        if isinstance(source, Constant):
            if source.name.endswith(".__info__"):
                infos.setdefault(source.file, []).append((source.name.split(".")[0], value))
            else:
                constants.setdefault(source.file, []).append(f"{source.name} = {value!r}")
            continue
        parts = _joined_literals(value, source) if isinstance(source, Joined) else {
            source: _fstring(value, source.fields) if source.fields else '"' + _escaped(value) + '"'}
        for part, literal in parts.items():
            functions.setdefault(part.file, {}).setdefault(part.function, {})[part.position] = literal
    for file in {*constants, *functions, *infos}:
        lines = ["# A made-up stand-in for a release file (tests only).", *constants.get(file, [])]
        classes: dict[str, list[str]] = {}
        for qualname, literals in functions.get(file, {}).items():
            owner, _, function = qualname.rpartition(".")
            body = [f"    _ = {literals.get(i, repr(f'pad{i}'))}" for i in range(max(literals) + 1)]
            block = [f"def {function}(self, instruction=None, action=None, e=None, task_type=None, tool_name=None):",
                     *body]
            if owner:
                classes.setdefault(owner, []).extend("    " + line for line in block)
            else:
                lines += block
        for owner, block in classes.items():
            lines += [f"class {owner}:", *block]
        for function, info in infos.get(file, []):
            if function not in functions.get(file, {}):
                lines += [f"def {function}(data, **kwargs):", "    return None"]
            lines.append(f"{function}.__info__ = {info!r}")
        path = root / file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root
