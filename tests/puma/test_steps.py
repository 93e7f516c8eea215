"""The steps table (PUMA/steps.py) is where a step is described: a new step is its module plus one
row, and the CLI, `puma run` (its stage, section and files), the launcher and the lineage check
take it from there. Shown on a copy of the package with a step added as a user would add it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

STEP_MODULE = '''"""A step of one's own: count the pairs of a DPO data file (launched like a training step)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from PersonalWAB.settings import setting
from PUMA.lora import LoRATrainingConfig


@dataclass
class CountConfig(LoRATrainingConfig):
    data_file: str = setting("dpo_train.json", "step 5's preference pairs")
    output_dir: str = setting("count", "folder for count.json and its record", flag="out", metavar="DIR")
    max_length: int = setting(1024, "the length step 5 fitted the pairs to")


def count_pairs(config: CountConfig) -> Path:
    from PUMA.lineage import check_carried
    from PUMA.recipe import check_inputs, get_recipe, write_record

    recipe, inputs = get_recipe(config.recipe), {"--data_file": config.data_file}
    check_inputs(recipe, inputs)
    check_carried("count", config, inputs)
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    pairs = len(json.loads(Path(config.data_file).read_text(encoding="utf-8")))
    (out / "count.json").write_text(json.dumps({"pairs": pairs}), encoding="utf-8")
    write_record(out, "count", recipe, config, inputs, pairs=pairs)
    return out


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_step

    count_pairs(parse_step(CountConfig, argv, "python -m PUMA.count_pairs", __doc__, "count"))
    return 0


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
'''
STEP_ROW = '''    Step("count", "PUMA.count_pairs", "CountConfig", "count_pairs", "count the DPO pairs (own step)",
         launched=True, carried=(Carried("count", "--data_file", "max_length", True,
                                         "step 5 fitted the pairs to that length"),),
         calls=(Call(8, "count", reads={"data_file": "dpo_train.json"}, writes={"output_dir": "count"}),)),
'''


@pytest.fixture()
def package_with_a_new_step(tmp_path: Path) -> Path:
    """A copy of the repository's PUMA package with `PUMA/count_pairs.py` and its row in the steps table."""
    root = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "PUMA", root / "PUMA", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "PUMA" / "count_pairs.py").write_text(STEP_MODULE, encoding="utf-8")
    table = root / "PUMA" / "steps.py"
    text = table.read_text(encoding="utf-8")
    end = text.index(")\n# The puma agent's settings")
    table.write_text(text[:end] + STEP_ROW + text[end:], encoding="utf-8")
    return root


def _puma(root: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RECIPE", "GPUS", "DEEPSPEED", "PRECISION", "WORLD_SIZE")}
    return subprocess.run([sys.executable, "-m", "PUMA", *argv], cwd=root, capture_output=True, text=True,
                          env={**env, "CUDA_VISIBLE_DEVICES": "", "PUMA_PYTHON": sys.executable}, timeout=300)


def test_a_new_step_is_its_module_and_one_row(package_with_a_new_step: Path, tmp_path: Path):
    from PUMA.recipe import get_recipe, write_record

    root, work = package_with_a_new_step, tmp_path / "work"
    work.mkdir()
    pairs = work / "dpo_train.json"
    pairs.write_text(json.dumps([{"prompt": "p", "chosen": "a", "rejected": "b"}] * 3), encoding="utf-8")
    write_record(pairs, "dpo_data", get_recipe("release"), {"max_length": 416})
    # the CLI lists it and shows its flags
    listed = _puma(root, "--help")
    assert listed.returncode == 0 and "count the DPO pairs" in listed.stdout
    assert "--max_length" in _puma(root, "count", "--help").stdout
    assert "8 count" in " ".join(_puma(root, "run", "--help").stdout.split())  # puma run's --steps
    # puma run: its stage and section from the row, its input from the work folder, the setting its input's
    # record says it must share wired in, started through the launcher
    config = tmp_path / "run.yaml"
    config.write_text(f"work_dir: {work}\ncount: {{logging_steps: 5}}\n", encoding="utf-8")
    done = _puma(root, "run", "--config", str(config), "--steps", "8")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "PUMA launch: recipe release, 0 GPU(s)" in done.stderr
    assert json.loads((work / "count" / "count.json").read_text()) == {"pairs": 3}
    record = json.loads((work / "count" / "puma_run.json").read_text())
    assert record["step"] == "count" and record["settings"]["max_length"] == 416
    assert record["settings"]["logging_steps"] == 5 and record["inputs"] == {"--data_file": str(pairs)}
    # the lineage check: a section that contradicts the input's record is refused by the step
    config.write_text(f"work_dir: {work}\ncount: {{max_length: 1024}}\n", encoding="utf-8")
    refused = _puma(root, "run", "--config", str(config), "--steps", "8")
    assert refused.returncode == 2
    assert "--max_length 1024: --data_file" in refused.stderr and "was made with --max_length 416" in refused.stderr
    # and the repository's own package is untouched: no such step there
    assert _puma(REPO_ROOT, "count", "--help").returncode == 2
