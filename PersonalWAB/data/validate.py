"""`python -m PersonalWAB.data validate`: load a data folder as a run would and say what it holds."""

from __future__ import annotations

from dataclasses import dataclass

from PersonalWAB.settings import parse, setting


@dataclass
class ValidateSettings:
    """The flags of `python -m PersonalWAB.data validate`."""

    data_dir: str = setting(str, "data folder to check (official, synthetic or constructed)", required=True,
                            metavar="DIR")


def main(argv: list[str] | None = None) -> int:
    from PersonalWAB.data.loader import load_benchmark_data

    args = parse(ValidateSettings, argv, description=__doc__)
    data = load_benchmark_data(args.data_dir)
    counts = {split: len(tasks) for split, tasks in data.tasks.items()}
    origin = data.source
    if origin == "custom":  # no manifest, and not the release either: say why not
        origin = f"custom: unknown origin, not the official data because {data.not_official_because()}"
    print(
        f"{data.data_dir}: valid ({origin}); {len(data.profiles)} users, "
        f"{sum(len(b) for b in data.histories.values())} behaviours, {len(data.products)} products, "
        f"tasks {counts}"
    )
    for warning in data.warnings:
        print(f"warning: {warning}")
    return 0
