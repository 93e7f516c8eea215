"""Data statistics of any data directory (the paper's Table 2 and Figures 3-4), as a
table, a JSON report and a figure, so a built benchmark can be set beside the published one.

Tokens are counted with tiktoken's cl100k_base (litellm ships its files, so nothing is
downloaded) on the JSON text of each record: a product's metadata, a behaviour's product
plus review, an instruction's text. The paper does not name its tokenizer, so token
figures are comparable between directories measured here, and only roughly with the
published ones. A user's behaviours "at train time" are the history split, "at test
time" the history and train splits (what an agent may read for tasks of each split),
averaged over users.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Callable
from statistics import mean
from typing import Any

from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.data.schema import TASK_TYPES
from PersonalWAB.tokens import token_counter

LEVEL_FIELDS = ("Price Sensitivity", "Diversity Preference", "Interaction Complexity")
CATEGORICAL_FIELDS = ("Gender", "Age", *LEVEL_FIELDS)
TOP_OCCUPATIONS = 8
# The paper's published figures for the release (facts, for the reference column).
PUBLISHED = {
    "users": 1000, "users_with_train_tasks": 939, "behaviours": 40600, "products": 35772,
    "target_side_products": 8236, "tokens_per_product": 665, "train_tasks": 6896, "test_tasks": 2174,
    "test_search": 694, "test_recommend": 757, "test_review": 723,
    "behaviours_train_time": 32, "behaviours_test_time": 38, "tokens_train_time": 7600, "tokens_test_time": 9300,
}
# What an agent may read at each stage: the history split for train tasks, history and train for test tasks.
VISIBLE = {"train_time": ("history",), "test_time": ("history", "train")}


def _share(values: list[str]) -> dict[str, float]:
    counts = Counter(values)
    return {value: n / len(values) for value, n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))}


def data_statistics(data: BenchmarkData,
                    count_tokens: Callable[[list[str]], list[int]] | None = None) -> dict[str, Any]:
    """Table 2's rows, the profile field distributions and the series behind the figure."""
    count_tokens = count_tokens or token_counter()
    asins = sorted(data.products)
    product_tokens = dict(zip(asins, count_tokens([json.dumps(data.products[a], ensure_ascii=False) for a in asins])))
    users = sorted(data.histories)
    tokens: dict[str, list[tuple[str, int]]] = {}  # per user: (split, tokens) of each behaviour
    for user_id in users:
        behaviours = data.histories[user_id]
        review_tokens = count_tokens([json.dumps(b["review"], ensure_ascii=False) for b in behaviours])
        tokens[user_id] = []
        for behaviour, review in zip(behaviours, review_tokens):
            product = product_tokens.get(behaviour["product_info"]["parent_asin"])
            if product is None:  # a history product missing from the catalogue file
                product = count_tokens([json.dumps(behaviour["product_info"], ensure_ascii=False)])[0]
            tokens[user_id].append((behaviour["split"], product + review))
    target_side = {b["product_info"]["parent_asin"] for h in data.histories.values() for b in h
                   if b["split"] != "history"}
    out: dict[str, Any] = {
        "data_dir": str(data.data_dir),
        "source": data.source,
        "users": len(data.profiles),
        "users_with_train_tasks": len({t["user_id"] for t in data.tasks["train"]}),
        "behaviours": sum(len(h) for h in data.histories.values()),
        "behaviours_per_user": mean(len(data.histories[u]) for u in users) if users else 0.0,
        "tokens_per_user": mean(sum(n for _, n in tokens[u]) for u in users) if users else 0.0,
        "products": len(data.products),
        "target_side_products": len(target_side),
        "tokens_per_product": mean(product_tokens.values()) if product_tokens else 0.0,
    }
    for stage, splits in VISIBLE.items():
        out[f"behaviours_{stage}"] = mean(sum(s in splits for s, _ in tokens[u]) for u in users) if users else 0.0
        out[f"tokens_{stage}"] = mean(sum(n for s, n in tokens[u] if s in splits) for u in users) if users else 0.0
    instruction_tokens: dict[str, dict[str, list[int]]] = {}
    for split in ("train", "test"):
        tasks = data.tasks[split]
        out[f"{split}_tasks"] = len(tasks)
        lengths = count_tokens([t["task"] for t in tasks])
        instruction_tokens[split] = {kind: [n for t, n in zip(tasks, lengths) if t["type"] == kind]
                                     for kind in TASK_TYPES}
        for kind in TASK_TYPES:
            out[f"{split}_{kind}"] = len(instruction_tokens[split][kind])
            counts = instruction_tokens[split][kind]
            out[f"{split}_{kind}_tokens"] = mean(counts) if counts else 0.0
    profiles = list(data.profiles.values())
    out["profile_distributions"] = {name: _share([str(p.get(name, "")) for p in profiles])
                                   for name in CATEGORICAL_FIELDS}
    occupations = _share([p.get("Occupation", "") for p in profiles])
    out["profile_distributions"]["Occupation"] = dict(list(occupations.items())[:TOP_OCCUPATIONS])
    out["brands_per_profile"] = mean(len([b for b in p.get("Brand Preference", "").split(",") if b.strip()])
                                     for p in profiles) if profiles else 0.0
    out["series"] = {"behaviours_per_user": [len(data.histories[u]) for u in users],
                     "instruction_tokens": instruction_tokens}
    return out


TABLE_ROWS = (
    ("users", "users"), ("users with train tasks", "users_with_train_tasks"), ("behaviours", "behaviours"),
    ("behaviours per user", "behaviours_per_user"),
    ("behaviours per user at train time", "behaviours_train_time"),
    ("behaviours per user at test time", "behaviours_test_time"),
    ("behaviour tokens per user at train time", "tokens_train_time"),
    ("behaviour tokens per user at test time", "tokens_test_time"),
    ("products (catalogue)", "products"), ("target-side products", "target_side_products"),
    ("tokens per product", "tokens_per_product"),
    ("train instructions", "train_tasks"), ("test instructions", "test_tasks"),
    *((f"{split} {kind}", f"{split}_{kind}") for split in ("train", "test") for kind in TASK_TYPES),
    *((f"tokens per {kind} instruction (test)", f"test_{kind}_tokens") for kind in TASK_TYPES),
    ("brands per profile", "brands_per_profile"),
)


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}"


def markdown_table(reports: list[dict[str, Any]], labels: list[str], published: bool = True) -> str:
    """Table 2 side by side (plus the paper's published column), then the profile shares."""
    head = ["statistic", *labels, *(["published (paper)"] if published else [])]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for title, key in TABLE_ROWS:
        row = [title, *(_cell(r.get(key)) for r in reports)]
        if published:
            row.append(_cell(PUBLISHED.get(key)))
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "| profile field | value | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for name in (*CATEGORICAL_FIELDS, "Occupation"):
        values = list(dict.fromkeys(v for r in reports for v in r["profile_distributions"][name]))
        for value in values:
            shares = [f"{r['profile_distributions'][name].get(value, 0.0):.1%}" for r in reports]
            lines.append(f"| {name} | {value or '(empty)'} | " + " | ".join(shares) + " |")
    return "\n".join(lines)


def _grouped_bars(axis: Any, groups: list[str], series: list[list[float]], labels: list[str], title: str) -> None:
    width = 0.8 / max(1, len(series))
    for i, (values, label) in enumerate(zip(series, labels)):
        axis.bar([g + i * width - 0.4 + width / 2 for g in range(len(groups))], values, width, label=label)
    axis.set_xticks(range(len(groups)))
    axis.set_xticklabels(groups, rotation=30, ha="right", fontsize=7)
    axis.set_title(title, fontsize=9)


def plot_statistics(reports: list[dict[str, Any]], labels: list[str]) -> bytes:
    """Figures 3-4 in one PNG: behaviours per user, instruction lengths and task mix, and
    the shares of each profile field's values; one colour per data directory."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(13, 10), dpi=90, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(3, 3)
    for report, label in zip(reports, labels):
        axes[0][0].hist(report["series"]["behaviours_per_user"], bins=30, histtype="step", density=True, label=label)
    axes[0][0].set_title("behaviours per user (density)", fontsize=9)
    _grouped_bars(axes[0][1], list(TASK_TYPES), [[r[f"test_{k}_tokens"] for k in TASK_TYPES] for r in reports], labels,
                  "tokens per test instruction")
    _grouped_bars(axes[0][2], [f"{s} {k}" for s in ("train", "test") for k in TASK_TYPES],
                  [[r[f"{s}_{k}"] / max(1, r[f"{s}_tasks"]) for s in ("train", "test") for k in TASK_TYPES]
                   for r in reports], labels, "share of instructions by type")
    fields = ("Gender", "Age", "Occupation", *LEVEL_FIELDS)
    for axis, name in zip([axes[1][0], axes[1][1], axes[1][2], *axes[2]], fields):
        values = list(dict.fromkeys(v for r in reports for v in r["profile_distributions"][name]))
        if name in LEVEL_FIELDS:
            levels = ("Low", "Medium", "High")
            values = sorted(values, key=lambda v: levels.index(v) if v in levels else 3)
        elif name == "Age":
            values = sorted(values)
        _grouped_bars(axis, values, [[r["profile_distributions"][name].get(v, 0.0) for v in values] for r in reports],
                      labels, f"profile: {name} (share)")
    axes[0][0].legend(fontsize=7)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def format_summary(report: dict[str, Any]) -> str:
    return (f"{report['source']}: {report['users']:,} users, {report['behaviours']:,} behaviours "
            f"({report['behaviours_per_user']:.1f} per user), {report['products']:,} products "
            f"({report['tokens_per_product']:.0f} tokens each), {report['train_tasks']:,} train / "
            f"{report['test_tasks']:,} test instructions")
