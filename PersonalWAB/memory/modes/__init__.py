"""The table of memory modes (`--agent_memory`): one row per mode, read by the agents,
the run's checks and builds, the cost estimate and the run's labels instead of branches on
mode names. A mode is one file here (its `select` and `render`) and one row below.

| mode         | selects                            | renders                            | needs first                 |
|--------------|------------------------------------|------------------------------------|-----------------------------|
| none         | nothing                            | nothing                            |                             |
| last         | newest first                       | numbered full blocks (ReAct too)   |                             |
| random       | a draw from newest first           | numbered full blocks (ReAct too)   | the run's draws (`--seed`)  |
| relevant     | MiniLM closest to the instruction  | numbered full blocks (ReAct too)   | behaviour embeddings        |
| recmind      | newest first                       | RecMind's compact blocks           |                             |
| interecagent | newest first                       | short blocks + like/dislike/expect | --interec_memory_file       |
| taskspe      | MiniLM closest; recommend: by time | its function's fields, `|`-joined  | embeddings, chosen function |
| other_user   | another user's newest, as many     | as `last` (the project's control)  |                             |
| oracle       | MiniLM closest to the target       | as `relevant` (the project's bound)| behaviour embeddings        |

`other_user` and `oracle` are the project's controls for memory ablations (`pwab ablate`), not the
release's: another user's history of the same length, and the behaviours most related to the
target (an upper bound that reads the answer). Each is shown with the headers of the mode it
stands beside, so a model cannot tell them apart by their text.

The release ignored `--memory_length` and always used 10 (`RELEASE_MEMORY_LENGTH` in
`PersonalWAB.memory`); this project honours the flag and records any other value as a
departure.
"""

from __future__ import annotations

from PersonalWAB.memory.base import MemoryMode
from PersonalWAB.memory.modes import (interecagent, last, none, oracle, other_user, random, recmind, relevant,
                                      taskspe)

MEMORY_MODES: dict[str, MemoryMode] = {mode.name: mode for mode in (
    MemoryMode("none", none.select, none.render, texts=(), react=True),
    MemoryMode("last", last.select, last.render, texts=(*last.HEADERS, "memory.behaviour"), react=True),
    MemoryMode("random", random.select, random.render, texts=(*random.HEADERS, "memory.behaviour"), react=True,
               run_draws=True),
    MemoryMode("relevant", relevant.select, relevant.render, texts=(*relevant.HEADERS, "memory.behaviour"),
               react=True, embeddings=True),
    MemoryMode("recmind", last.select, recmind.render, texts=("memory.recmind.header", "memory.recmind.behaviour"),
               system=("system.recmind.single_turn", "system.recmind.multi_turn")),
    MemoryMode("interecagent", last.select, interecagent.render,
               texts=("memory.interecagent.behaviour", "memory.interecagent.history", "memory.interecagent.like",
                      "memory.interecagent.dislike", "memory.interecagent.expect", "interecagent.update"),
               system=("system.interecagent", "system.interecagent"), interec_store=True),
    MemoryMode("taskspe", taskspe.select, taskspe.render,
               texts=("memory.taskspe.intro", "memory.taskspe.header", "memory.taskspe.search",
                      "memory.taskspe.recommend", "memory.taskspe.review"),
               system=("system.taskspe.single_turn", "system.taskspe.multi_turn"), embeddings=True,
               chosen_function=True),
    MemoryMode("other_user", other_user.select, last.render, texts=(*other_user.HEADERS, "memory.behaviour"),
               react=True, in_release=False),
    MemoryMode("oracle", oracle.select, relevant.render, texts=(*oracle.HEADERS, "memory.behaviour"), react=True,
               embeddings=True, in_release=False),
)}


def memory_mode(name: str) -> MemoryMode:
    """The row of mode `name`; ValueError naming the modes when there is none."""
    mode = MEMORY_MODES.get(name)
    if mode is None:
        raise ValueError(f"unknown memory {name!r}; expected one of {tuple(MEMORY_MODES)}")
    return mode
