"""Per-episode analysis of multi-turn runs: how agents move between actions, and
how results evolve over successive attempts (the paper's two analysis figures).

Both are derived from the records alone, so they work on any result file,
including those of the original release.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from PersonalWAB.data.schema import TASK_TYPES
from PersonalWAB.envs.pwab.functions import WEB_FUNCTIONS
from PersonalWAB.metrics import task_score
from PersonalWAB.schema_types import Record
from PersonalWAB.types import RESPOND, STOP

START, END, OTHER = "start", "end", "other"
# A ReAct-style assistant message names its action on an `Action:` line, either as a
# bare name or as a JSON object with a "name".
REACT_ACTION = re.compile(r'^\s*Action:\s*(?:\{\s*"name"\s*:\s*")?([A-Za-z_][A-Za-z0-9_]*)', re.MULTILINE)


def action_label(name: Any) -> str:
    """The short label of an action: its web function's row label, `respond`, else `other`."""
    function = WEB_FUNCTIONS.get(str(name))
    if function is not None:
        return function.label
    return RESPOND if str(name) == RESPOND else OTHER


def state_order() -> tuple[str, ...]:
    """The order of the matrices' rows and columns: start, the table's labels in its order with
    `respond` before `stop`, other, end."""
    labels = [function.label for name, function in WEB_FUNCTIONS.items() if name != STOP]
    return (START, *labels, RESPOND, WEB_FUNCTIONS[STOP].label, OTHER, END)


def action_sequence(record: Record) -> list[str]:
    """The labels of the actions an episode took, in order, respond included.

    `info.actions` is authoritative but omits `respond`; the trajectory shows the
    responds (assistant messages with neither a tool call nor an `Action:` line).
    When the two disagree on the other actions, the trajectory is not trusted and
    only `info.actions` is used.
    """
    from_info = [action_label(a.get("name")) for a in record["info"].get("actions", []) if isinstance(a, dict)]
    from_traj: list[str] = []
    for message in record.get("traj") or []:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls") or []
        if calls:
            from_traj.extend(action_label((call.get("function") or {}).get("name")) for call in calls)
            continue
        match = REACT_ACTION.search(str(message.get("content") or ""))
        from_traj.append(action_label(match.group(1)) if match else "respond")
    if [label for label in from_traj if label != "respond"] == [label for label in from_info if label != "respond"]:
        return from_traj
    return from_info


@dataclass
class TransitionMatrix:
    """Counts of moves between consecutive actions; rows are sources, columns targets."""

    sources: list[str]
    targets: list[str]
    counts: list[list[int]]

    def row_shares(self) -> list[list[float]]:
        """Each row as a distribution (what the agent did next after that action)."""
        return [[c / sum(row) if sum(row) else 0.0 for c in row] for row in self.counts]


def transition_matrices(records: list[Record]) -> dict[str, TransitionMatrix]:
    """One matrix per task type, over start -> actions -> end of every episode."""
    pairs: dict[str, dict[tuple[str, str], int]] = {kind: {} for kind in TASK_TYPES}
    for record in records:
        steps = [START, *action_sequence(record), END]
        counts = pairs.setdefault(record["info"]["task"]["type"], {})
        for pair in zip(steps, steps[1:]):
            counts[pair] = counts.get(pair, 0) + 1
    matrices = {}
    order = state_order()
    for kind, counts in pairs.items():
        used = {state for pair in counts for state in pair}
        sources = [s for s in order if s in used and s != END]
        targets = [s for s in order if s in used and s != START]
        matrices[kind] = TransitionMatrix(sources, targets,
                                          [[counts.get((s, t), 0) for t in targets] for s in sources])
    return matrices


@dataclass
class AttemptRow:
    """What happened at attempt number `attempt` across the tasks of one type."""

    attempt: int
    tasks: int  # tasks that made this attempt
    mean_res_acc: float  # mean result acc of these attempts (0 when the wrong function was called)
    solved: int  # tasks whose final score was first reached at this attempt (and is above 0)


def attempt_profile(records: list[Record]) -> dict[str, list[AttemptRow]]:
    """Per task type: result acc and tasks solved by attempt number (1-based)."""
    profile: dict[str, list[AttemptRow]] = {}
    for kind in TASK_TYPES:
        members = [r for r in records if r["info"]["task"]["type"] == kind]
        longest = max((len(r["res_acc"]) for r in members), default=0)
        rows = []
        for k in range(longest):
            scores = [r["res_acc"][k] if r["action_acc"][k] == 1 else 0.0 for r in members if len(r["res_acc"]) > k]
            rows.append(AttemptRow(k + 1, len(scores), sum(scores) / len(scores), 0))
        for record in members:
            first_best = _first_best_attempt(record)
            if first_best is not None:
                rows[first_best].solved += 1
        profile[kind] = rows
    return profile


def _first_best_attempt(record: Record) -> int | None:
    if not is_solved(record):
        return None
    scores = [res if act == 1 else 0.0 for act, res in zip(record["action_acc"], record["res_acc"])]
    return scores.index(max(scores))


def is_solved(record: Record) -> bool:
    """Solved: the right function was called and its best result scored above 0."""
    function_acc, res_acc = task_score(record["action_acc"], record["res_acc"])
    return function_acc == 1 and res_acc > 0
