"""What a training step shows while it trains (`PUMA.train_progress`): SFT's and DPO's loss lines,
and the loss history their records keep."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest


LOSS_LINE = r"^{step} step 1/(\d+) \(\d+%\), epoch \d+\.\d\d: loss \d+\.\d{{4}}, lr \d\.\d\de[-+]\d\d"


@pytest.mark.slow
def test_sft_and_dpo_show_their_loss_and_keep_its_history(tiny_data, tiny_model_dir: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture):
    from PUMA.data import function_examples
    from PUMA.dpo import DPOStepConfig, train_dpo
    from PUMA.modeling import write_json
    from PUMA.sft import SFTConfig, train_sft
    from PersonalWAB.protocol import load_protocol

    examples = function_examples(load_protocol(), tiny_data.split("train")[:4], "train")
    write_json(tmp_path / "function_train.json", examples)
    sft = train_sft(SFTConfig(model_path=str(tiny_model_dir), train_on="function",
                              function_data=str(tmp_path / "function_train.json"), output_dir=str(tmp_path / "sft"),
                              num_train_epochs=2, per_device_train_batch_size=2, gradient_accumulation_steps=1,
                              max_length=96, save_strategy="no", logging_steps=2))
    out = capsys.readouterr().out
    total = int(re.search(LOSS_LINE.format(step="sft"), out, re.MULTILINE).group(1))
    history = json.loads((sft / "puma_run.json").read_text())["loss_history"]
    assert [entry["step"] for entry in history] == [1, *range(2, total + 1, 2)]  # the first step, then every 2nd
    assert re.search(rf"^sft: {total} optimizer steps in \d+ s, mean training loss \d+\.\d{{4}}$", out, re.MULTILINE)
    assert "{'loss'" not in out  # no raw log dicts

    pairs = [{"prompt": e["prompt"], "chosen": e["label"], "rejected": "add_product_review"} for e in examples]
    write_json(tmp_path / "dpo.json", pairs)
    dpo = train_dpo(DPOStepConfig(model_path=str(tiny_model_dir), data_file=str(tmp_path / "dpo.json"),
                                  output_dir=str(tmp_path / "dpo"), num_train_epochs=1, per_device_train_batch_size=2,
                                  gradient_accumulation_steps=1, max_length=96, max_prompt_length=64,
                                  save_strategy="no", logging_steps=1))
    out = capsys.readouterr().out
    assert re.search(LOSS_LINE.format(step="dpo") + r", reward acc \d\.\d{4}, margin -?\d+\.\d{4}$", out, re.MULTILINE)
    assert json.loads((dpo / "puma_run.json").read_text())["loss_history"][0]["step"] == 1
