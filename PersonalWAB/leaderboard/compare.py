"""Result files against a baseline, task by task: per task type and overall, each metric of
both runs, their difference with a paired bootstrap 95% interval and a paired sign-flip test
(`PersonalWAB.metrics`), and the tasks one run solves and the other does not.

Two means over ~2,000 tasks differ by a point or two by chance alone; pairing the tasks takes
out how hard each one is, so the interval and the test say whether a difference is more than
that. Runs are compared only on what they share: tasks are matched by (task_id, trial), and
records that ended in an error are left out of the matching (their score is not the method's;
resuming the run retries them). Files of different splits, data or protocol (standard vs
custom) are refused unless forced: their task ids or texts do not mean the same tasks.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any

from PersonalWAB.data.schema import TASK_TYPES
from PersonalWAB.leaderboard.analysis import is_solved
from PersonalWAB.leaderboard.summarize import md_cell, method_name
from PersonalWAB.leaderboard.validate import protocol_label
from PersonalWAB.metrics import (EXACT_SIGN_FLIPS, is_errored, paired_bootstrap_interval, paired_test, record_steps,
                                 task_score)
from PersonalWAB.results import read_run_file
from PersonalWAB.schema_types import Record, RunArgs

Key = tuple[Any, Any]  # (task_id, trial)
METRICS: tuple[tuple[str, Callable[[Record], float]], ...] = (
    ("Function Acc", lambda r: task_score(r["action_acc"], r["res_acc"])[0]),
    ("Result Acc", lambda r: task_score(r["action_acc"], r["res_acc"])[1]),
    ("Avg Steps", lambda r: float(record_steps(r))),
)
FLIPS_TITLE = ("Flips, the tasks solved by one run and not the other (solved: Function Acc 1 and best "
               "Result Acc > 0, i.e. the right function was called and its best result scored above 0):")
METHOD_NOTE = ("difference: other - baseline over the matched tasks; 95% interval: percentile bootstrap of the "
               "mean difference, resampling matched tasks (2000 resamples); p: two-sided paired sign-flip "
               f"permutation test of a zero mean difference (exact up to {EXACT_SIGN_FLIPS} differing tasks, else "
               "10000 random sign patterns)")
HEAD = ("type", "tasks", "metric", "baseline", "other", "difference", "95% interval", "p")


class CompareError(Exception):
    """Two files that cannot be compared (different split, data or protocol) without --force."""


@dataclass
class Run:
    """One file's usable records, keyed by (task_id, trial), and what was left out."""

    path: Path
    name: str
    run_args: RunArgs
    state: str
    records: dict[Key, Record]
    total: int
    errored: int
    duplicates: int

    def describe(self) -> str:
        left_out = f", {self.errored} errored (left out)" if self.errored else ""
        left_out += f", {self.duplicates} duplicate(s) (first kept)" if self.duplicates else ""
        return f"{self.path} ({self.name}; {self.state}): {self.total} records{left_out}"


def load_run(path: Path | str) -> Run:
    """Read a result file (DataError when it cannot be read) and keep its finished records."""
    parsed = read_run_file(path)
    state = ("finished" if parsed.header is not None else
             "unfinished run (checkpoint)" if parsed.checkpoint is not None else "no header")
    records: dict[Key, Record] = {}
    errored = duplicates = 0
    for record in parsed.records:
        key = (record["task_id"], record["trial"])
        if is_errored(record):
            errored += 1
        elif key in records:
            duplicates += 1
        else:
            records[key] = record
    return Run(parsed.path, method_name(parsed.run_args, parsed.path), parsed.run_args, state, records,
               len(parsed.records), errored, duplicates)


def incompatibilities(baseline: Run, other: Run) -> list[str]:
    """What makes two runs' tasks or texts differ: split, data source or fingerprint, protocol."""
    a, b = baseline.run_args, other.run_args
    found = []
    for key, label, default in (("task_split", "task split", "test"), ("data_source", "data", "official")):
        if a.get(key, default) != b.get(key, default):
            found.append(f"{label} {a.get(key, default)!r} vs {b.get(key, default)!r}")
    if "data_fingerprint" in a and "data_fingerprint" in b and a["data_fingerprint"] != b["data_fingerprint"]:
        found.append(f"data fingerprint {a['data_fingerprint']!r} vs {b['data_fingerprint']!r}")
    protocols = protocol_label(a)[0], protocol_label(b)[0]
    if protocols[0] != protocols[1]:
        found.append(f"{protocols[0]} vs {protocols[1]} protocol")
    return found


@dataclass(frozen=True)
class MetricRow:
    """One metric over a group's matched tasks."""

    label: str
    baseline: float
    other: float
    low: float
    high: float
    p_value: float

    @property
    def difference(self) -> float:
        return self.other - self.baseline


@dataclass
class Group:
    """A task type (or `overall`): its matched tasks' metrics and the tasks that flip."""

    name: str
    tasks: int
    metrics: list[MetricRow]
    lost: list[Key]  # solved by the baseline only
    gained: list[Key]  # solved by the other run only


@dataclass
class Comparison:
    """One run against the baseline over the tasks both finished."""

    baseline: Run
    other: Run
    groups: list[Group]
    matched: int
    only_baseline: int
    only_other: int
    forced: list[str] = field(default_factory=list)  # incompatibilities compared anyway


def _group(name: str, pairs: list[tuple[Key, Record, Record]]) -> Group:
    metrics = []
    for label, score in METRICS:
        a = [score(base) for _, base, _ in pairs]
        b = [score(other) for _, _, other in pairs]
        low, high = paired_bootstrap_interval(a, b)
        metrics.append(MetricRow(label, sum(a) / len(a), sum(b) / len(b), low, high, paired_test(a, b)))
    lost = [key for key, base, other in pairs if is_solved(base) and not is_solved(other)]
    gained = [key for key, base, other in pairs if is_solved(other) and not is_solved(base)]
    return Group(name, len(pairs), metrics, lost, gained)


def _order(key: Key) -> tuple[tuple[int, Any], ...]:
    """Sort (task_id, trial) keys numerically, any odd non-integer id after the integers."""
    return tuple((0, part) if isinstance(part, int) else (1, str(part)) for part in key)


def compare_runs(baseline: Run, other: Run, force: bool = False) -> Comparison:
    """The comparison of `other` with `baseline`; CompareError when their tasks or protocol
    differ and not `force`. A task's type is the baseline record's."""
    problems = incompatibilities(baseline, other)
    if problems and not force:
        raise CompareError(f"cannot compare {baseline.path} with {other.path}: {'; '.join(problems)} "
                           "(pass --force to compare anyway)")
    keys = sorted(baseline.records.keys() & other.records.keys(), key=_order)
    pairs = [(key, baseline.records[key], other.records[key]) for key in keys]
    by_type: dict[str, list[tuple[Key, Record, Record]]] = {}
    for pair in pairs:
        by_type.setdefault(str(pair[1]["info"]["task"]["type"]), []).append(pair)
    names = [*TASK_TYPES, *sorted(set(by_type) - set(TASK_TYPES))]
    groups = [_group(name, by_type[name]) for name in names if name in by_type]
    if pairs:
        groups.append(_group("overall", pairs))
    return Comparison(baseline, other, groups, len(keys), len(baseline.records) - len(keys),
                      len(other.records) - len(keys), problems)


def compare_files(paths: list[Path | str], force: bool = False) -> list[Comparison]:
    """Each file after the first compared with the first (the baseline)."""
    baseline = load_run(paths[0])
    return [compare_runs(baseline, load_run(path), force) for path in paths[1:]]


# -- rendering ----------------------------------------------------------------------------------

def task_label(key: Key) -> str:
    """A task id, with its trial when the run has several."""
    task_id, trial = key
    return str(task_id) if trial == 0 else f"{task_id} (trial {trial})"


def _value(label: str, value: float, signed: bool = False) -> str:
    return f"{value:{'+' if signed else ''}.{2 if label == 'Avg Steps' else 3}f}"


def metric_cells(row: MetricRow) -> list[str]:
    """baseline, other, difference, interval and p of one metric as text."""
    return [_value(row.label, row.baseline), _value(row.label, row.other), _value(row.label, row.difference, True),
            f"[{_value(row.label, row.low, True)}, {_value(row.label, row.high, True)}]",
            "<0.001" if row.p_value < 0.001 else f"{row.p_value:.3f}"]


def about_lines(comparison: Comparison) -> list[str]:
    """What was compared: the two files, what each left out, how many tasks matched."""
    c = comparison
    lines = [f"baseline: {c.baseline.describe()}", f"other: {c.other.describe()}",
             f"matched by (task_id, trial): {c.matched} tasks; unmatched: {c.only_baseline} only in the baseline, "
             f"{c.only_other} only in the other"]
    if c.forced:
        lines.append(f"compared despite: {'; '.join(c.forced)} (--force)")
    return lines


def flip_lines(comparison: Comparison) -> list[str]:
    """Per task type, the tasks solved by one run only, with their ids, and the totals."""
    lines = []
    for group in comparison.groups:
        if group.name == "overall":
            lines.append(f"total: {len(group.lost)} solved by the baseline only, "
                         f"{len(group.gained)} solved by the other only")
            continue
        for keys, who in ((group.lost, "the baseline"), (group.gained, "the other")):
            if keys:
                lines.append(f"{group.name}: {len(keys)} solved by {who} only: "
                             + ", ".join(task_label(k) for k in keys))
    return lines


def _table_rows(comparison: Comparison) -> list[list[str]]:
    return [[group.name if i == 0 else "", str(group.tasks) if i == 0 else "", row.label, *metric_cells(row)]
            for group in comparison.groups for i, row in enumerate(group.metrics)]


def render_text(comparisons: list[Comparison]) -> str:
    blocks = []
    for c in comparisons:
        rows = [list(HEAD), *_table_rows(c)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(HEAD))]
        table = [" ".join(cell.ljust(w) if i in (0, 2) else cell.rjust(w) for i, (cell, w) in
                          enumerate(zip(r, widths))).rstrip() for r in rows]
        blocks.append("\n".join([f"{c.other.path} vs baseline {c.baseline.path}", *about_lines(c), "", *table, "",
                                 FLIPS_TITLE, *(f"  {line}" for line in flip_lines(c))]))
    return "\n\n".join(blocks) + f"\n\n{METHOD_NOTE}\n"


def render_markdown(comparisons: list[Comparison]) -> str:
    out = []
    for c in comparisons:
        out += [f"## {md_cell(str(c.other.path))} vs baseline {md_cell(str(c.baseline.path))}", ""]
        out += [f"- {md_cell(line)}" for line in about_lines(c)] + [""]
        out += ["| " + " | ".join(HEAD) + " |", "|---|---:|---|" + "---:|" * (len(HEAD) - 3)]
        out += ["| " + " | ".join(md_cell(cell) for cell in row) + " |" for row in _table_rows(c)]
        out += ["", FLIPS_TITLE, ""] + [f"- {md_cell(line)}" for line in flip_lines(c)] + [""]
    out.append(METHOD_NOTE)
    return "\n".join(out) + "\n"


def render_html(comparison: Comparison) -> str:
    """The comparison as an HTML section of the report; all text escaped."""
    c = comparison

    def items(lines: list[str]) -> str:
        return "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>"

    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEAD)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
                   for row in _table_rows(c))
    return (f'<section id="comparison">\n<h2>Comparison with the baseline {html.escape(str(c.baseline.path))}</h2>\n'
            f"{items(about_lines(c))}\n"
            f'<table class="leaderboard"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>\n'
            f"<p>{html.escape(FLIPS_TITLE)}</p>\n{items(flip_lines(c))}\n"
            f"<p>{html.escape(METHOD_NOTE)}</p>\n</section>")


RENDERERS = {"text": render_text, "markdown": render_markdown}
