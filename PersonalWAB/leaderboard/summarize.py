"""Leaderboard tables in the paper's shape, from result files.

Rows are recomputed from each file's records (the same `compute_statistics` the
runner uses, and for runs of several trials the same spread across them), so a table
never repeats a header that its records contradict;
files whose header disagrees are marked invalid. Only rows that can be compared
share a table: one table per track and data source, so runs on synthetic data
never sit beside official runs, and a run over part of the split is ranked only
against runs of exactly the same tasks, in a table of their own.
"""

from __future__ import annotations

import csv
import html
import io
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterable
from typing import Any

from PersonalWAB.data.schema import TASK_TYPES
from PersonalWAB.errors import DataError
from PersonalWAB.leaderboard.validate import CUSTOM, ValidationReport, read_valid, run_track
from PersonalWAB.results import grader_mismatch
from PersonalWAB.failures import (FAILURE_LABELS, describe, failure_label, label_counts, react_prefix_of,
                                  recommendation_ranking)
from PersonalWAB.leaderboard.users import UserView, user_view
from PersonalWAB.schema_types import Record, RunArgs
from PersonalWAB.metrics import interval

GROUPS = (*TASK_TYPES, "overall")
GROUP_TITLES = {"search": "Search", "recommend": "Recommendation", "review": "Review", "overall": "Overall"}
MULTI_TURN = "multi-turn"
TRACK_ORDER = {"single-turn": 0, MULTI_TURN: 1}
SYNTHETIC_NOTE = "synthetic data: comparable only with runs on the same synthetic data, never with the paper"
CUSTOM_NOTE = "custom runs: other texts or rules than the release's, comparable only with each other"
PARTIAL = "partial split"
TRIALS_NOTE = ("Runs with several trials show ± the half-width of the 95% interval of the mean over trials. "
               "Neighbours in the ranking:")


@dataclass
class Row:
    """One result file as a leaderboard row."""

    name: str
    path: Path
    track: str
    data_source: str
    statistics: dict[str, dict[str, float]]
    total_cost: float
    flags: list[str]
    valid: bool
    trials: dict[str, Any] | None = None  # the spread across trials (PersonalWAB.metrics), recomputed
    format_errors: int = 0  # tasks that ended on unusable model replies
    scope: str = ""  # for a partial run, the task ids it ran ("0-9,12"); empty for the whole split
    users: UserView | None = None  # the user-level view: clustered interval, per-user distribution
    failures: dict[str, int] = field(default_factory=dict)  # failure label -> task runs (PersonalWAB.failures)
    ranking: dict[str, float] | None = None  # recommend tasks: mean NDCG@10 and MRR

    @property
    def num_trials(self) -> int:
        return self.trials["num_trials"] if self.trials else 1

    @property
    def synthetic(self) -> bool:
        return "synthetic" in self.flags

    @property
    def custom(self) -> bool:
        return CUSTOM in self.flags

    def score(self, group: str, key: str) -> float:
        return float(self.statistics.get(group, {}).get(key, 0.0))

    def interval(self, group: str, key: str) -> tuple[float, float] | None:
        """The statistic's 95% interval across trials (None for a single trial)."""
        return interval(self.trials, group, key)

    def rank_key(self) -> tuple[float, float, str]:
        """Ranking rule: overall Function Acc, then overall Result Acc, both descending."""
        return (-self.score("overall", "avg_action_acc"), -self.score("overall", "avg_res_acc"), self.name)


def method_name(run_args: RunArgs, path: Path) -> str:
    """A readable method name from the run args (the file name when there are none), led by
    the run's `--run_name` and followed by its `--tag`s when it has them."""
    if not run_args:
        return path.stem
    model = run_args.get("model") or "offline"
    name = f"{run_args.get('agent_strategy', '?')}, memory {run_args.get('agent_memory', '?')} ({model})"
    if run_args.get("run_name"):
        name = f"{run_args['run_name']}: {name}"
    tags = run_args.get("tag")
    return f"{name} [{', '.join(map(str, tags))}]" if isinstance(tags, list) and tags else name


def row_from_report(report: ValidationReport, name: str | None = None) -> Row | None:
    """The row of a validated file; None when its records could not be scored."""
    if report.result is None or report.statistics is None:
        return None
    run_args = report.result.run_args
    source = str(run_args.get("data_source", "official")) if report.result.header else "unknown (no header)"
    flags = [*report.flags] + ([] if report.valid else ["invalid"])
    scope = id_ranges(record["task_id"] for record in report.result.records) if PARTIAL in flags else ""
    records = report.result.records
    return Row(name or method_name(run_args, report.path), report.path, run_track(report.result), source,
               report.statistics, report.total_cost or 0.0, flags, report.valid, report.trials,
               report.format_errors, scope, user_view(records), run_failures(records, run_args),
               run_ranking(records, run_args))


def run_failures(records: list[Record], run_args: RunArgs) -> dict[str, int]:
    """How many task runs carry each failure label: the record's own (`info.failure`), else decided by
    the rule from the record (a file written before the labels; its catalogue check is left out)."""
    prefix = react_prefix_of(run_args)
    return label_counts([str(r["info"].get("failure") or failure_label(r, prefix)) for r in records])


def run_ranking(records: list[Record], run_args: RunArgs) -> dict[str, float] | None:
    """The recommend tasks' mean NDCG@10 and MRR (None without one); errored records left out."""
    prefix = react_prefix_of(run_args)
    ranks = [r for r in (recommendation_ranking(record, prefix) for record in records
                         if "error" not in record["info"]) if r is not None]
    if not ranks:
        return None
    return {"ndcg@10": sum(r["ndcg@10"] for r in ranks) / len(ranks), "mrr": sum(r["rr"] for r in ranks) / len(ranks),
            "tasks": len(ranks)}


def id_ranges(ids: Iterable[int]) -> str:
    """Task ids as compact ranges ("0-9,12,15-17"): two runs share it only if they ran the same tasks."""
    spans: list[list[int]] = []
    for task_id in sorted(set(ids)):
        if spans and task_id == spans[-1][1] + 1:
            spans[-1][1] = task_id
        else:
            spans.append([task_id, task_id])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def summarize_files(paths: list[Path | str],
                    names: list[str] | None = None) -> tuple[list[Row], list[ValidationReport]]:
    """Rows (ranked) for the files that could be scored, and every file's validation report."""
    if names and len(names) != len(paths):
        raise ValueError(f"{len(names)} --name values for {len(paths)} files: give one per file or none")
    reports = [read_valid(p) for p in paths]  # an invalid file is refused (InvalidResultFile)
    graders = grader_mismatch([(rep.path, rep.result.run_args) for rep in reports if rep.result is not None])
    if graders:
        raise DataError(f"cannot rank these files together: {graders}")
    rows = [row_from_report(rep, names[i] if names else None) for i, rep in enumerate(reports)]
    return rank([r for r in rows if r is not None]), reports


def rank(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=Row.rank_key)


def tables(rows: list[Row]) -> list[tuple[str, list[Row]]]:
    """Ranked rows split into comparable tables: (title, rows), single-turn first, standard
    runs before custom ones, whole-split runs before partial ones; a partial run shares a table
    only with runs of the same tasks."""
    groups: dict[tuple[str, bool, bool, str, str], list[Row]] = {}
    for row in rank(rows):
        groups.setdefault((row.track, row.custom, row.synthetic, row.data_source, row.scope), []).append(row)
    out = []
    for (track, custom, synthetic, source, scope), members in sorted(
            groups.items(), key=lambda item: (TRACK_ORDER.get(item[0][0], 2), item[0][1:])):
        if track not in TRACK_ORDER:
            title = "Interrupted runs (no header: track and data source unknown)"
        else:
            title = (f"{track.capitalize()} track, {'custom' if custom else 'standard'} protocol, {source} data"
                     + (f" ({CUSTOM_NOTE})" if custom else "") + (f" ({SYNTHETIC_NOTE})" if synthetic else "")
                     + (f" (partial runs, tasks {scope} only: ranked only against runs of the same tasks)"
                        if scope else ""))
        out.append((title, members))
    return out


def _columns(track: str) -> list[tuple[str, str]]:
    keys = [("avg_action_acc", "F. Acc"), ("avg_res_acc", "R. Acc")]
    if track == MULTI_TURN:
        keys.append(("avg_interaction_times", "Avg. Steps"))
    return keys


def _fmt(value: float) -> str:
    return f"{value:.3f}"


def _cell(row: Row, group: str, key: str) -> str:
    """The statistic, with ± the half-width of its 95% interval when the run has trials."""
    bounds = row.interval(group, key)
    if bounds is None:
        return _fmt(row.score(group, key))
    return f"{_fmt(row.score(group, key))} ± {(bounds[1] - bounds[0]) / 2:.3f}"


COMPARED = (("avg_action_acc", "F. Acc"), ("avg_res_acc", "R. Acc"))


def comparisons(members: list[Row]) -> list[str]:
    """For each pair of neighbours in a ranked table where at least one ran several trials: whether
    their overall F. Acc and R. Acc differ by more than their 95% intervals allow. A difference is
    *inside* the intervals when they overlap: the two runs are then not reliably ordered. Only
    intervals with width can say more: a single trial's (its value) or that of trials which all
    scored the same measures no run-to-run noise, so beside one nothing is claimed."""
    lines = []
    for rank, (a, b) in enumerate(zip(members, members[1:]), 1):
        if a.trials is None and b.trials is None:
            continue
        for key, label in COMPARED:
            low_a, high_a = a.interval("overall", key) or (a.score("overall", key),) * 2
            low_b, high_b = b.interval("overall", key) or (b.score("overall", key),) * 2
            inside = max(low_a, low_b) <= min(high_a, high_b)
            flat = [row.name for row, low, high in ((a, low_a, high_a), (b, low_b, high_b)) if high - low <= 0]
            verdict = ("inside their 95% intervals: not a reliable difference" if inside else
                       f"not judged: the interval of {' and '.join(flat)} has no width (one trial, or trials that "
                       "all scored the same)" if flat else "outside their 95% intervals")
            lines.append(f"#{rank} {a.name} ({a.num_trials} trial{'s' * (a.num_trials > 1)}) vs #{rank + 1} {b.name} "
                         f"({b.num_trials} trial{'s' * (b.num_trials > 1)}): overall {label} "
                         f"{_fmt(a.score('overall', key))} [{low_a:.3f}, {high_a:.3f}] vs "
                         f"{_fmt(b.score('overall', key))} [{low_b:.3f}, {high_b:.3f}], difference "
                         f"{a.score('overall', key) - b.score('overall', key):+.3f}: {verdict}")
    return lines


USERS_NOTE = ("Per run: overall R. Acc with its 95% interval clustered by user beside the naive one (a user's tasks "
              "are not independent; design effect: the variance ratio), the per-user R. Acc, recommend NDCG@10 and "
              "MRR, and the failure labels (docs/leaderboard.md):")


def detail_lines(members: list[Row]) -> list[str]:
    """One line per run of the user-level view, the ranking metrics and the failure counts."""
    lines = []
    for rank, row in enumerate(members, 1):
        parts = [row.users.line() if row.users is not None else "no scored task"]
        if row.ranking is not None:
            parts.append(f"recommend NDCG@10 {row.ranking['ndcg@10']:.3f}, MRR {row.ranking['mrr']:.3f}")
        parts.append(f"failures: {describe(row.failures)}")
        lines.append(f"#{rank} {row.name}: " + "; ".join(parts))
    return lines


def total_cost(rows: list[Row]) -> float:
    return sum(row.total_cost for row in rows)


def render_markdown(rows: list[Row]) -> str:
    out = []
    for title, members in tables(rows):
        columns = _columns(members[0].track)
        head = ["#", "Method"] + [f"{GROUP_TITLES[g]} {label}" for g in GROUPS for _, label in columns]
        head += ["Cost ($)", "Format errors", "Flags"]
        out += [f"### {md_cell(title)}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for i, row in enumerate(members, 1):
            cells = [str(i), md_cell(row.name)] + [_cell(row, g, k) for g in GROUPS for k, _ in columns]
            cells += [f"{row.total_cost:.4f}", str(row.format_errors), md_cell(", ".join(row.flags))]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
        notes = comparisons(members)
        if notes:
            out += [TRIALS_NOTE, ""] + [f"- {md_cell(line)}" for line in notes] + [""]
        out += [USERS_NOTE, ""] + [f"- {md_cell(line)}" for line in detail_lines(members)] + [""]
    out.append(f"Total cost: ${total_cost(rows):.4f} over {len(rows)} run(s).")
    return "\n".join(out) + "\n"


def md_cell(text: str) -> str:
    """A Markdown table cell or line: `|` and line breaks kept from breaking the table, and `<`, `>`,
    `&` escaped, so text from a result file (a method name, a path) is shown, never run as HTML."""
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")


def render_html_tables(rows: list[Row]) -> str:
    """The tables as an HTML fragment (two header rows, as in the paper); all text escaped."""
    out = []
    for title, members in tables(rows):
        columns = _columns(members[0].track)
        out.append(f"<h3>{html.escape(title)}</h3>\n<table class=\"leaderboard\">\n<thead><tr>"
                   "<th rowspan=\"2\">#</th><th rowspan=\"2\">Method</th>"
                   + "".join(f"<th colspan=\"{len(columns)}\">{GROUP_TITLES[g]}</th>" for g in GROUPS)
                   + "<th rowspan=\"2\">Cost ($)</th><th rowspan=\"2\">Format errors</th>"
                   "<th rowspan=\"2\">Flags</th></tr>\n<tr>"
                   + "".join(f"<th>{label}</th>" for _ in GROUPS for _, label in columns)
                   + "</tr></thead>\n<tbody>")
        for i, row in enumerate(members, 1):
            cells = "".join(f"<td>{html.escape(_cell(row, g, k))}</td>" for g in GROUPS for k, _ in columns)
            out.append(f"<tr><td>{i}</td><td title=\"{html.escape(str(row.path))}\">{html.escape(row.name)}</td>"
                       f"{cells}<td>{row.total_cost:.4f}</td><td>{row.format_errors}</td>"
                       f"<td>{html.escape(', '.join(row.flags))}</td></tr>")
        out.append("</tbody></table>")
        notes = comparisons(members)
        if notes:
            out.append(f"<p>{html.escape(TRIALS_NOTE)}</p>\n<ul>"
                       + "".join(f"<li>{html.escape(line)}</li>" for line in notes) + "</ul>")
        out.append(f"<p>{html.escape(USERS_NOTE)}</p>\n<ul>"
                   + "".join(f"<li>{html.escape(line)}</li>" for line in detail_lines(members)) + "</ul>")
    out.append(f"<p>Total cost: ${total_cost(rows):.4f} over {len(rows)} run(s).</p>")
    return "\n".join(out)


TABLE_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #222; }
table.leaderboard { border-collapse: collapse; margin-bottom: 1rem; font-size: 0.9rem; }
table.leaderboard th, table.leaderboard td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: right; }
table.leaderboard td:nth-child(2) { text-align: left; }
table.leaderboard thead th { background: #f0f3f7; text-align: center; }
"""


def render_html(rows: list[Row]) -> str:
    """A standalone page holding the tables."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>PersonalWAB leaderboard</title>"
            f"<style>{TABLE_CSS}</style></head><body>\n<h2>PersonalWAB leaderboard</h2>\n"
            f"{render_html_tables(rows)}\n</body></html>\n")


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_text(cell: str) -> str:
    """A text cell a spreadsheet shows as text: one starting like a formula (`=`, `+`, `-`,
    `@`, a tab or a carriage return) gets a leading `'`. Numbers are written as numbers."""
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell


def render_csv(rows: list[Row]) -> str:
    """All rows in one CSV (track and rank as columns), every statistic included; the text
    cells (method, file, track, data source, flags) escaped against formula injection."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    stat_columns = [("avg_action_acc", "f_acc"), ("avg_res_acc", "r_acc"), ("avg_interaction_times", "avg_steps")]
    interval_columns = [(g, k, f"{g}_{c}_ci95_{end}") for g in GROUPS for k, c in stat_columns[:2]
                        for end in ("low", "high")]
    writer.writerow(["track", "data_source", "rank", "method", "file", *(f"{g}_{c}" for g in GROUPS for _, c in
                                                                       stat_columns), "tasks", "cost",
                     "format_errors", "flags",
                     "num_trials", *(name for _, _, name in interval_columns), *USER_COLUMNS,
                     "recommend_ndcg_at_10", "recommend_mrr", *(f"failure_{label}" for label in FAILURE_LABELS)])
    for _, members in tables(rows):
        for i, row in enumerate(members, 1):
            bounds = [row.interval(g, k) for g, k, name in interval_columns[::2]]
            writer.writerow([csv_text(row.track), csv_text(row.data_source), i, csv_text(row.name),
                             csv_text(str(row.path)),
                             *(repr(row.score(g, k)) for g in GROUPS for k, _ in stat_columns),
                             int(row.score("overall", "total_count")), repr(row.total_cost), row.format_errors,
                             csv_text(";".join(row.flags)),
                             row.num_trials, *(repr(b[end]) if b else "" for b in bounds for end in (0, 1)),
                             *user_cells(row.users),
                             *(repr(row.ranking[key]) if row.ranking else "" for key in ("ndcg@10", "mrr")),
                             *(row.failures.get(label, 0) for label in FAILURE_LABELS)])
    return buffer.getvalue()


USER_COLUMNS = ("users", "overall_r_acc_naive_low", "overall_r_acc_naive_high", "overall_r_acc_clustered_low",
                "overall_r_acc_clustered_high", "design_effect", "user_r_acc_median", "user_r_acc_p10",
                "user_r_acc_p90", "worst_decile_r_acc")


def user_cells(view: UserView | None) -> list[str]:
    """The CSV cells of a run's user-level view (empty without one)."""
    if view is None:
        return [""] * len(USER_COLUMNS)
    i, d = view.interval, view.distribution
    return [str(i["clusters"]), *(repr(v) for v in (*i["naive"], *i["clustered"])),
            "" if i["design_effect"] is None else repr(i["design_effect"]),
            *(repr(d["quantiles"][q]) for q in ("median", "p10", "p90")), repr(d["worst_decile"]["mean"])]


RENDERERS = {"md": render_markdown, "html": render_html, "csv": render_csv}
