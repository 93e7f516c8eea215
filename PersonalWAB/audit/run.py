"""What a run's agent was given that a deployed agent would not have, per task: its privileged inputs.

- `user_messages_naming_target`: messages of the simulated user that reached the agent holding the
  target's ASIN (with the run's data, also a span of 8 or more words copied from the user's real
  review: the leak guard's rule). Single-turn runs have no simulated user.
- `leak_guard_masked`: messages that held the target and that the leak guard masked before the agent
  read them (`--leak_guard`, `--strict`): removed, counted so that one sees what was there.
- `memory_by_true_type`: PUMA's parameter prompt formatted the memory for the task's *true* type (a
  label no deployed agent has): the release recipe's live agent does, and so do the outputs of `puma
  generate` read from files (their prompts are `puma data`'s, formatted for the true type); `decisive`
  counts the tasks whose first call was of another type than the true one.

The summary of a run (`run_summary`) needs only the result file: it goes into the result header
(`audit`), `leaderboard validate` recomputes it and flags a run with privileged inputs, and the report
shows it. `pwab audit FILE --data_dir DIR` adds the review-span check, per task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from PersonalWAB.envs.users.leak_guard import guard_message
from PersonalWAB.schema_types import Record, Task

STRICT_REMOVES = ("user_messages_naming_target",)  # what --strict removes (the leak guard masks them)
PUMA_FIX = "not removable by --strict: run PUMA live with --recipe improved (memory for the predicted function)"


def _simulated_user(run_args: Mapping[str, Any]) -> bool:
    return run_args.get("user_mode", "no") != "no"


@dataclass(frozen=True)
class RunTexts:
    """What tells the simulated user's messages from the environment's in a trajectory: ReAct's tool
    observation prefix, and the opening of the environment's first observation (`USER <id>: <task>`,
    which a review task follows with the product the user is reviewing: the task's, not a leak)."""

    react_prefix: str
    protocol: Any  # the run's texts (`PersonalWAB.failures.run_protocol`)

    @classmethod
    def of(cls, run_args: Mapping[str, Any]) -> RunTexts:
        from PersonalWAB.failures import run_protocol

        protocol = run_protocol(run_args)
        return cls(str(protocol.text("react.api_output")), protocol)

    def environment_opening(self, record: Record) -> str:
        task = record["info"]["task"]
        return str(self.protocol.fill("first_observation.request", user_id=task["user_id"], task=task["task"]))


def user_messages(record: Record, run_args: Mapping[str, Any], texts: RunTexts) -> list[str]:
    """The simulated user's messages the agent read (none in a single-turn run): the trajectory's
    user messages, the environment's first observation and ReAct's tool observations left out."""
    if not _simulated_user(run_args):
        return []
    opening = texts.environment_opening(record)
    found = []
    for i, message in enumerate(record["traj"]):
        content = message.get("content") if isinstance(message, dict) else None
        if message.get("role") != "user" or not isinstance(content, str):
            continue
        if (i == 1 and content.startswith(opening)) or (texts.react_prefix and content.startswith(texts.react_prefix)):
            continue
        found.append(content)
    return found


def memory_by_true_type(run_args: Mapping[str, Any]) -> str | None:
    """Why a run's PUMA agent read memory formatted for the true task type (None: it did not)."""
    if run_args.get("agent_strategy") != "puma":
        return None
    settings = run_args.get("agent_settings")
    outputs = settings.get("outputs") if isinstance(settings, dict) else None
    if outputs == "generated":
        return ("the release recipe's live agent formats the memory for the task's true type"
                if run_args.get("recipe", "release") == "release" else None)
    return ("the parameters come from puma generate over puma data's prompts, whose memory is formatted for the true "
            "type")


def task_privileges(record: Record, run_args: Mapping[str, Any], texts: RunTexts,
                    task: Task | None = None) -> dict[str, Any]:
    """The privileged inputs of one task run (`task`: its whole task from the data, for the review-span check)."""
    asin = str(record["info"]["task"]["target"])
    named = []
    for message in user_messages(record, run_args, texts):
        if task is not None:
            kinds = guard_message(message, task).masked
        else:
            kinds = ["target_asin"] if asin and asin.lower() in message.lower() else []
        if kinds:
            named.append(kinds)
    privileges: dict[str, Any] = {"user_messages_naming_target": len(named),
                                  "leak_guard_masked": len(record["info"].get("leak_guard") or [])}
    if named and task is not None:
        privileges["kinds"] = sorted({kind for kinds in named for kind in kinds})
    if memory_by_true_type(run_args):
        types = [a.get("name") for a in record["info"].get("actions", []) if isinstance(a, dict)]
        from PersonalWAB.data.schema import TASK_TYPE_OF_FUNCTION

        first = next((TASK_TYPE_OF_FUNCTION[name] for name in types if name in TASK_TYPE_OF_FUNCTION), None)
        privileges["memory_by_true_type"] = 1
        privileges["memory_by_true_type_decisive"] = int(first is not None and first != record["info"]["task"]["type"])
    return privileges


def run_summary(run_args: Mapping[str, Any], records: list[Record]) -> dict[str, Any]:
    """The run's audit as the result header holds it: per privileged input, the task runs and the
    count; what --strict removed and what remains. Computed from the file alone."""
    texts = RunTexts.of(run_args)
    per_task = [task_privileges(record, run_args, texts) for record in records]
    counts: dict[str, Any] = {}
    for key in ("user_messages_naming_target", "leak_guard_masked", "memory_by_true_type",
                "memory_by_true_type_decisive"):
        values = [privileges.get(key, 0) for privileges in per_task]
        counts[key] = {"tasks": sum(1 for value in values if value), "count": sum(values)}
    strict = bool(run_args.get("strict"))
    remaining = [key for key in ("user_messages_naming_target", "memory_by_true_type") if counts[key]["tasks"]]
    summary = {"strict": strict, "privileged_inputs": counts,
               "removed": [key for key in STRICT_REMOVES if strict or run_args.get("leak_guard")],
               "remaining": remaining}
    reason = memory_by_true_type(run_args)
    if reason:
        summary["memory_by_true_type_reason"] = f"{reason}; {PUMA_FIX}"
    return summary


def privileged_flags(summary: Mapping[str, Any]) -> list[str]:
    """One line per privileged input that reached the agent (validate's warning, the report's banner)."""
    counts = summary.get("privileged_inputs") or {}
    lines = []
    named = counts.get("user_messages_naming_target", {})
    if named.get("tasks"):
        lines.append(f"{named['count']} simulated-user message(s) in {named['tasks']} task run(s) named the target "
                     "(the leak guard or --strict masks them)")
    memory = counts.get("memory_by_true_type", {})
    if memory.get("tasks"):
        decisive = counts.get("memory_by_true_type_decisive", {}).get("tasks", 0)
        lines.append(f"{memory['tasks']} task run(s) read PUMA memory formatted for the true task type ({decisive} "
                     f"where the agent's call was of another type): {summary.get('memory_by_true_type_reason', '')}")
    return lines
