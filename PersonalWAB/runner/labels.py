"""What a run must say about itself: how it departs from the release (its `protocol`
record, which makes it standard or custom) and the notes printed beside its numbers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from PersonalWAB.agents.registry import builtin
from PersonalWAB.engines.text_embedding import EXACT
from PersonalWAB.memory import MEMORY_MODES, RELEASE_MEMORY_LENGTH, memory_mode
from PersonalWAB.results import custom_reasons
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.schema_types import RunArgs

SYNTHETIC_NOTE = "synthetic data: these numbers are not comparable to the paper's"
OTHER_DATA_NOTE = ("{source} data, not the official benchmark: these numbers compare only with runs on the same "
                   "data, not with the paper's")
CUSTOM_NOTE = ("custom run ({why}): these numbers are not comparable to the paper's tables or the leaderboard; "
               "see docs/fidelity.md")
UNPRICED_NOTE = "the model has no price in litellm's table; its calls are counted as costing 0"


def setting_departures(settings: Mapping[str, Any]) -> list[str]:
    """The departures a run's settings show by themselves (`run_args`, or a config's settings;
    a setting the release's run.py had no flag for is taken at the release's value where absent):
    `leaderboard validate` derives a file's label from them rather than trusting it as given."""
    departures = []
    strategy, memory_length = settings.get("agent_strategy"), settings.get("memory_length")
    entry = builtin(str(strategy))
    if entry is None:  # a custom agent is never the paper's
        departures.append(f"agent_strategy {strategy}: a custom agent, not in the release")
    elif not entry.in_release:
        departures.append(f"agent_strategy {strategy}: the project's offline agent, not in the release")
    if settings.get("agent_memory") != "none" and memory_length != RELEASE_MEMORY_LENGTH:
        departures.append(f"memory_length {memory_length}: the release always used {RELEASE_MEMORY_LENGTH}")
    if settings.get("search_backend", "lucene") != "lucene":
        departures.append(f"search_backend {settings['search_backend']}: the release searched with Lucene")
    if settings.get("user_mode") == "offline":
        departures.append("user_mode offline: the project's rule-based user, not the release's LLM user")
    if settings.get("max_tokens"):
        departures.append(f"max_tokens {settings['max_tokens']}: the agent's replies are cut there (the release set "
                          "no limit)")
    if settings.get("leak_guard"):
        departures.append("leak_guard: user messages masked before the agent reads them")
    if settings.get("strict"):
        departures.append("strict: the strict protocol, privileged inputs removed (user messages masked before the "
                          "agent reads them)")
    if settings.get("memory_tokens") is not None and settings.get("agent_memory") != "none":
        departures.append(f"memory_tokens {settings['memory_tokens']}: memory cut to a token budget, which the "
                          "release does not have")
    precision = settings.get("embedding_precision", EXACT)
    mode = MEMORY_MODES.get(str(settings.get("agent_memory")))
    if precision != EXACT and mode is not None and mode.embeddings:
        departures.append(f"embedding_precision {precision}: memory ranked by {precision} MiniLM vectors, not the "
                          f"release's {EXACT} (its top lists differ on a few tasks)")
    return departures


def protocol_departures(config: RunConfig) -> list[str]:
    """Every setting of this run that departs from what the release does (the texts aside)."""
    departures = setting_departures(config.settings())
    entry = builtin(config.agent_strategy)
    if entry is not None and entry.departures:
        departures += entry.load("departures")(config)
    return departures + extension_departures(config)


def extension_departures(config: RunConfig) -> list[str]:
    """A memory mode or web function of the project's (or one bringing texts the release has
    none of) makes the run custom: the mode when the run uses it, a web function always (every
    agent may be offered it, and the environment answers it)."""
    from PersonalWAB.envs.pwab.functions import WEB_FUNCTIONS

    mode = memory_mode(config.agent_memory).departure
    return [line for line in (mode, *(f.departure for f in WEB_FUNCTIONS.values())) if line is not None]


def protocol_record(protocol: Any, config: RunConfig) -> dict[str, Any]:
    """`run_args.protocol`: the texts used and every departure; standard only with the
    pinned release's texts and none."""
    departures = protocol_departures(config)
    return {"texts": protocol.name, "departures": departures,
            "standard": protocol.is_pinned_release and not departures}


def result_notes(run_args: RunArgs) -> list[str]:
    """What a reader of a finished run's numbers must know: data other than the official
    benchmark, and a custom run's reasons."""
    source = run_args["data_source"]
    notes = []
    if source.startswith("synthetic"):
        notes.append(SYNTHETIC_NOTE)
    elif source != "official":
        notes.append(OTHER_DATA_NOTE.format(source=source))
    record = run_args["protocol"]
    if not record["standard"]:
        notes.append(CUSTOM_NOTE.format(why="; ".join(custom_reasons(record, run_args.get("protocol_texts_digest")))))
    return notes
