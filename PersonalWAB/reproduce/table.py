"""Paper vs reproduced: per row and task type, each reproduced Function Acc, Result Acc and
Avg Steps with its 95% bootstrap interval over tasks, the paper's figure beside it, and a
flag where that figure falls outside the interval; as text, Markdown and a self-contained
HTML page.

The paper prints three decimals, so its figure counts as inside when it is within 0.0005 of
the interval. A flag says the run and the paper disagree by more than the tasks' sampling
explains; on data other than the official benchmark, or with texts or rules other than the
release's (a custom run), the numbers are not comparable and the page says so first.

The page follows the report's safety rules (`PersonalWAB.leaderboard.report`): every text is
escaped, and a Content Security Policy allows nothing but the page's own style, so it loads
nothing from anywhere.
"""

from __future__ import annotations

import base64
import hashlib
import html
from dataclasses import dataclass, field
from pathlib import Path

from PersonalWAB.data.schema import TASK_TYPES
from PersonalWAB.leaderboard.summarize import TABLE_CSS, md_cell
from PersonalWAB.metrics import bootstrap_interval, compute_statistics, count_errors, record_steps, task_score
from PersonalWAB.outputs import write_output
from PersonalWAB.reproduce.paper import PaperRow, paper_source
from PersonalWAB.results import custom_reasons
from PersonalWAB.schema_types import Header, Record

GROUPS = (*TASK_TYPES, "overall")
METRICS = (("function", "Function Acc", "avg_action_acc"), ("result", "Result Acc", "avg_res_acc"),
           ("steps", "Avg Steps", "avg_interaction_times"))
ROUNDING = 0.0005  # half the paper's last printed digit
FLAG = "!"


@dataclass
class Cell:
    """One reproduced figure, its 95% interval and the paper's figure (None: none to compare)."""

    value: float
    low: float
    high: float
    paper: float | None = None

    @property
    def outside(self) -> bool:
        return self.paper is not None and (self.paper + ROUNDING < self.low or self.paper - ROUNDING > self.high)

    def reproduced_text(self, digits: int) -> str:
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"

    def paper_text(self, digits: int) -> str:
        if self.paper is None:
            return ""
        return f"{self.paper:.{digits}f}{FLAG if self.outside else ''}"


@dataclass
class RowComparison:
    """One row's result file set beside the paper's row."""

    row: str
    path: Path
    paper: PaperRow | None
    tasks: dict[str, int]
    cells: dict[tuple[str, str], Cell]
    errored: int
    custom: list[str] = field(default_factory=list)  # why the run is custom ([]: standard)


@dataclass
class Comparison:
    """A track's table: its rows and what a reader must know first."""

    title: str
    rows: list[RowComparison]
    notes: list[str]


def compare_row(row: str, path: Path, header: Header, records: list[Record],
                paper: PaperRow | None) -> RowComparison:
    """The cells of one result file: the header's means, bootstrap intervals over its tasks."""
    stats = compute_statistics(records)
    groups: dict[str, list[Record]] = {g: [] for g in GROUPS}
    for record in records:
        groups.setdefault(record["info"]["task"]["type"], []).append(record)
        groups["overall"].append(record)
    cells = {}
    for group, members in groups.items():
        if not members:
            continue
        scores = [task_score(r["action_acc"], r["res_acc"]) for r in members]
        values = {"function": [s[0] for s in scores], "result": [s[1] for s in scores],
                  "steps": [float(record_steps(r)) for r in members]}
        for metric, _, key in METRICS:
            low, high = bootstrap_interval(values[metric])
            cells[(group, metric)] = Cell(stats[group][key], low, high,
                                          paper.figure(group, metric) if paper else None)
    tasks = {group: len(members) for group, members in groups.items() if members}
    run_args = header["run_args"]
    reasons = [] if run_args["protocol"]["standard"] else custom_reasons(run_args["protocol"],
                                                                          run_args.get("protocol_texts_digest"))
    return RowComparison(row, path, paper, tasks, cells, count_errors(records)["overall"], reasons)


def comparison_notes(rows: list[RowComparison], data_source: str, model: str, track_note: str) -> list[str]:
    """What a reader must know before reading the numbers."""
    notes = []
    if data_source != "official":
        notes.append(f"{data_source} data, not the official benchmark: no figure here is comparable to the "
                     "paper's, flags included")
    custom = [r.row for r in rows if r.custom]
    if custom:
        reasons = sorted({reason for r in rows for reason in r.custom})
        notes.append(f"custom rows ({', '.join(custom)}): {'; '.join(reasons)}; not comparable to the paper's "
                     "tables (place the release protocol pack for standard runs, see docs/fidelity.md)")
    compared = [f"{r.row}: {r.paper.source}" for r in rows if r.paper]
    if compared:
        notes.append(f"paper figures: {'; '.join(compared)}")
    else:
        notes.append(f"no paper figures for {model}: the paper column is filled only for the model the paper "
                     "names for a row")
    notes.append(track_note)
    errored = [f"{r.row} ({r.errored})" for r in rows if r.errored]
    if errored:
        notes.append(f"tasks that ended in an error count as 0 until run again (re-run the same command): "
                     f"{', '.join(errored)}")
    notes.append(f"reproduced: mean [95% bootstrap interval over tasks]; paper: {paper_source()}; "
                 f"{FLAG} the paper's figure is outside the interval")
    return notes


def _rows_of(row: RowComparison) -> list[tuple[str, str, list[str]]]:
    """(row label, type, cells as text) per task type of a row, in table order."""
    label = row.row + (" (custom)" if row.custom else "")
    out = []
    for group in GROUPS:
        if group not in row.tasks:
            continue
        texts = [str(row.tasks[group])]
        for metric, _, _ in METRICS:
            cell = row.cells[(group, metric)]
            digits = 2 if metric == "steps" else 3
            texts += [cell.reproduced_text(digits), cell.paper_text(digits)]
        out.append((label, group, texts))
    return out


def _header_cells() -> list[str]:
    heads = ["tasks"]
    for _, name, _ in METRICS:
        heads += [f"{name} [95% CI]", "paper"]
    return heads


def render_text(comparison: Comparison) -> str:
    """The table as printed at the end of a reproduction."""
    widths = [6, 22, 7, 22, 7, 18, 7]
    lines = [comparison.title, f"{'row':<22} {'type':<9} "
             + " ".join(f"{h:>{w}}" for h, w in zip(_header_cells(), widths))]
    for row in comparison.rows:
        for label, group, texts in _rows_of(row):
            lines.append(f"{label:<22} {group:<9} " + " ".join(f"{t:>{w}}" for t, w in zip(texts, widths)))
    return "\n".join(lines + [f"note: {note}" for note in comparison.notes])


def render_markdown(comparison: Comparison) -> str:
    """The table in Markdown, notes first."""
    heads = ["row", "type", *_header_cells()]
    lines = [f"## {md_cell(comparison.title)}", "", *[f"- {md_cell(note)}" for note in comparison.notes], "",
             "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for row in comparison.rows:
        for label, group, texts in _rows_of(row):
            lines.append("| " + " | ".join(md_cell(t) for t in [label, group, *texts]) + " |")
    return "\n".join(lines) + "\n"


PAGE_CSS = TABLE_CSS + """
table.leaderboard td.outside { background: #fde2e2; font-weight: bold; }
ul.notes li { margin: 0.2rem 0; }
"""
CSP = ("default-src 'none'; style-src 'sha256-"
       + base64.b64encode(hashlib.sha256(PAGE_CSS.encode("utf-8")).digest()).decode("ascii")
       + "'; base-uri 'none'; form-action 'none'")


def render_html(comparison: Comparison) -> str:
    """A self-contained page: the notes and the table, every text escaped, no script."""
    heads = "".join(f"<th>{html.escape(h)}</th>" for h in ["row", "type", *_header_cells()])
    body = []
    for row in comparison.rows:
        for label, group, texts in _rows_of(row):
            cells = [f"<td>{html.escape(t)}</td>" for t in [label, group, texts[0]]]
            for i, (metric, _, _) in enumerate(METRICS):
                flagged = ' class="outside"' if row.cells[(group, metric)].outside else ""
                cells.append(f"<td>{html.escape(texts[1 + 2 * i])}</td>")
                cells.append(f"<td{flagged}>{html.escape(texts[2 + 2 * i])}</td>")
            body.append(f"<tr title=\"{html.escape(str(row.path))}\">{''.join(cells)}</tr>")
    notes = "".join(f"<li>{html.escape(note)}</li>" for note in comparison.notes)
    title = html.escape(comparison.title)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<title>{title}</title><style>{PAGE_CSS}</style></head>\n<body>\n<h1>{title}</h1>\n"
            f"<ul class=\"notes\">{notes}</ul>\n<table class=\"leaderboard\"><thead><tr>{heads}</tr></thead>\n"
            f"<tbody>{''.join(body)}</tbody></table>\n</body></html>\n")


def write_tables(comparison: Comparison, folder: Path) -> list[Path]:
    """comparison.txt, comparison.md and comparison.html in `folder`."""
    written = []
    for name, render in (("comparison.txt", render_text), ("comparison.md", render_markdown),
                         ("comparison.html", render_html)):
        path = folder / name
        write_output(path, render(comparison) + ("\n" if name.endswith(".txt") else ""))
        written.append(path)
    return written
