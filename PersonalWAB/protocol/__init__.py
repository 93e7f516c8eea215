"""Everything a model sees, in one place: tool schemas, observations, system prompts,
memory, ReAct and reflection texts, the user simulator's prompts and PUMA's prompts.

A `Protocol` holds one set of texts, either the original release's (read from a
release protocol pack, see `pack.py`) or the project's own wording
(`project_texts.py`), and renders them exactly as the release does: the same fields in
the same order, Python's `str()` of values where the release uses it, `json.dumps` for
details. Environments, agents, user simulators, memory and PUMA ask a `Protocol` for
text; nothing else builds model-facing text.

`load_protocol(path)` reads a pack (default location `DEFAULT_PACK`, overridden by
`run.py --protocol_file`); without one, the project's texts are used and
`Protocol.name` says `project`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import string
import threading
from pathlib import Path
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from PersonalWAB.errors import DataError
from PersonalWAB.paths import OFFICIAL_DATA_DIR
from PersonalWAB.protocol.spec import RELEASE_PROTOCOL_DIGEST, RELEASE_SHORT, TEXTS, Constant, Field, Inline, Joined
from PersonalWAB.schema_types import Behaviour, Product, Task, UserProfile

# Where a placed pack is found; $PERSONALWAB_PROTOCOL_PACK moves it (the test suite points it
# at an empty folder so that its subprocesses, too, see the project's texts).
PACK_ENV = "PERSONALWAB_PROTOCOL_PACK"
DEFAULT_PACK = Path(os.environ.get(PACK_ENV) or OFFICIAL_DATA_DIR / "release_protocol.json")
# Bumped when a renderer changes what it writes, so caches of rendered text are rebuilt.
RENDERER_VERSION = 1
PROJECT = "project"


def _text(value: Any) -> str:
    """The release writes `str(x)` for most fields and inserts strings as they are."""
    return value if isinstance(value, str) else str(value)


def fill_placeholders(template: str, values: Sequence[tuple[str, Any]]) -> str:
    """Replace placeholders one after another, in the release's order (a later
    placeholder inside an earlier value is replaced too, as there)."""
    for placeholder, value in values:
        template = template.replace(placeholder, _text(value))
    return template


def fill_steps(system_prompt: str, max_steps: int) -> str:
    """A system prompt with its step budget filled in. Only multi-turn texts have the `<NUM>`
    placeholder, and InteRecAgent's one text for both tracks, which the release fills with
    -1 in single-turn (`check_shapes` holds a pack's texts to the project's placeholders)."""
    return system_prompt.replace("<NUM>", str(max_steps))


def own_texts_note(texts: Mapping[str, Any]) -> str:
    """How a run names the texts a memory mode or web function brings beside the release's:
    their names and a digest of their words. The note is part of the run's protocol record,
    so a resume with other words is refused, as it is for the protocol's own texts."""
    from PersonalWAB.protocol.pack import text_digest

    return f"texts of its own: {', '.join(sorted(texts))} (sha256 {text_digest(dict(texts))[:12]})"


def _format_template(parts: Iterable[tuple[str, str | None]]) -> str:
    """A `str.format` template from literal text and field names."""
    return "".join(text.replace("{", "{{").replace("}", "}}") + ("" if name is None else "{" + name + "}")
                   for text, name in parts)


def _from_fstring(body: str, fields: dict[str, str], where: str) -> str:
    parts = []
    for literal, expression, _spec, _conversion in string.Formatter().parse(body):
        if expression is not None and expression not in fields:
            raise DataError(f"protocol pack: {where} has an unexpected field {{{expression}}}")
        parts.append((literal, None if expression is None else fields[expression]))
    return _format_template(parts)


def texts_from_pack(pack: dict[str, Any]) -> dict[str, Any]:
    """The pack's texts under the project's names, f-strings turned into format templates."""
    files = pack["files"]

    def raw(source: Constant | Inline) -> Any:
        return files[source.file]["texts"][source.key]

    texts: dict[str, Any] = {}
    for name, source in TEXTS.items():
        if isinstance(source, Joined):
            parts: list[tuple[str, str | None]] = []
            for part in source.parts:
                if isinstance(part, Field):
                    parts.append(("", part.name))
                else:
                    value = raw(part)
                    if not isinstance(value, str):
                        raise DataError(f"protocol pack: {part.file} {part.key} is not a plain string")
                    parts.append((value, None))
            texts[name] = _format_template(parts)
        elif isinstance(source, Inline) and source.fields:
            value = raw(source)
            if not isinstance(value, dict) or "fstring" not in value:
                raise DataError(f"protocol pack: {source.file} {source.key} is not an f-string")
            texts[name] = _from_fstring(value["fstring"], source.fields, f"{source.file} {source.key}")
        else:
            texts[name] = raw(source)
    return texts


class Protocol:
    """One set of model-facing texts and the renderers that fill them."""

    def __init__(self, texts: dict[str, Any], name: str, pack_path: Path | None = None):
        missing = [key for key in TEXTS if key not in texts]
        if missing:
            raise DataError(f"protocol {name}: texts missing: {', '.join(missing)}")
        self.texts = texts
        self.name = name
        self.pack_path = pack_path

    @property
    def is_release(self) -> bool:
        return self.name.startswith("release@")

    @property
    def is_pinned_release(self) -> bool:
        return self.name == f"release@{RELEASE_SHORT}"

    def text(self, name: str) -> Any:
        return self.texts[name]

    def fingerprint(self, *names: str) -> str:
        """A short digest of some texts: caches of what they render (search indexes, memory
        embeddings) record it and are rebuilt when it changes."""
        digest = hashlib.sha256(str(RENDERER_VERSION).encode())
        for name in names:
            digest.update(json.dumps([name, self.texts[name]], sort_keys=True).encode())
        return digest.hexdigest()[:16]

    @property
    def texts_digest(self) -> str:
        """The fingerprint of every text: result files record it, and a resume with other texts
        is refused."""
        return self.fingerprint(*sorted(self.texts))

    @property
    def contents_fingerprint(self) -> str:
        """The texts behind a search index's documents (`product_block`)."""
        return self.fingerprint("product")

    def fill(self, text_name: str, /, **fields: Any) -> str:
        return self.texts[text_name].format(**fields)

    # --- tools --------------------------------------------------------------------------------------------
    def tool(self, name: str) -> dict[str, Any]:
        return json.loads(json.dumps(self.texts[f"tool.{name}"]))  # a copy callers may not change ours through

    def tools(self, names: Iterable[str]) -> list[dict[str, Any]]:
        return [self.tool(name) for name in names]

    # --- products and observations ---------------------------------------------------------------------------
    def _product(self, template: str, product: Product, num: Any = None) -> str:
        values: list[tuple[str, Any]] = [("<CATEGORY>", str(product.get("main_category")))]
        if num is not None:
            values.append(("<Num>", str(num)))
        values += [("<TITLE>", product.get("title")), ("<AVERAGE_RATING>", str(product.get("average_rating"))),
                   ("<RATING_NUMBER>", str(product.get("rating_number"))),
                   ("<FEATURES>", str(product.get("features"))), ("<DESCRIPTION>", str(product.get("description"))),
                   ("<PRICE>", str(product.get("price"))), ("<STORE>", str(product.get("store"))),
                   ("<DETAILS>", json.dumps(product.get("details"))), ("<PARENT_ASIN>", product.get("parent_asin"))]
        return fill_placeholders(self.texts[template], values)

    def product_block(self, product: Product) -> str:
        """A product as the user simulator and the first observation of a review task show it;
        also the `contents` stored for each product by the search indexes this project builds."""
        return self._product("product", product)

    def recommendation_block(self, product: Product, num: int) -> str:
        return self._product("recommend.product", product, num)

    def details_block(self, product: Product) -> str:
        return self._product("details.product", product)

    def search_result(self, rank: int, contents: str) -> str:
        return self.fill("search.result", rank=rank, contents=contents)

    def first_observation(self, task: Task) -> str:
        """What the agent reads first: the user's request, and for a review the product."""
        text = self.fill("first_observation.request", user_id=task["user_id"], task=task["task"])
        if task["type"] == "review":
            text += self.fill("first_observation.product", product=self.product_block(task["target"]["product_info"]))
        return text

    def error(self, message: Any) -> str:
        return self.fill("env.error", error=message)

    def unknown_action(self, name: Any) -> str:
        return self.fill("env.unknown_action", name=name)

    # --- memory ---------------------------------------------------------------------------------------------
    def behaviour_block(self, behaviour: Behaviour, num: int, template: str = "memory.behaviour") -> str:
        """A past purchase with its review, numbered (`relevant` memory ranks these texts)."""
        product, review = behaviour["product_info"], behaviour["review"]
        return fill_placeholders(self.texts[template], [
            ("<TITLE>", product.get("title")), ("<PARENT_ASIN>", product.get("parent_asin")),
            ("<AVERAGE_RATING>", str(product.get("average_rating"))),
            ("<RATING_NUMBER>", str(product.get("rating_number"))), ("<PRICE>", str(product.get("price"))),
            ("<STORE>", str(product.get("store"))), ("<DETAILS>", json.dumps(product.get("details"))),
            ("<DESCRIPTION>", str(product.get("description"))), ("<FEATURES>", str(product.get("features"))),
            ("<MAIN_CATEGORY>", str(product.get("main_category"))), ("<RATING>", str(review.get("rating"))),
            ("<TEXT>", review.get("text")), ("<TIMESTAMP>", str(review.get("timestamp"))), ("<NUM>", str(num)),
        ])

    def recmind_block(self, behaviour: Behaviour, num: int) -> str:
        product, review = behaviour["product_info"], behaviour["review"]
        return fill_placeholders(self.texts["memory.recmind.behaviour"], [
            ("<TITLE>", product.get("title")), ("<PARENT_ASIN>", product.get("parent_asin")),
            ("<MAIN_CATEGORY>", str(product.get("main_category"))), ("<RATING>", str(review.get("rating"))),
            ("<TEXT>", review.get("text")), ("<TIMESTAMP>", str(review.get("timestamp"))), ("<NUM>", str(num)),
        ])

    def interecagent_block(self, behaviour: Behaviour) -> str:
        product, review = behaviour["product_info"], behaviour["review"]
        return fill_placeholders(self.texts["memory.interecagent.behaviour"], [
            ("<TITLE>", product.get("title")), ("<PARENT_ASIN>", product.get("parent_asin")),
            ("<MAIN_CATEGORY>", str(product.get("main_category"))), ("<RATING>", str(review.get("rating"))),
            ("<TEXT>", review.get("text")),
        ])

    def taskspe_entry(self, behaviour: Behaviour, task_type: str, prefix: str = "memory.taskspe") -> str:
        """One entry of PUMA's task-specific memory: only the fields the task's function needs."""
        product, review = behaviour["product_info"], behaviour["review"]
        template = self.texts[f"{prefix}.{task_type}"]
        if task_type == "search":
            values = [("<TITLE>", product.get("title")), ("<MAIN_CATEGORY>", str(product.get("main_category"))),
                      ("<PRICE>", str(product.get("price"))), ("<STORE>", str(product.get("store")))]
        elif task_type == "recommend":
            values = [("<TITLE>", product.get("title")), ("<MAIN_CATEGORY>", str(product.get("main_category"))),
                      ("<ASIN>", str(product.get("parent_asin")))]
        elif task_type == "review":
            values = [("<RATING>", str(review.get("rating"))), ("<TEXT>", review.get("text"))]
        else:
            raise ValueError(f"unknown task type {task_type!r}")
        return fill_placeholders(template, values)

    def numbered_memory(self, header: str, blocks: list[str]) -> str:
        return self.texts[header] + "\n".join(blocks)

    def interecagent_memory(self, history_blocks: list[str], preferences: dict[str, list[str]]) -> str:
        """History, then the like / dislike / expect lists as Python writes a list."""
        return (self.texts["memory.interecagent.history"] + "\n".join(history_blocks)
                + self.texts["memory.interecagent.like"] + str(list(preferences.get("like", [])))
                + self.texts["memory.interecagent.dislike"] + str(list(preferences.get("dislike", [])))
                + self.texts["memory.interecagent.expect"] + str(list(preferences.get("expect", []))))

    def taskspe_agent_memory(self, task_type: str, tool_name: str, entries: list[str]) -> str:
        return (self.fill("memory.taskspe.intro", task_type=task_type, tool_name=tool_name)
                + self.texts["memory.taskspe.header"] + "|".join(entries))

    # --- system prompts ---------------------------------------------------------------------------------------
    def react_system_prompt(self, max_steps: int, tools: list[dict[str, Any]]) -> str:
        """The track's system prompt, the tool schemas as JSON, the ReAct instructions."""
        base = fill_steps(self.texts["system.single_turn" if max_steps == -1 else "system.multi_turn"], max_steps)
        return base + self.texts["react.tools_header"] + json.dumps(tools) + self.texts["react.instructions"]

    def reflection_prompt(self, task: str, actions: str, feedback: str) -> str:
        return fill_placeholders(self.texts["reflection.prompt"],
                                 [("<TASK>", task), ("{conversation}", actions), ("<ACTIONS>", actions),
                                  ("<FEEDBACK>", feedback)])

    def interecagent_update_prompt(self, conversation: str) -> str:
        return self.texts["interecagent.update"].replace("{conversation}", conversation)

    def interecagent_init_prompt(self, behaviours: list[Behaviour]) -> str:
        blocks = []
        for behaviour in behaviours:
            product = behaviour["product_info"]
            block = fill_placeholders(self.texts["interecagent.init.behaviour"], [
                ("<TITLE>", product.get("title")), ("<CATEGORIES>", str(product.get("categories"))),
                ("<PARENT_ASIN>", product.get("parent_asin"))])
            blocks.append(fill_placeholders(block, [("<RATING>", str(behaviour["review"].get("rating"))),
                                                    ("<REVIEW_TEXT>", behaviour["review"].get("text"))]))
        return self.texts["interecagent.init.prompt"].replace("{History}", "".join(blocks))

    # --- the LLM user simulator ----------------------------------------------------------------------------------
    def profile_block(self, profile: UserProfile) -> str:
        """The persona: profile fields, with the three levels spelled out as behaviour."""
        def level(kind: str, key: str) -> str:
            descriptions = self.texts[f"user.{kind}"]
            value = profile.get(key)
            if value not in descriptions:
                raise DataError(f"profile field {key!r} is {value!r}; expected one of {sorted(descriptions)}")
            return descriptions[value]

        return fill_placeholders(self.texts["user.profile"], [
            ("<GENDER>", profile.get("Gender")), ("<AGE>", profile.get("Age")),
            ("<OCCUPATION>", profile.get("Occupation")),
            ("<PRICE_SENSITIVITY>", level("price_sensitivity", "Price Sensitivity")),
            ("<SHOPPING_INTEREST>", profile.get("Shopping Interest")),
            ("<BRAND_PREFERENCE>", profile.get("Brand Preference")),
            ("<DIVERSITY_PREFERENCE>", level("diversity_preference", "Diversity Preference")),
            ("<INTERACTION_STYLE>", level("interaction_complexity", "Interaction Complexity")),
            ("<TONE_AND_STYLE>", profile.get("Tone and Style")), ("<ITEM_REFERENCE>", profile.get("Item Reference")),
            ("<FOCUS>", profile.get("Focus Aspect")),
        ])

    def user_prompt(self, task: Task, profile: UserProfile) -> str:
        profile_text = self.profile_block(profile)
        product = self.product_block(task["target"]["product_info"])
        if task["type"] == "review":
            return fill_placeholders(self.texts["user.prompt.review"],
                                     [("<PROFILE>", profile_text), ("<PRODUCT>", product),
                                      ("<REVIEW>", task["target"]["review"]["text"])])
        return fill_placeholders(self.texts["user.prompt"], [("<PROFILE>", profile_text), ("<PRODUCT>", product)])

    # --- PUMA ------------------------------------------------------------------------------------------------------
    def puma_product(self, product: Product, template: str = "puma.product") -> str:
        return fill_placeholders(self.texts[template], [
            ("<Title>", product.get("title")), ("<Price>", str(product.get("price"))),
            ("<Store>", str(product.get("store"))), ("<Main Category>", str(product.get("main_category")))])

    def puma_function_prompt(self, instruction: str) -> str:
        return self.texts["puma.function_prompt"].replace("<Instruction>", instruction)

    def puma_memory(self, behaviours: list[Behaviour], task_type: str) -> str:
        """PUMA's task-specific memory text: the entries joined by a bare `|`."""
        return "|".join(self.taskspe_entry(b, task_type, prefix="puma.taskspe") for b in behaviours)

    def puma_param_prompt(self, instruction: str, tool: str, memory: str,
                          product: Product | None = None, *, agent: bool = False) -> str:
        """The parameter prompt: the instruction (with the product under review appended for
        a review task), the memory, the tool name. The release trains with one prompt and its
        agent evaluates with another (`agent=True`: its own template, placeholder and product
        text)."""
        template, slot, product_text = (("puma.agent.param_prompt", "<Insturction>", "puma.agent.product") if agent
                                        else ("puma.param_prompt", "<Instruction>", "puma.product"))
        task_text = instruction + (self.puma_product(product, product_text) if product is not None else "")
        prompt = self.texts[template].replace(slot, task_text)
        return prompt.replace("<Memory>", memory).replace("<Tool>", tool)

    def puma_search_label_prompt(self, instruction: str, memory: str) -> str:
        return self.texts["puma.search_label_prompt"].replace("<Instruction>", instruction).replace("<Memory>", memory)


_LOADED: dict[str, Protocol] = {}
_LOCK = threading.Lock()


def project_protocol() -> Protocol:
    from PersonalWAB.protocol.project_texts import PROJECT_TEXTS

    return Protocol(PROJECT_TEXTS, PROJECT)


_PLACEHOLDER = re.compile(r"<[A-Za-z_ ]+>|\{[A-Za-z_]+\}")


def _shape(value: Any) -> Any:
    """What the renderers rely on in a text: its placeholders; a tool's name and parameters;
    a level table's keys."""
    if isinstance(value, str):
        return sorted(set(_PLACEHOLDER.findall(value)))
    if isinstance(value, dict) and "function" in value:
        function = value["function"]
        return [function.get("name"), sorted((function.get("parameters") or {}).get("properties", {}))]
    return sorted(value) if isinstance(value, dict) else type(value).__name__


def check_shapes(texts: dict[str, Any], where: str) -> None:
    """Every text has the placeholders (tool: name and parameters) the renderers fill, as the
    project's own texts do; a mismatch means a text was read from the wrong place."""
    reference = project_protocol().texts
    for name, value in texts.items():
        if _shape(value) != _shape(reference[name]):
            raise DataError(f"{where}: text {name!r} has {_shape(value)}, the renderers need "
                            f"{_shape(reference[name])}; was the pack built from another version of the release?")


def protocol_from_pack(path: Path | str) -> Protocol:
    from PersonalWAB.protocol.pack import read_pack

    pack = read_pack(path)
    name = f"release@{RELEASE_SHORT}" if pack["release"].get("pinned") else "release@unpinned"
    texts = texts_from_pack(pack)
    check_shapes(texts, str(path))
    protocol = Protocol(texts, name, Path(path))
    if protocol.is_pinned_release and protocol.texts_digest != RELEASE_PROTOCOL_DIGEST:
        raise DataError(f"{path}: the pinned release's texts render with digest {protocol.texts_digest}, but this "
                        f"project records {RELEASE_PROTOCOL_DIGEST} for them (RENDERER_VERSION changed?): update "
                        "RELEASE_PROTOCOL_DIGEST in PersonalWAB/protocol/spec.py, or runs with it would be labelled "
                        "custom")
    return protocol


def load_protocol(path: Path | str | None = None) -> Protocol:
    """The pack at `path`; without a path the default pack when placed, else the project's texts.
    Loaded once per path and shared."""
    key = str(Path(path).resolve()) if path else ""
    with _LOCK:
        if key not in _LOADED:
            if path:
                _LOADED[key] = protocol_from_pack(path)
            elif DEFAULT_PACK.is_file():
                _LOADED[key] = protocol_from_pack(DEFAULT_PACK)
            else:
                _LOADED[key] = project_protocol()
        return _LOADED[key]
