"""PNG figures of result files: per-type accuracy across runs (one figure per track), and for multi-turn
runs the action transition matrices and the result-by-attempt profile.

matplotlib is imported only when a figure is drawn (the rest of the leaderboard
tools must work without paying for it), and figures are drawn on the Agg canvas
without pyplot, so nothing depends on a display or on global plotting state.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from PersonalWAB.data.schema import TASK_TYPES
from PersonalWAB.leaderboard.analysis import AttemptRow, TransitionMatrix, attempt_profile, transition_matrices
from PersonalWAB.leaderboard.summarize import GROUP_TITLES, GROUPS, MULTI_TURN, Row, summarize_files


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _label(text: str) -> str:
    """Names come from run args: keep a `$` in them from switching matplotlib to math mode."""
    return text.replace("$", r"\$")


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def type_bars_png(rows: list[Row]) -> bytes:
    """Function Acc and Result Acc per task type (and overall), one bar per run."""
    figure = _figure(11, 4 + 0.18 * len(rows))
    axes = figure.subplots(1, 2, sharey=True)
    width = 0.8 / max(1, len(rows))
    for ax, (key, label) in zip(axes, (("avg_action_acc", "Function Acc"), ("avg_res_acc", "Result Acc"))):
        for i, row in enumerate(rows):
            xs = [g + (i - (len(rows) - 1) / 2) * width for g in range(len(GROUPS))]
            ax.bar(xs, [row.score(group, key) for group in GROUPS], width, label=_label(row.name))
        ax.set_xticks(range(len(GROUPS)), [GROUP_TITLES[g] for g in GROUPS])
        ax.set_ylim(0, 1.05)
        ax.set_title(label)
        ax.grid(axis="y", alpha=0.3)
    figure.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=min(3, len(rows)),
                  fontsize="small")
    return _png(figure)


def user_histogram_png(distribution: dict[str, Any], title: str) -> bytes:
    """The per-user Result Acc of a run (`PersonalWAB.metrics.user_distribution`'s values) as a histogram."""
    figure = _figure(6, 3.2)
    ax = figure.subplots()
    ax.hist(distribution["values"], bins=10, range=(0, 1), color="#2f5d8a")
    ax.axvline(distribution["quantiles"]["median"], color="#a31515", linestyle="--", label="median")
    ax.set_xlabel("per-user Result Acc")
    ax.set_ylabel("users")
    ax.set_title(_label(title), fontsize="small")
    ax.legend(fontsize="small")
    return _png(figure)


def transitions_png(matrices: dict[str, TransitionMatrix], title: str) -> bytes:
    """One heatmap per task type: share of moves from each action (row) to the next (column)."""
    figure = _figure(15, 4.6)
    axes = figure.subplots(1, len(TASK_TYPES))
    for ax, kind in zip(axes, TASK_TYPES):
        matrix = matrices.get(kind)
        ax.set_title(GROUP_TITLES[kind])
        if matrix is None or not matrix.sources:
            ax.text(0.5, 0.5, "no tasks", ha="center", va="center")
            ax.set_axis_off()
            continue
        shares = matrix.row_shares()
        ax.imshow(shares, cmap="Blues", vmin=0, vmax=1)
        ax.set_xticks(range(len(matrix.targets)), matrix.targets, rotation=45, ha="right")
        ax.set_yticks(range(len(matrix.sources)), matrix.sources)
        ax.set_xlabel("next action")
        ax.set_ylabel("action")
        for y, row in enumerate(shares):
            for x, share in enumerate(row):
                if matrix.counts[y][x]:
                    ax.text(x, y, f"{share:.2f}", ha="center", va="center", fontsize=8,
                            color="white" if share > 0.6 else "black")
    figure.suptitle(_label(f"Action transitions: {title}"))
    return _png(figure)


def attempts_png(profile: dict[str, list[AttemptRow]], title: str) -> bytes:
    """Per task type and attempt number: tasks reaching it, tasks solved at it, mean Result Acc."""
    figure = _figure(15, 4.2)
    axes = figure.subplots(1, len(TASK_TYPES))
    for ax, kind in zip(axes, TASK_TYPES):
        rows = profile.get(kind, [])
        ax.set_title(GROUP_TITLES[kind])
        if not rows:
            ax.text(0.5, 0.5, "no attempts", ha="center", va="center")
            ax.set_axis_off()
            continue
        attempts = [r.attempt for r in rows]
        ax.bar([a - 0.2 for a in attempts], [r.tasks for r in rows], 0.4, label="tasks with this attempt")
        ax.bar([a + 0.2 for a in attempts], [r.solved for r in rows], 0.4, label="tasks solved at this attempt")
        ax.set_xticks(attempts)
        ax.set_xlabel("attempt")
        ax.set_ylabel("tasks")
        twin = ax.twinx()
        twin.plot(attempts, [r.mean_res_acc for r in rows], "o-", color="tab:red", label="mean Result Acc")
        twin.set_ylim(0, 1.05)
        twin.set_ylabel("Result Acc")
    legend: dict[str, Any] = {}
    for ax in figure.axes:  # one legend entry per series, from the first panel that drew it
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    figure.legend(list(legend.values()), list(legend), loc="outside lower center", ncols=3, fontsize="small")
    figure.suptitle(_label(f"Result by attempt: {title}"))
    return _png(figure)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")[:60] or "run"


def rows_by_track(rows: list[Row]) -> dict[str, list[Row]]:
    """Rows grouped by track: single-turn and multi-turn scores never share a figure."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.track, []).append(row)
    return groups


def write_plots(paths: list[Path | str], out_dir: Path | str, names: list[str] | None = None) -> list[Path]:
    """Write every figure of the given files into `out_dir`; return the written paths."""
    rows, reports = summarize_files(paths, names)
    if not rows:
        raise ValueError("none of the files could be scored; run `validate` to see why")
    from PersonalWAB.outputs import write_output

    out_dir = Path(out_dir)
    written = []
    for track, members in rows_by_track(rows).items():
        written.append(out_dir / f"type_accuracy_{_slug(track)}.png")
        write_output(written[-1], type_bars_png(members))
    records = {report.path: report.result.records for report in reports if report.result is not None}
    for i, row in enumerate(rows, 1):
        if row.track != MULTI_TURN:
            continue
        stem = f"{i:02d}_{_slug(row.name)}"
        for kind, png in (("transitions", transitions_png(transition_matrices(records[row.path]), row.name)),
                          ("attempts", attempts_png(attempt_profile(records[row.path]), row.name))):
            written.append(out_dir / f"{kind}_{stem}.png")
            write_output(written[-1], png)
    return written
