"""The release's own training scripts (`PUMA/finetune_llama.py`, `PUMA/dpo_llama.py`), run whole
by the release worker with a `TrainingProbe` (devtools/parity/release/training_probe.py) on the trainer they
build. Nothing of the scripts is rewritten; two hooks are installed before they run:

* `transformers.TrainingArguments.__post_init__` (which TRL's `DPOConfig` calls too) reports to
  nothing and loads data in the main process (`report_to` "wandb" would need a wandb account;
  `dataloader_num_workers` 10 forks workers that compute the same batches): these two settings
  change no number the trainer computes, and the observation lists them;
* `transformers.Trainer.train` attaches the probe first: the initial adapter weights go into the
  PEFT model the script (or TRL's trainer, from its `peft_config`) made, and every optimizer step
  is recorded; when training ends the observation is written to OUT.

Loaded by path by the release worker (worker.py), which puts the libraries of the release's time first on
sys.path; imports nothing from this project.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from collections.abc import Callable
from typing import Any

SCRIPTS = {"sft_train": "PUMA/finetune_llama.py", "dpo_train": "PUMA/dpo_llama.py"}
ARGUMENT_OVERRIDES = {"report_to": "none", "dataloader_num_workers": 0}


def probe_module() -> Any:
    spec = importlib.util.spec_from_file_location("training_probe", Path(__file__).with_name("training_probe.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def train(command: str, run_script: Callable[..., None], mirror: Path, cwd: Path, argv: list[str],
          initial_adapter: Path, out: Path) -> None:
    """Run the release's script for `command` with the probe; the observation goes to `out`."""
    import transformers

    probes = probe_module()
    probe = probes.TrainingProbe(input_key="input_ids" if command == "sft_train" else None,
                                 rewards=command == "dpo_train")
    post_init, fit = transformers.TrainingArguments.__post_init__, transformers.Trainer.train

    def overridden_post_init(self: Any) -> None:
        for name, value in ARGUMENT_OVERRIDES.items():
            setattr(self, name, value)
        post_init(self)

    def probed_train(self: Any, *args: Any, **kwargs: Any) -> Any:
        probe.attach(self, initial_adapter)
        result = fit(self, *args, **kwargs)
        out.write_text(json.dumps({**probe.observation(self), "argument_overrides": ARGUMENT_OVERRIDES}),
                       encoding="utf-8")
        return result

    transformers.TrainingArguments.__post_init__ = overridden_post_init
    transformers.Trainer.train = probed_train
    run_script(mirror, cwd, SCRIPTS[command], argv, None)
    if not out.exists():
        raise SystemExit(f"release worker: {SCRIPTS[command]} ended without training (no observation in {out})")
