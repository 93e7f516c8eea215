"""One self-contained HTML page per result file: validation, summary table, the run's audit, the
per-user view, plots and a list of every task with its instruction, actions, tool results, scores
and failure label, filterable by type, status, failure label and text.

With `--compare BASELINE` the page also holds the comparison with a baseline run
(`PersonalWAB.leaderboard.compare`), the baseline's score of each task beside the run's, a
filter for the tasks that flipped, and the baseline's bars in the per-type plot. With
`--data_dir` each task shows its target product's title and the user's real review. Columns
sort on a click; `#task-N` links to record N (its details opened).

The page must be safe to open whatever the models wrote: all text that reaches
the markup goes through `html.escape`; the records travel as JSON inside a
non-executed `<script type="application/json">` block (with `<`, `>` and `&`
escaped) and the page's script renders them with `textContent` only. A Content
Security Policy pins the page's own style and script by hash and allows nothing
else but embedded images, so the page loads nothing from anywhere.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PersonalWAB.data.schema import TASK_TYPES
from PersonalWAB.audit.run import privileged_flags
from PersonalWAB.failures import FAILURE_LABELS, failure_label, react_prefix_of
from PersonalWAB.leaderboard.analysis import is_solved
from PersonalWAB.leaderboard.compare import Comparison, Trials, by_task, render_html, task_solved, track
from PersonalWAB.leaderboard.summarize import (CUSTOM_NOTE, MULTI_TURN, SYNTHETIC_NOTE, TABLE_CSS, Row,
                                               row_from_report, render_html_tables)
from PersonalWAB.leaderboard.validate import CUSTOM, ValidationReport
from PersonalWAB.metrics import compute_statistics, record_steps, task_score
from PersonalWAB.schema_types import Record, RunArgs, Task

if TYPE_CHECKING:
    from PersonalWAB.data.loader import BenchmarkData

MAX_TEXT = 3000  # characters kept of each message in the task list
MAX_PROBLEMS = 200  # problems listed on the page (the rest are counted)

PAGE_CSS = TABLE_CSS + """
.banner { background: #fff3cd; border: 1px solid #e0c36b; padding: 0.5rem 0.75rem; margin: 0.5rem 0; }
.valid { color: #17692b; font-weight: bold; } .invalid { color: #a31515; font-weight: bold; }
table.args td { border: none; padding: 0.1rem 0.6rem 0.1rem 0; font-size: 0.85rem; vertical-align: top; }
img.plot { max-width: 100%; border: 1px solid #ddd; margin: 0.5rem 0; }
.controls { margin: 0.5rem 0; display: flex; flex-wrap: wrap; gap: 0.75rem; align-items: center; }
.controls button { border: 1px solid #99a; background: #fff; padding: 0.2rem 0.6rem; cursor: pointer; }
.controls button[aria-pressed="true"] { background: #2f5d8a; color: #fff; }
table.tasks { border-collapse: collapse; width: 100%; font-size: 0.85rem; }
table.tasks th, table.tasks td { border-bottom: 1px solid #e3e3e3; padding: 0.2rem 0.4rem; text-align: left; }
table.tasks tr.task { cursor: pointer; } table.tasks tr.task:hover { background: #f5f8fc; }
tr.solved td:nth-child(7) { color: #17692b; } tr.unsolved td:nth-child(7) { color: #a31515; }
table.tasks th[data-sort] { cursor: pointer; } table.tasks th[aria-sort="ascending"]::after { content: " \\25B2"; }
table.tasks th[aria-sort="descending"]::after { content: " \\25BC"; }
tr.task:target, tr.task.linked { outline: 2px solid #2f5d8a; }
tr.detail td { background: #fafafa; }
.detail h4 { margin: 0.6rem 0 0.2rem; }
.detail pre { white-space: pre-wrap; word-break: break-word; margin: 0.1rem 0 0.4rem; font-size: 0.8rem; }
.detail .role { font-weight: bold; color: #2f5d8a; }
"""

PAGE_JS = """
(function () {
  "use strict";
  var records = JSON.parse(document.getElementById("pwab-records").textContent);
  var state = { type: "all", status: "all", flip: "all", failure: "all", text: "" };
  var compared = document.getElementById("task-rows").hasAttribute("data-compared");
  var body = document.getElementById("task-rows");
  var counter = document.getElementById("task-count");

  function el(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    if (className) { node.className = className; }
    return node;
  }
  function fmt(x) { return Number(x).toFixed(3); }
  function section(parent, title) { parent.appendChild(el("h4", title)); }

  function fillDetail(cell, rec) {
    var box = el("div", null, "detail");
    section(box, "Instruction");
    box.appendChild(el("pre", rec.instr));
    section(box, "Target");
    box.appendChild(el("pre", rec.target + (rec.title ? " - " + rec.title : "")));
    if (rec.review) { section(box, "The user's real review"); box.appendChild(el("pre", rec.review)); }
    if (rec.base) {
      section(box, "Baseline");
      box.appendChild(el("pre", "result acc " + fmt(rec.base.r) + ", solved " + (rec.base.solved ? "yes" : "no") +
        (rec.flip ? " (" + rec.flip + ")" : "")));
    }
    section(box, "Failure label");
    box.appendChild(el("pre", rec.fail));
    section(box, "Attempts (function acc, result acc)");
    if (!rec.attempts.length) { box.appendChild(el("pre", "no action function was called")); }
    rec.attempts.forEach(function (a, i) {
      box.appendChild(el("pre", "attempt " + (i + 1) + ": function acc " + a[0] + ", result acc " + fmt(a[1])));
    });
    section(box, "Actions");
    rec.actions.forEach(function (a) { box.appendChild(el("pre", a)); });
    if (rec.error) { section(box, "Error"); box.appendChild(el("pre", rec.error)); }
    section(box, "Conversation and tool results");
    rec.traj.forEach(function (m) {
      var line = el("div");
      line.appendChild(el("span", m[0], "role"));
      line.appendChild(el("pre", m[1]));
      box.appendChild(line);
    });
    cell.appendChild(box);
  }

  function cells(rec) {
    var values = [rec.el, rec.id, rec.trial, rec.type, rec.user, rec.instr, rec.solved ? "yes" : "no",
      fmt(rec.f), fmt(rec.r), rec.steps, rec.fail];
    if (compared) { values.push(rec.base ? fmt(rec.base.r) : "-", rec.flip || ""); }
    return values;
  }

  var rows = records.map(function (rec) {
    var tr = el("tr", null, "task " + (rec.solved ? "solved" : "unsolved"));
    tr.id = "task-" + rec.el;
    cells(rec).forEach(function (value, i) {
      var td = el("td");
      if (i === 0) {
        var link = el("a", value);
        link.href = "#task-" + rec.el;
        link.title = "link to this task";
        td.appendChild(link);
      } else { td.textContent = String(value); }
      tr.appendChild(td);
    });
    var detail = el("tr", null, "detail");
    var cell = el("td");
    cell.colSpan = cells(rec).length;
    detail.appendChild(cell);
    detail.hidden = true;
    tr.addEventListener("click", function () {
      if (!cell.firstChild) { fillDetail(cell, rec); }
      detail.hidden = !detail.hidden;
    });
    body.appendChild(tr);
    body.appendChild(detail);
    var text = [rec.instr, rec.user, rec.target, rec.title || "", rec.review || "", rec.error || ""]
      .concat(rec.actions)
      .concat(rec.traj.map(function (m) { return m[1]; })).join("\\n").toLowerCase();
    return { rec: rec, tr: tr, detail: detail, cell: cell, text: text };
  });

  var SORT_KEYS = ["el", "id", "trial", "type", "user", "instr", "solved", "f", "r", "steps", "fail", "baseR", "flip"];
  function sortValue(rec, key) {
    if (key === "baseR") { return rec.base ? rec.base.r : -1; }
    var value = rec[key];
    return typeof value === "boolean" ? Number(value) : value;
  }
  document.querySelectorAll("table.tasks th[data-sort]").forEach(function (th) {
    th.addEventListener("click", function () {
      var key = SORT_KEYS[Number(th.getAttribute("data-sort"))];
      var ascending = th.getAttribute("aria-sort") !== "ascending";
      document.querySelectorAll("table.tasks th[data-sort]").forEach(function (other) {
        other.removeAttribute("aria-sort");
      });
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      rows.sort(function (a, b) {
        var x = sortValue(a.rec, key), y = sortValue(b.rec, key);
        var order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return (ascending ? order : -order) || a.rec.el - b.rec.el;
      });
      rows.forEach(function (row) { body.appendChild(row.tr); body.appendChild(row.detail); });
    });
  });

  function apply() {
    var shown = 0;
    rows.forEach(function (row) {
      var ok = (state.type === "all" || row.rec.type === state.type) &&
        (state.status === "all" || (state.status === "solved") === row.rec.solved) &&
        (state.flip === "all" || Boolean(row.rec.flip)) &&
        (state.failure === "all" || row.rec.fail === state.failure) &&
        (!state.text || row.text.indexOf(state.text) >= 0);
      row.tr.hidden = !ok;
      if (!ok) { row.detail.hidden = true; }
      if (ok) { shown += 1; }
    });
    counter.textContent = shown + " of " + rows.length + " tasks shown";
  }

  document.querySelectorAll("button[data-filter]").forEach(function (button) {
    button.addEventListener("click", function () {
      var key = button.getAttribute("data-filter");
      state[key] = button.getAttribute("data-value");
      document.querySelectorAll("button[data-filter='" + key + "']").forEach(function (other) {
        other.setAttribute("aria-pressed", String(other === button));
      });
      apply();
    });
  });
  document.getElementById("task-search").addEventListener("input", function (event) {
    state.text = event.target.value.trim().toLowerCase();
    apply();
  });
  function openLinked() {
    var row = rows.find(function (r) { return "#" + r.tr.id === window.location.hash; });
    if (!row) { return; }
    rows.forEach(function (r) { r.tr.classList.remove("linked"); });
    if (row.tr.hidden) {
      state = { type: "all", status: "all", flip: "all", failure: "all", text: "" };
      document.getElementById("task-search").value = "";
      document.querySelectorAll("button[data-filter]").forEach(function (button) {
        button.setAttribute("aria-pressed", String(button.getAttribute("data-value") === "all"));
      });
      apply();
    }
    if (!row.cell.firstChild) { fillDetail(row.cell, row.rec); }
    row.detail.hidden = false;
    row.tr.classList.add("linked");
    row.tr.scrollIntoView();
  }
  window.addEventListener("hashchange", openLinked);
  apply();
  openLinked();
})();
"""


def _csp_hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii") + "'"


CSP = (f"default-src 'none'; img-src data:; style-src {_csp_hash(PAGE_CSS)}; "
       f"script-src {_csp_hash(PAGE_JS)}; base-uri 'none'; form-action 'none'")


def script_json(value: Any) -> str:
    """JSON that cannot end its <script> block or open markup: <, > and & as \\u escapes."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _clip(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= MAX_TEXT else f"{text[:MAX_TEXT]} [... {len(text) - MAX_TEXT} more characters]"


def _message(message: Any) -> list[str]:
    """A chat message as [role label, text]; tool calls are shown as name(arguments)."""
    if not isinstance(message, dict):
        return ["?", _clip(message)]
    role = str(message.get("role", "?"))
    if role == "tool" and message.get("name"):
        role = f"tool result ({message['name']})"
    parts = [_clip(message["content"])] if message.get("content") not in (None, "") else []
    for call in message.get("tool_calls") or []:
        function = (call.get("function") or {}) if isinstance(call, dict) else {}
        parts.append(_clip(f"calls {function.get('name')}({function.get('arguments', '')})"))
    return [role, "\n".join(parts)]


def task_entry(record: Record, element: int, split: list[Task] | None = None,
               baseline: dict[Any, Trials] | None = None, flips: dict[Any, str] | None = None,
               react_prefix: str = "", catalogue: Any = None) -> dict[str, Any]:
    """What the page shows of one record (long texts clipped): with the run's task `split`, the
    target's title and the user's real review; with a comparison, the baseline's mean Result
    Acc of the task and whether it flipped."""
    info = record["info"]
    task = info["task"]
    function_acc, res_acc = task_score(record["action_acc"], record["res_acc"])
    target = task["target"] if isinstance(task["target"], str) else json.dumps(task["target"], ensure_ascii=False)
    extra: dict[str, Any] = {}
    task_id = record["task_id"]
    if split is not None and isinstance(task_id, int) and 0 <= task_id < len(split) \
            and split[task_id]["task"] == task["task"]:  # the same task, not only the same index
        answer = split[task_id]["target"]
        review = answer["review"]
        extra.update(title=_clip(answer["product_info"]["title"]),
                     review=_clip(f"{review['rating']:g} stars: {review['title']}\n{review['text']}"))
    if baseline is not None:
        trials = baseline.get(task_id)
        extra["base"] = None if not trials else {"r": sum(task_score(t["action_acc"], t["res_acc"])[1]
                                                           for t in trials) / len(trials),
                                                  "solved": task_solved(trials)}
        extra["flip"] = (flips or {}).get(task_id, "")
    return {**extra,
        "el": element, "id": record["task_id"], "trial": record["trial"], "type": task["type"],
        "user": str(task["user_id"]), "instr": _clip(task["task"]), "target": _clip(target),
        "f": function_acc, "r": res_acc, "solved": is_solved(record), "steps": record_steps(record),
        "fail": str(info.get("failure") or failure_label(record, react_prefix, catalogue)),
        "attempts": [list(pair) for pair in zip(record["action_acc"], record["res_acc"])],
        "actions": [_clip(f"{a.get('name')}({json.dumps(a.get('arguments', {}), ensure_ascii=False)})")
                    for a in info.get("actions", []) if isinstance(a, dict)],
        "traj": [_message(m) for m in record["traj"]],
        "error": _clip(info["error"]) if "error" in info else None,
    }


def _img(png: bytes, alt: str) -> str:
    return (f'<img class="plot" alt="{html.escape(alt)}" '
            f'src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">')


def baseline_row(comparison: Comparison) -> Row:
    """The baseline run as a row of the per-type plot, scored over its usable records."""
    run = comparison.baseline
    return Row(f"{run.name} (baseline)", run.path, track(run.run_args) or "unknown", "",
               compute_statistics(list(run.records.values())), 0.0, [], True)


def _plots(report: ValidationReport, row: Any, comparison: Comparison | None = None) -> str:
    from PersonalWAB.leaderboard.analysis import attempt_profile, transition_matrices
    from PersonalWAB.leaderboard.plots import attempts_png, transitions_png, type_bars_png

    bars = [row] if comparison is None else [baseline_row(comparison), row]
    images = [_img(type_bars_png(bars), "Function and Result Acc per task type"
                   + (", beside the baseline" if comparison is not None else ""))]
    if row.track == MULTI_TURN and report.result is not None:
        records = report.result.records
        images.append(_img(transitions_png(transition_matrices(records), row.name), "action transition matrices"))
        images.append(_img(attempts_png(attempt_profile(records), row.name), "result by attempt number"))
    return "\n".join(images)


def _validation_section(report: ValidationReport) -> str:
    verdict = ('<span class="valid">VALID</span>' if report.valid else '<span class="invalid">INVALID</span>')
    flags = f" &middot; flags: {html.escape(', '.join(report.flags))}" if report.flags else ""
    items = "".join(f"<li>{html.escape(p.format(report.path.name))}</li>" for p in report.problems[:MAX_PROBLEMS])
    more = len(report.problems) - MAX_PROBLEMS
    more_item = f"<li>... and {more} more (run validate for all)</li>" if more > 0 else ""
    return f"<h2>Validation</h2>\n<p>{verdict}{flags}</p>\n<ul>{items}{more_item}</ul>"


def _audit_section(report: ValidationReport) -> str:
    """The run's privileged inputs (`PersonalWAB.audit.run`): what the agent was given that a deployed
    agent would not have, and what the strict protocol removed."""
    audit = report.audit
    if audit is None:
        return ""
    counts = "".join(f"<li>{html.escape(key)}: {value['count']} in {value['tasks']} task run(s)</li>"
                     for key, value in audit["privileged_inputs"].items())
    flags = "".join(f'<p class="banner">Privileged input: {html.escape(line)}</p>' for line in privileged_flags(audit))
    return (f"<h2>Audit</h2>\n{flags}<p>Strict protocol: {'yes' if audit['strict'] else 'no'}; removed: "
            f"{html.escape(', '.join(audit['removed']) or 'nothing')}; remaining: "
            f"{html.escape(', '.join(audit['remaining']) or 'nothing')} (docs/audit.md)</p>\n<ul>{counts}</ul>")


def _users_section(row: Row) -> str:
    """The per-user view: the distribution of per-user Result Acc (a histogram) and the worst decile."""
    if row.users is None:
        return ""
    from PersonalWAB.leaderboard.plots import user_histogram_png

    return (f"<h2>Users</h2>\n<p>{html.escape(row.users.line())}</p>\n"
            + _img(user_histogram_png(row.users.distribution, row.name), "per-user Result Acc"))


def _run_args_section(run_args: RunArgs) -> str:
    if not run_args:
        return "<p>No run arguments: the file has no header (interrupted run).</p>"
    rows = "".join(f"<tr><td>{html.escape(str(key))}</td><td>{html.escape(json.dumps(value, ensure_ascii=False))}"
                   "</td></tr>" for key, value in run_args.items())
    return f"<details><summary>Run arguments</summary><table class=\"args\">{rows}</table></details>"


def _task_section(entries: list[dict[str, Any]], compared: bool = False, titled: bool = False) -> str:
    present = {entry["fail"] for entry in entries}
    failures = [label for label in FAILURE_LABELS if label in present]
    def buttons(key: str, values: list[str]) -> str:
        return "".join(
            f'<button type="button" id="filter-{key}-{value}" data-filter="{key}" data-value="{value}" '
            f'aria-pressed="{"true" if value == "all" else "false"}">{value}</button>' for value in values)

    columns = ["record", "task_id", "trial", "type", "user", "instruction", "solved", "F. Acc", "R. Acc", "steps",
               "failure"]
    columns += ["baseline R. Acc", "flip"] if compared else []
    head = "".join(f'<th data-sort="{i}" title="sort by {h}">{h}</th>' for i, h in enumerate(columns))
    flip_filter = f'<span>flips: {buttons("flip", ["all", "flipped"])}</span>' if compared else ""
    notes = ("" if titled else " Give <code>--data_dir</code> to see each target's title and the user's real "
             "review.") + (" Flip: solved by the baseline only (lost) or by this run only (gained)."
                           if compared else "")
    return (
        "<h2>Tasks</h2>\n<p>Click a task to see its actions, tool results and scores; click a column's head to "
        "sort by it; the record number links to the task. Solved: the right function was called and its best "
        f"result scored above 0. Failure: the label a rule gives each task run (docs/leaderboard.md).{notes}</p>\n"
        f'<div class="controls"><span>type: {buttons("type", ["all", *TASK_TYPES])}</span>'
        f'<span>status: {buttons("status", ["all", "solved", "unsolved"])}</span>{flip_filter}'
        f'<span>failure: {buttons("failure", ["all", *failures])}</span>'
        '<input id="task-search" type="search" placeholder="search text" aria-label="search tasks">'
        '<span id="task-count"></span></div>\n'
        f'<table class="tasks"><thead><tr>{head}</tr></thead>'
        f'<tbody id="task-rows"{" data-compared" if compared else ""}></tbody></table>\n'
        f'<script type="application/json" id="pwab-records">{script_json(entries)}</script>\n'
        f"<script>{PAGE_JS}</script>"
    )


def _flips(comparison: Comparison) -> dict[Any, str]:
    """task_id -> `lost` (solved by the baseline only) or `gained` (by this run only)."""
    overall = next((g for g in comparison.groups if g.name == "overall"), None)
    if overall is None:
        return {}
    return {**{key: "lost" for key in overall.lost}, **{key: "gained" for key in overall.gained}}


def render_report(report: ValidationReport, name: str | None = None, comparison: Comparison | None = None,
                  data: BenchmarkData | None = None) -> str:
    """The report page of a validated file; with `comparison`, its section after the summary and
    the baseline beside each task; with the benchmark `data`, each target's title and review."""
    row = row_from_report(report, name)
    title = row.name if row else report.path.name
    parts = [f"<h1>PersonalWAB run report: {html.escape(title)}</h1>",
             f"<p>File: <code>{html.escape(str(report.path))}</code></p>"]
    if "synthetic" in report.flags:
        parts.append(f'<p class="banner">This run used {SYNTHETIC_NOTE}.</p>')
    if CUSTOM in report.flags:
        parts.append(f'<p class="banner">This is a custom run ({html.escape(CUSTOM_NOTE)}).</p>')
    parts.append(_validation_section(report))
    if report.result is not None:
        parts.append(_run_args_section(report.result.run_args))
    if row is not None and report.result is not None:
        first = report.result.first_element
        split = data.split(str(report.result.run_args.get("task_split", "test"))) if data is not None else None
        baseline = by_task(comparison.baseline) if comparison is not None else None
        flips = _flips(comparison) if comparison is not None else None
        prefix = react_prefix_of(report.result.run_args)
        catalogue = data.products if data is not None else None
        entries = [task_entry(r, first + i, split, baseline, flips, prefix, catalogue)
                   for i, r in enumerate(report.result.records)]
        parts += ["<h2>Summary</h2>", render_html_tables([row]), _audit_section(report), _users_section(row)]
        if comparison is not None:
            parts.append(render_html(comparison))
        parts += ["<h2>Plots</h2>", _plots(report, row, comparison),
                  _task_section(entries, comparison is not None, split is not None)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<title>{html.escape(title)}</title><style>{PAGE_CSS}</style></head>\n<body>\n"
            + "\n".join(parts) + "\n</body></html>\n")


def write_report_page(report: ValidationReport, out_dir: Path | str, name: str | None = None,
                      comparison: Comparison | None = None, data: BenchmarkData | None = None) -> Path:
    """Write the page of a validated file as `<stem>.report.html` into `out_dir`."""
    from PersonalWAB.outputs import write_output

    out = Path(out_dir) / f"{Path(report.path).stem}.report.html"
    write_output(out, render_report(report, name, comparison, data))
    return out
