"""What a training step (SFT, DPO, GRPO) shows while it trains: one readable line per logged
optimizer step (step of total, epoch, loss, learning rate, and the step's own measure such as
DPO's reward accuracy), the first step included, and a closing line; the same numbers are kept
as the loss history that the step's record stores. It replaces the trainer's print of each
step's raw log dict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# What each step adds to its line: the trainer's log key -> the line's label.
SHOWN: dict[str, dict[str, str]] = {
    "dpo": {"rewards/accuracies": "reward acc", "rewards/margins": "margin"},
    "grpo": {"reward": "reward"},
}


class TrainingProgress:
    """Console lines and loss history of one training run; `attach` puts it on a trainer."""

    def __init__(self, step: str, log: Callable[[str], None] = print):
        self.step = step
        self.log = log
        self.history: list[dict[str, Any]] = []

    @classmethod
    def attach(cls, trainer: Any, step: str, log: Callable[[str], None] = print) -> TrainingProgress:
        """The progress of `trainer`'s run, in place of its printer of raw log dicts."""
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        progress = cls(step, log)
        trainer.remove_callback(PrinterCallback)
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(progress.callback())
        return progress

    def callback(self) -> Any:
        from transformers import TrainerCallback

        outer = self

        class _Callback(TrainerCallback):
            def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                if state.is_world_process_zero:
                    outer.log(f"{outer.step}: training for {state.max_steps} optimizer steps, a line every "
                              f"{args.logging_steps:g} step(s)")

            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
                if state.global_step == 1:  # the first step's loss at once, not after `logging_steps`
                    control.should_log = True
                return control

            def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
                if state.is_world_process_zero:
                    outer.record(state.global_step, state.max_steps, logs or {})

        return _Callback()

    def record(self, step: int, total: int, logs: dict[str, Any]) -> None:
        """Keep and show one log of the trainer (a step's, or the run's closing summary)."""
        if "loss" in logs:
            entry = {"step": step, "epoch": round(float(logs.get("epoch", 0.0)), 4), "loss": float(logs["loss"]),
                     "learning_rate": float(logs.get("learning_rate", 0.0))}
            shown = {label: float(logs[key]) for key, label in SHOWN.get(self.step, {}).items() if key in logs}
            self.history.append({**entry, **shown})
            extra = "".join(f", {label} {value:.4f}" for label, value in shown.items())
            self.log(f"{self.step} step {step}/{total} ({step / max(total, 1):.0%}), epoch {entry['epoch']:.2f}: "
                     f"loss {entry['loss']:.4f}, lr {entry['learning_rate']:.2e}{extra}")
        elif "train_loss" in logs:
            self.log(f"{self.step}: {step} optimizer steps in {float(logs.get('train_runtime', 0.0)):.0f} s, "
                     f"mean training loss {float(logs['train_loss']):.4f}")
