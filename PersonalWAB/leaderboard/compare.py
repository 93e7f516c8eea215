"""Result files against a baseline, task by task: per task type and overall, each metric of
both runs, their difference with a paired bootstrap 95% interval and a paired sign-flip test
(`PersonalWAB.metrics`), the tasks one run solves and the other does not with McNemar's test of
them, and the user-level view: the Result Acc difference clustered by user and the users that flip.

Two means over ~2,000 tasks differ by a point or two by chance alone; pairing the tasks takes
out how hard each one is, so the interval and the test say whether a difference is more than
that. Runs are compared only on what they share: tasks are matched by task_id, each run's score
of a task being the mean over its trials (the task, not the trial, is what the benchmark
samples, so runs of 2 and of 1 trial compare task by task without dropping a trial), and
records that ended in an error are left out of the matching (their score is not the method's;
resuming the run retries them). Files of different splits, data or protocol (standard vs
custom) are refused unless forced: their task ids or texts do not mean the same tasks; files of
the single- and multi-turn tracks unless mixed tracks are allowed: the same task is another
problem with a simulated user and a step budget.

The verdict of each row follows the test, never the interval alone: a metric on which each run
scores the same on every task (an agent that records no steps) has no test, and fewer than
`MIN_TASKS` matched tasks are flagged as too few for the interval and the test.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any, cast

from PersonalWAB.data.schema import TASK_TYPES
from PersonalWAB.leaderboard.analysis import is_solved
from PersonalWAB.leaderboard.summarize import md_cell, method_name
from PersonalWAB.leaderboard.validate import protocol_label, read_valid
from PersonalWAB.leaderboard.users import named, user_flips
from PersonalWAB.metrics import (EXACT_SIGN_FLIPS, clustered_interval, is_errored, mcnemar_test,
                                 paired_bootstrap_interval, paired_test, record_steps, task_score)
from PersonalWAB.results import RunFile, grader_mismatch
from PersonalWAB.schema_types import Record, RunArgs

Key = Any  # a task_id
METRICS: tuple[tuple[str, Callable[[Record], float]], ...] = (
    ("Function Acc", lambda r: task_score(r["action_acc"], r["res_acc"])[0]),
    ("Result Acc", lambda r: task_score(r["action_acc"], r["res_acc"])[1]),
    ("Avg Steps", lambda r: float(record_steps(r))),
)
FLIPS_TITLE = ("Flips, the tasks solved by one run and not the other (solved: Function Acc 1 and best "
               "Result Acc > 0, i.e. the right function was called and its best result scored above 0; with "
               "several trials, in more than half of them):")
MIN_TASKS = 10  # below it a bootstrap interval is too narrow to trust and the test can barely reach p < 0.05
LEVEL = 0.05  # the verdict's significance level
METHOD_NOTE = ("difference: other - baseline over the matched tasks, each task's score the mean over its trials; "
               "95% interval: percentile bootstrap of the mean difference, resampling matched tasks (2000 "
               "resamples); p: two-sided paired sign-flip permutation test of a zero mean difference (exact up "
               f"to {EXACT_SIGN_FLIPS} differing tasks, else 10000 random sign patterns); verdict: differs when "
               f"p < {LEVEL} (the test decides, not the interval); no test when neither run varies across tasks; "
               f"too few tasks below {MIN_TASKS} matched tasks (no interval shown)")
HEAD = ("type", "tasks", "metric", "baseline", "other", "difference", "95% interval", "p", "verdict")
NO_VARIATION = "no test: neither run varies across tasks"


class CompareError(Exception):
    """Two files that cannot be compared (different split, data or protocol) without --force,
    or of different tracks without --allow_mixed_tracks."""


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
    """Read a result file (DataError when it cannot be read or is invalid) and keep its finished records."""
    parsed = cast(RunFile, read_valid(path).result)  # the one reader: an invalid file is refused
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


def track(run_args: RunArgs) -> str | None:
    """`multi-turn` (max_steps > 0) or `single-turn`; None for a file without run args."""
    if not run_args:
        return None
    max_steps = run_args.get("max_steps", -1)
    return "multi-turn" if isinstance(max_steps, int) and max_steps > 0 else "single-turn"


@dataclass(frozen=True)
class MetricRow:
    """One metric over a group's matched tasks; `p_value` None when there is nothing to test."""

    label: str
    baseline: float
    other: float
    low: float
    high: float
    p_value: float | None
    tasks: int

    @property
    def difference(self) -> float:
        return self.other - self.baseline

    @property
    def too_few(self) -> bool:
        return self.tasks < MIN_TASKS

    @property
    def verdict(self) -> str:
        """What the row may claim: decided by the test, with the reasons it cannot decide."""
        if self.p_value is None:
            return NO_VARIATION
        if self.too_few:
            return f"too few tasks ({self.tasks} < {MIN_TASKS}) to tell"
        return "differs" if self.p_value < LEVEL else "no difference shown"


@dataclass
class Group:
    """A task type (or `overall`): its matched tasks' metrics, the tasks that flip (with McNemar's
    test of the solved / unsolved pairs), the Result Acc difference clustered by user and the
    users that flip."""

    name: str
    tasks: int
    metrics: list[MetricRow]
    lost: list[Key]  # solved by the baseline only
    gained: list[Key]  # solved by the other run only
    mcnemar_p: float = 1.0
    clustered: dict[str, Any] = field(default_factory=dict)  # clustered_interval of the Result Acc differences
    users_lost: list[str] = field(default_factory=list)  # users solved by the baseline only
    users_gained: list[str] = field(default_factory=list)

    def user_lines(self) -> list[str]:
        """McNemar's test, the difference clustered by user and the users that flip."""
        c = self.clustered
        effect = "-" if not c or c["design_effect"] is None else f"{c['design_effect']:.2f}"
        lines = [f"{self.name}: McNemar exact p {self.mcnemar_p:.3f} over {len(self.lost) + len(self.gained)} "
                 "discordant task(s) (solved by one run only)"]
        if c:
            lines.append(f"{self.name}: Result Acc difference {c['mean']:+.3f}, 95% clustered by user "
                         f"[{c['clustered'][0]:+.3f}, {c['clustered'][1]:+.3f}] ({c['clusters']} users) vs naive "
                         f"[{c['naive'][0]:+.3f}, {c['naive'][1]:+.3f}], design effect {effect}")
        if self.users_lost or self.users_gained:
            lines.append(f"{self.name}: users that flip (solved in more than half of their tasks): "
                         f"{len(self.users_lost)} by the baseline only: {named(self.users_lost) or '-'}; "
                         f"{len(self.users_gained)} by the other only: {named(self.users_gained) or '-'}")
        return lines


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
    trials: tuple[int, int] = (1, 1)  # the most trials of a task in the baseline and in the other run
    mixed_tracks: str = ""  # the tracks' difference, compared anyway


Trials = list[Record]  # a task's records in one run, one per trial


def _mean(score: Callable[[Record], float], trials: Trials) -> float:
    return sum(score(record) for record in trials) / len(trials)


def task_solved(trials: Trials) -> bool:
    """Solved in more than half of the task's trials (solved, for a single trial)."""
    return sum(is_solved(record) for record in trials) * 2 > len(trials)


def metric_row(label: str, a: list[float], b: list[float]) -> MetricRow:
    """One metric's paired statistics; no test when neither run varies from task to task (the
    sign-flip test would call any constant gap, such as 0 recorded steps, significant)."""
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    if len(set(a)) == 1 and len(set(b)) == 1:
        return MetricRow(label, mean_a, mean_b, mean_b - mean_a, mean_b - mean_a, None, len(a))
    low, high = paired_bootstrap_interval(a, b)
    return MetricRow(label, mean_a, mean_b, low, high, paired_test(a, b), len(a))


def _group(name: str, pairs: list[tuple[Key, Trials, Trials]]) -> Group:
    metrics = [metric_row(label, [_mean(score, base) for _, base, _ in pairs],
                          [_mean(score, other) for _, _, other in pairs]) for label, score in METRICS]
    lost = [key for key, base, other in pairs if task_solved(base) and not task_solved(other)]
    gained = [key for key, base, other in pairs if task_solved(other) and not task_solved(base)]
    result_acc = METRICS[1][1]
    differences = [_mean(result_acc, other) - _mean(result_acc, base) for _, base, other in pairs]
    users = [base[0]["info"]["task"]["user_id"] for _, base, _ in pairs]
    users_lost, users_gained = user_flips(pairs)
    return Group(name, len(pairs), metrics, lost, gained, mcnemar_test(len(lost), len(gained)),
                 clustered_interval(differences, users), users_lost, users_gained)


def _order(key: Key) -> tuple[int, Any]:
    """Sort task ids numerically, any odd non-integer id after the integers."""
    return (0, key) if isinstance(key, int) else (1, str(key))


def by_task(run: Run) -> dict[Key, Trials]:
    """A run's usable records grouped by task_id, in trial order."""
    tasks: dict[Key, Trials] = {}
    for (task_id, _), record in sorted(run.records.items(), key=lambda item: str(item[0][1])):
        tasks.setdefault(task_id, []).append(record)
    return tasks


def track_problem(baseline: Run, other: Run) -> str | None:
    """Why the two runs' tracks differ (None when they match or one is unknown)."""
    tracks = track(baseline.run_args), track(other.run_args)
    if None in tracks or tracks[0] == tracks[1]:
        return None
    return f"{tracks[0]} vs {tracks[1]} track"


def compare_runs(baseline: Run, other: Run, force: bool = False, mixed_tracks: bool = False) -> Comparison:
    """The comparison of `other` with `baseline`, task by task (each run's trials of a task
    averaged); CompareError when they were scored by different graders (re-grade them first: no
    flag overrides it), their tasks or protocol differ and not `force`, or their tracks and not
    `mixed_tracks`. A task's type is the baseline record's."""
    graders = grader_mismatch([(baseline.path, baseline.run_args), (other.path, other.run_args)])
    if graders:
        raise CompareError(f"cannot compare: {graders}")
    problems = incompatibilities(baseline, other)
    if problems and not force:
        raise CompareError(f"cannot compare {baseline.path} with {other.path}: {'; '.join(problems)} "
                           "(pass --force to compare anyway)")
    mixed = track_problem(baseline, other)
    if mixed and not mixed_tracks:
        raise CompareError(f"cannot compare {baseline.path} with {other.path}: {mixed}: the same task is another "
                           "problem on each track (pass --allow_mixed_tracks 1 to compare anyway)")
    base_tasks, other_tasks = by_task(baseline), by_task(other)
    keys = sorted(base_tasks.keys() & other_tasks.keys(), key=_order)
    pairs = [(key, base_tasks[key], other_tasks[key]) for key in keys]
    by_type: dict[str, list[tuple[Key, Trials, Trials]]] = {}
    for pair in pairs:
        by_type.setdefault(str(pair[1][0]["info"]["task"]["type"]), []).append(pair)
    names = [*TASK_TYPES, *sorted(set(by_type) - set(TASK_TYPES))]
    groups = [_group(name, by_type[name]) for name in names if name in by_type]
    if pairs:
        groups.append(_group("overall", pairs))
    trials = (max(map(len, base_tasks.values()), default=1), max(map(len, other_tasks.values()), default=1))
    return Comparison(baseline, other, groups, len(keys), len(base_tasks) - len(keys),
                      len(other_tasks) - len(keys), problems, trials, mixed or "")


def compare_files(paths: list[Path | str], force: bool = False, mixed_tracks: bool = False) -> list[Comparison]:
    """Each file after the first compared with the first (the baseline)."""
    baseline = load_run(paths[0])
    return [compare_runs(baseline, load_run(path), force, mixed_tracks) for path in paths[1:]]


# -- rendering ----------------------------------------------------------------------------------

def _value(label: str, value: float, signed: bool = False) -> str:
    return f"{value:{'+' if signed else ''}.{2 if label == 'Avg Steps' else 3}f}"


def metric_cells(row: MetricRow) -> list[str]:
    """baseline, other, difference, interval, p and verdict of one metric as text (no interval
    for too few tasks, no p where there is no test)."""
    shown = row.p_value is not None and not row.too_few
    interval = f"[{_value(row.label, row.low, True)}, {_value(row.label, row.high, True)}]" if shown else "-"
    p = "-" if row.p_value is None else "<0.001" if row.p_value < 0.001 else f"{row.p_value:.3f}"
    return [_value(row.label, row.baseline), _value(row.label, row.other), _value(row.label, row.difference, True),
            interval, p, row.verdict]


def about_lines(comparison: Comparison) -> list[str]:
    """What was compared: the two files, what each left out, how many tasks matched."""
    c = comparison
    lines = [f"baseline: {c.baseline.describe()}", f"other: {c.other.describe()}",
             f"matched by task_id: {c.matched} tasks; unmatched: {c.only_baseline} only in the baseline, "
             f"{c.only_other} only in the other", trials_line(c)]
    if c.forced:
        lines.append(f"compared despite: {'; '.join(c.forced)} (--force)")
    if c.mixed_tracks:
        lines.append(f"compared despite: {c.mixed_tracks} (--allow_mixed_tracks)")
    small = [g.name for g in c.groups if g.tasks < MIN_TASKS]
    if small:
        lines.append(f"too few tasks for the interval and test (< {MIN_TASKS}) in: {', '.join(small)}")
    return lines


def trials_line(comparison: Comparison) -> str:
    """How trials entered the comparison: each task's score is the mean over its trials."""
    base, other = comparison.trials
    if base == other == 1:
        return "trials: one per task in each run"
    return (f"trials: up to {base} per task in the baseline and {other} in the other; each task's score is the "
            "mean over its trials in each run, so no trial is dropped")


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
                lines.append(f"{group.name}: {len(keys)} solved by {who} only: " + ", ".join(map(str, keys)))
    return lines


USERS_TITLE = ("Users (a user's tasks are not independent): McNemar's exact test of the solved / unsolved pairs, "
               "the Result Acc difference with its interval clustered by user, and the users that flip:")


def user_lines(comparison: Comparison) -> list[str]:
    """Per group, McNemar's test, the clustered difference and the users that flip."""
    return [line for group in comparison.groups for line in group.user_lines()]


def _table_rows(comparison: Comparison) -> list[list[str]]:
    return [[group.name if i == 0 else "", str(group.tasks) if i == 0 else "", row.label, *metric_cells(row)]
            for group in comparison.groups for i, row in enumerate(group.metrics)]


def render_text(comparisons: list[Comparison]) -> str:
    blocks = []
    for c in comparisons:
        rows = [list(HEAD), *_table_rows(c)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(HEAD))]
        table = [" ".join(cell.ljust(w) if i in (0, 2, 8) else cell.rjust(w) for i, (cell, w) in
                          enumerate(zip(r, widths))).rstrip() for r in rows]
        blocks.append("\n".join([f"{c.other.path} vs baseline {c.baseline.path}", *about_lines(c), "", *table, "",
                                 FLIPS_TITLE, *(f"  {line}" for line in flip_lines(c)), "",
                                 USERS_TITLE, *(f"  {line}" for line in user_lines(c))]))
    return "\n\n".join(blocks) + f"\n\n{METHOD_NOTE}\n"


def render_markdown(comparisons: list[Comparison]) -> str:
    out = []
    for c in comparisons:
        out += [f"## {md_cell(str(c.other.path))} vs baseline {md_cell(str(c.baseline.path))}", ""]
        out += [f"- {md_cell(line)}" for line in about_lines(c)] + [""]
        out += ["| " + " | ".join(HEAD) + " |", "|---|---:|---|" + "---:|" * (len(HEAD) - 4) + "---|"]
        out += ["| " + " | ".join(md_cell(cell) for cell in row) + " |" for row in _table_rows(c)]
        out += ["", FLIPS_TITLE, ""] + [f"- {md_cell(line)}" for line in flip_lines(c)] + [""]
        out += [USERS_TITLE, ""] + [f"- {md_cell(line)}" for line in user_lines(c)] + [""]
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
            f"<p>{html.escape(USERS_TITLE)}</p>\n{items(user_lines(c))}\n"
            f"<p>{html.escape(METHOD_NOTE)}</p>\n</section>")


RENDERERS = {"text": render_text, "markdown": render_markdown}
