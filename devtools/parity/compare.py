"""Comparing what the original release and this project produce: canonical request bodies,
short diffs, and per-check tallies (see scripts/tools/release_parity.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

CONTEXT = 50  # characters shown either side of a first difference
REVIEW_TOLERANCE = 1e-6  # MiniLM cosines from two implementations of the same pooling
RANK_TOLERANCE = 1e-9
BODY_PARTS = ("messages", "tools")


def canonical(value: Any) -> str:
    """JSON with sorted keys and no spacing, so equal bodies compare equal byte for byte."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def first_difference(release: str, project: str, context: int = CONTEXT) -> str | None:
    """Where two strings first differ, with a little of each around it; None when equal."""
    if release == project:
        return None
    at = next((i for i, (a, b) in enumerate(zip(release, project)) if a != b), min(len(release), len(project)))
    start = max(0, at - context // 2)
    return (f"at char {at} (lengths {len(release)} vs {len(project)}): "
            f"release {release[start:at + context]!r} | project {project[start:at + context]!r}")


def wire_message(message: Any) -> Any:
    """A message as the API reads it: an assistant's `"content": null` beside its tool calls is
    dropped, because litellm (the project's client) never sends null fields, while the
    release's OpenAI client sent it; the API reads the two alike."""
    if isinstance(message, dict) and message.get("role") == "assistant" and message.get("content", "") is None:
        return {k: v for k, v in message.items() if k != "content"}
    return message


def messages_difference(release: list[Any], project: list[Any]) -> str | None:
    """The first message that differs, named by position and role, and how."""
    release, project = [wire_message(m) for m in release], [wire_message(m) for m in project]
    for i, (a, b) in enumerate(zip(release, project)):
        if canonical(a) == canonical(b):
            continue
        role = a.get("role") if isinstance(a, dict) else type(a).__name__
        if isinstance(a, dict) and isinstance(b, dict):
            keys_a, keys_b = sorted(a), sorted(b)
            if keys_a != keys_b:
                return f"message {i} ({role}): keys {keys_a} vs {keys_b}"
            for key in keys_a:
                if canonical(a[key]) != canonical(b[key]):
                    if isinstance(a[key], str) and isinstance(b[key], str):
                        return f"message {i} ({role}) {key} {first_difference(a[key], b[key])}"
                    return f"message {i} ({role}) {key} {first_difference(canonical(a[key]), canonical(b[key]))}"
        return f"message {i} ({role}) {first_difference(canonical(a), canonical(b))}"
    if len(release) != len(project):
        return f"{len(release)} messages vs {len(project)}"
    return None


def tools_difference(release: Any, project: Any) -> str | None:
    """The first tool schema that differs (by position and name)."""
    if canonical(release) == canonical(project):
        return None
    release, project = release or [], project or []
    names = ([t.get("function", {}).get("name") for t in release], [t.get("function", {}).get("name") for t in project])
    if names[0] != names[1]:
        return f"tool names {names[0]} vs {names[1]}"
    for a, b in zip(release, project):
        if canonical(a) != canonical(b):
            return f"tool {a.get('function', {}).get('name')}: {first_difference(canonical(a), canonical(b))}"
    return None


def other_fields(body: dict[str, Any]) -> dict[str, Any]:
    """Everything in a request body besides messages and tools (model, temperature, tool_choice, ...)."""
    return {k: v for k, v in body.items() if k not in BODY_PARTS}


def fields_difference(release: dict[str, Any], project: dict[str, Any]) -> dict[str, Any]:
    """Per key that differs: the release's and the project's value (`<absent>` when not sent)."""
    absent = "<absent>"
    return {key: [release.get(key, absent), project.get(key, absent)] for key in sorted(set(release) | set(project))
            if canonical(release.get(key, absent)) != canonical(project.get(key, absent))}


def body_difference(release: dict[str, Any] | None, project: dict[str, Any] | None) -> dict[str, str]:
    """Which of messages / tools differ, and how; empty when both are byte-identical."""
    if release is None or project is None:
        return {"missing": "no request from the " + ("release" if release is None else "project")}
    found = {"messages": messages_difference(release.get("messages") or [], project.get("messages") or []),
             "tools": tools_difference(release.get("tools"), project.get("tools"))}
    return {part: diff for part, diff in found.items() if diff}


def score_verdict(release: list[float], project: list[float], review_cosine: bool) -> str:
    """`identical`, `floored` (the release's negative cosine that the project floors at 0, by design)
    or `differs`."""
    if len(release) != 2 or len(project) != 2 or release[0] != project[0]:
        return "differs"
    tolerance = REVIEW_TOLERANCE if review_cosine else RANK_TOLERANCE
    if abs(release[1] - project[1]) <= tolerance:
        return "identical"
    if review_cosine and release[1] < 0 and project[1] == 0:
        return "floored"
    return "differs"


@dataclass
class Tally:
    """How many items were compared and how many were identical, overall and per task type,
    with the first difference met (the checklist entry a reader starts from)."""

    compared: int = 0
    identical: int = 0
    by_type: dict[str, list[int]] = field(default_factory=dict)
    first_difference: dict[str, Any] | None = None
    noted: dict[str, int] = field(default_factory=dict)  # e.g. floored cosines: reported, not failures
    facts: dict[str, Any] = field(default_factory=dict)  # measured alongside (e.g. how many scores hit)
    not_comparable: str | None = None  # why these inputs give the item nothing to compare (not a failure)

    def add(self, task_type: str, same: bool, where: dict[str, Any] | None = None) -> None:
        self.compared += 1
        counts = self.by_type.setdefault(task_type, [0, 0])
        counts[0] += 1
        if same:
            self.identical += 1
            counts[1] += 1
        elif self.first_difference is None:
            self.first_difference = where

    def note(self, what: str) -> None:
        self.noted[what] = self.noted.get(what, 0) + 1

    def cannot_compare(self, why: str) -> None:
        """Say the item has nothing to compare on these inputs (never a difference: the inputs'
        property, reported with the reason)."""
        self.not_comparable = why

    @property
    def all_identical(self) -> bool:
        return self.identical == self.compared

    def line(self, label: str) -> str:
        types = ", ".join(f"{t} {c[1]}/{c[0]}" for t, c in sorted(self.by_type.items()))
        text = f"{label}: {self.identical}/{self.compared} identical" + (f" ({types})" if types else "")
        if self.not_comparable:
            text += f"; not comparable here: {self.not_comparable}"
        if self.noted:
            text += "; " + ", ".join(f"{what}: {n}" for what, n in sorted(self.noted.items()))
        for what, value in self.facts.items():
            text += f"\n    {what}: {json.dumps(value) if isinstance(value, (dict, list)) else value}"
        if self.first_difference:
            text += f"\n    first difference: {shorten(self.first_difference)}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"compared": self.compared, "identical": self.identical,
                "by_type": {t: {"compared": c[0], "identical": c[1]} for t, c in sorted(self.by_type.items())},
                "noted": self.noted, "facts": self.facts, "first_difference": self.first_difference,
                "not_comparable": self.not_comparable}


def shorten(where: dict[str, Any], limit: int = 400) -> str:
    text = "; ".join(f"{k}: {v}" for k, v in where.items())
    return text if len(text) <= limit else text[:limit] + " ..."
