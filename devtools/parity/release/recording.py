"""The release's own behaviour, observed inside the release's process for the parity harness.

Loaded by the release worker (worker.py) by path (it imports nothing of this project).

`install(FILE)` (the `record_env` of the worker's request, before the release's script or run.py
starts) records, writing FILE after every call (the release's run.py may die in its agent;
what came before is kept):

* `steps`: every `env.step` of the release's environment (`PWABaseEnv.step`): the task index,
  the action as the agent sent it (name and arguments), the observation, the scores and done;
* `recommend_inputs`: every product sequence a release script that imports the recommender
  function (test.py) gave it, in the order that script made (test.py's `list(set(...))` under
  the harness's hash seed). The environment keeps the function it imported first: its calls
  are in `steps`.

`write_set_orders` (the worker's `set_orders`) applies test.py's reading of a recommend
candidate to texts, in a process with the release's hash seed, so that candidates can be
picked by the order the release will give them before the release runs.
"""

from __future__ import annotations

import copy
import functools
import importlib
import json
import threading
from pathlib import Path
from typing import Any

RECOMMENDER_MODULE = "PersonalWAB.envs.pwab.functions.get_recommendations_by_history"


def install(out: Path) -> None:
    """Wrap the release's env step and recommender function; FILE holds what they saw."""
    from PersonalWAB.envs.base import PWABaseEnv

    seen: dict[str, list[Any]] = {"steps": [], "recommend_inputs": []}
    lock = threading.Lock()

    def write() -> None:
        out.write_text(json.dumps(seen, default=str), encoding="utf-8")

    step = PWABaseEnv.step

    def recorded_step(env: Any, action: Any) -> Any:
        sent = copy.deepcopy(action)
        observation, res, done, info = step(env, action)
        with lock:
            seen["steps"].append({"task_index": env.index, "action": sent, "observation": observation,
                                  "res": [float(r) for r in res], "done": bool(done)})
            write()
        return observation, res, done, info

    PWABaseEnv.step = recorded_step
    # by module, not attribute: the functions package rebinds the submodule's name to the function
    module = importlib.import_module(RECOMMENDER_MODULE)
    recommend = module.get_recommendations_by_history

    @functools.wraps(recommend)
    def recorded_recommend(data: Any, product_sequence: Any) -> Any:
        with lock:
            seen["recommend_inputs"].append(list(product_sequence))
            write()
        return recommend(data=data, product_sequence=product_sequence)

    module.get_recommendations_by_history = recorded_recommend
    write()


def set_order(text: str) -> list[str]:
    """test.py's reading of a recommend candidate: split on commas, stripped, through a set."""
    return list(set(part.strip() for part in text.split(",")))


def write_set_orders(texts: Path, out: Path) -> None:
    candidates = json.loads(texts.read_text(encoding="utf-8"))
    out.write_text(json.dumps({text: set_order(text) for text in candidates}), encoding="utf-8")
