"""Step 5: DPO pairs from scored parameter candidates.

Per instruction: chosen = the best-scoring candidate, rejected = the worst (the
first such candidate in the generated order on ties); instructions whose
candidates all score the same (or that have fewer than two) are skipped. The
prompt is the instruction's parameter prompt from the SFT parameter data.
Output: JSON list of {prompt, chosen, rejected, instruction, chosen_score, rejected_score}.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable


@dataclass
class DPODataConfig:
    scores_file: str = "PUMA/output/param_candidates_train_scores.json"
    param_data: str = "PUMA/data/param_train.json"
    output_file: str = "PUMA/data/dpo_train.json"


def make_pairs(scores: dict[str, dict[str, float]], prompts: dict[str, str]) -> list[dict[str, Any]]:
    pairs = []
    for instruction, scored in scores.items():
        if instruction not in prompts or len(scored) < 2:
            continue
        best = max(scored, key=lambda c: scored[c])
        worst = min(scored, key=lambda c: scored[c])
        if scored[best] == scored[worst]:
            continue
        pairs.append({"prompt": prompts[instruction], "chosen": best, "rejected": worst, "instruction": instruction,
                      "chosen_score": scored[best], "rejected_score": scored[worst]})
    return pairs


def build_dpo_data(config: DPODataConfig, log: Callable[[str], None] = print) -> Path:
    from PUMA.modeling import read_json, write_json

    scores = read_json(config.scores_file)
    prompts = {e["instruction"]: e["prompt"] for e in read_json(config.param_data)}
    pairs = make_pairs(scores, prompts)
    path = write_json(config.output_file, pairs)
    log(f"{path}: {len(pairs)} preference pairs from {len(scores)} scored instructions")
    return path


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_config

    build_dpo_data(parse_config(DPODataConfig, argv, "python -m PUMA.dpo_data", __doc__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
