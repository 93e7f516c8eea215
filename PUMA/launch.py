"""How a training step starts on the GPUs there are: the launcher, the precision and DeepSpeed.

    python -m PUMA.launch STEP [-- STEP_ARGS...]     # STEP: sft | dpo | grpo (PUMA/scripts/*.sh)

runs `python -m PUMA.<STEP> <precision and DeepSpeed flags> STEP_ARGS` through the launcher
the GPUs call for, after one line on stderr (`PUMA launch: recipe ..., N GPU(s), ...`). Run it
from the repository root: the config paths it passes are relative to it. The environment decides:

- RECIPE: release (default) or improved (PUMA/recipe.py); anything else stops with status 2.
- GPUs: those in GPUS (which becomes the step's CUDA_VISIBLE_DEVICES) or CUDA_VISIBLE_DEVICES when
  set, else every GPU `nvidia-smi -L` lists (none without it).
- PRECISION=bf16|fp16|fp32: the step's --bf16 / --fp16 / neither; the default is the recipe's GPU
  training precision (`gpu_train_dtype`: release fp16, improved bf16), fp32 without a GPU.
- DEEPSPEED=release|zero2|zero3|none: `release` is PUMA/configs/deepspeed_zero2_release.json (the
  release's ZeRO-2 fp16 settings), zero2/zero3 PUMA/configs/deepspeed_<stage>.json. The default is
  `release` for sft and dpo on GPUs under a recipe whose `release_launch` switch is on (release),
  else none; that default without the
  deepspeed package installed stops with status 3 (DEEPSPEED=none trains with AMP fp16 instead,
  and the step records it as a departure from the release).
- PUMA_PYTHON: the Python that runs the step (default: this one).

Launcher: torchrun on N processes with DeepSpeed on GPUs (DeepSpeed needs the rank variables even
for one process, as the release's `deepspeed` launcher set them), else accelerate on 1..N GPUs
(PUMA/configs/accelerate_{single,multi}_gpu.yaml), plain Python without a GPU. The batch is the
step's own (python -m PUMA.sft --help).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from collections.abc import Callable, Mapping, Sequence

from PersonalWAB.settings import parse, setting
from PUMA.recipe import RECIPES, get_recipe

STEPS = {"sft": "PUMA.sft", "dpo": "PUMA.dpo", "grpo": "PUMA.grpo"}
DEEPSPEED_STEPS = ("sft", "dpo")  # the steps the release trained under DeepSpeed
PRECISION_FLAGS = {"bf16": ("--bf16",), "fp16": ("--fp16",), "fp32": ()}
TORCH_DTYPE_PRECISION = {"float16": "fp16", "bfloat16": "bf16"}  # a recipe's gpu_train_dtype as PRECISION
DEEPSPEED_CONFIGS = {"release": "PUMA/configs/deepspeed_zero2_release.json",
                     "zero2": "PUMA/configs/deepspeed_zero2.json", "zero3": "PUMA/configs/deepspeed_zero3.json",
                     "none": None}
ACCELERATE_CONFIGS = {"single": "PUMA/configs/accelerate_single_gpu.yaml",
                      "multi": "PUMA/configs/accelerate_multi_gpu.yaml"}
MISSING_DEEPSPEED = ("RECIPE=release trains as the release did, with DeepSpeed ZeRO-2 in fp16, and the deepspeed "
                     "package is not installed: pip install -r requirements-gpu.txt, or set DEEPSPEED=none to train "
                     "with AMP fp16 instead (the step's record then lists it as a departure from the release)")


@dataclass
class LaunchSettings:
    """`python -m PUMA.launch`'s own settings (the step's come after `--`)."""

    step: str = setting("sft", "the training step to start", positional=True, choices=tuple(STEPS))


class LaunchError(Exception):
    """A launch that cannot go ahead; `status` is the exit status the scripts give."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class LaunchPlan:
    """What starts a step: the launcher, the flags every step gets, the variables it adds."""

    recipe: str
    gpus: int
    launcher: tuple[str, ...]  # the Python, with torchrun's or accelerate's arguments
    train_args: tuple[str, ...]  # precision and DeepSpeed flags
    env: dict[str, str] = field(default_factory=dict)  # set for the step (CUDA_VISIBLE_DEVICES from GPUS)

    def command(self, module: str, args: Sequence[str] = ()) -> list[str]:
        """The step's command line; its own `args` come last, so a flag there overrides the plan's."""
        return [*self.launcher, "-m", module, *self.train_args, *args]

    def summary(self) -> str:
        return (f"PUMA launch: recipe {self.recipe}, {self.gpus} GPU(s), {' '.join(self.launcher[:3])}... "
                f"{' '.join(self.train_args) or 'fp32'}")


def count_gpus(env: Mapping[str, str]) -> int:
    """The GPUs in GPUS, else in CUDA_VISIBLE_DEVICES when it is set (even empty), else every GPU
    that `nvidia-smi -L` (found on env's PATH) lists."""
    visible = env["GPUS"] if env.get("GPUS") else env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return sum(1 for device in visible.split(",") if device)
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if smi is None:
        return 0
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True).stdout
    except OSError:
        return 0
    return sum(1 for line in listed.splitlines() if line.startswith("GPU"))


def deepspeed_installed(python: str) -> bool:
    """Whether `python` (the step's interpreter, perhaps not this one) can import deepspeed."""
    check = 'import importlib.util, sys; sys.exit(importlib.util.find_spec("deepspeed") is None)'
    try:
        found = subprocess.run([python, "-c", check], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return found.returncode == 0
    except OSError:
        return False


def plan_launch(step: str, env: Mapping[str, str], gpus: int | None = None,
                has_deepspeed: Callable[[str], bool] = deepspeed_installed) -> LaunchPlan:
    """The launch of `step` under `env` (RECIPE, GPUS, CUDA_VISIBLE_DEVICES, PRECISION, DEEPSPEED,
    PUMA_PYTHON) on `gpus` GPUs (default: `count_gpus(env)`); `has_deepspeed(python)` is asked
    only when the release's DeepSpeed default applies."""
    recipe = env.get("RECIPE") or "release"
    if recipe not in RECIPES:
        raise LaunchError(f"RECIPE={recipe}: expected {' or '.join(RECIPES)}", 2)
    n = count_gpus(env) if gpus is None else gpus
    python = env.get("PUMA_PYTHON") or sys.executable
    precision = env.get("PRECISION") or (TORCH_DTYPE_PRECISION[get_recipe(recipe).gpu_train_dtype] if n else "fp32")
    if precision not in PRECISION_FLAGS:
        raise LaunchError(f"PRECISION={precision}: expected bf16, fp16 or fp32", 2)
    default_deepspeed = "release" if get_recipe(recipe).release_launch and n and step in DEEPSPEED_STEPS else "none"
    deepspeed = env.get("DEEPSPEED") or default_deepspeed
    if deepspeed not in DEEPSPEED_CONFIGS:
        raise LaunchError(f"DEEPSPEED={deepspeed}: expected release, zero2, zero3 or none", 2)
    if not env.get("DEEPSPEED") and deepspeed == "release" and not has_deepspeed(python):
        raise LaunchError(MISSING_DEEPSPEED, 3)
    config = DEEPSPEED_CONFIGS[deepspeed]
    train_args = PRECISION_FLAGS[precision] + (("--deepspeed", config) if config else ())
    launcher: tuple[str, ...]
    if n and config:
        launcher = (python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n))
    elif n:
        launcher = (python, "-m", "accelerate.commands.launch", "--config_file",
                    ACCELERATE_CONFIGS["multi" if n > 1 else "single"], "--num_processes", str(n))
    else:
        launcher = (python,)
    return LaunchPlan(recipe, n, launcher, train_args, {"CUDA_VISIBLE_DEVICES": env["GPUS"]} if env.get("GPUS") else {})


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    own, step_args = (args[:args.index("--")], args[args.index("--") + 1:]) if "--" in args else (args, [])
    step = parse(LaunchSettings, own, prog="python -m PUMA.launch STEP [-- STEP_ARGS...]",
                 description=__doc__).step
    try:
        plan = plan_launch(step, os.environ)
    except LaunchError as exc:
        print(exc, file=sys.stderr)
        return exc.status
    print(plan.summary(), file=sys.stderr, flush=True)
    command = plan.command(STEPS[step], step_args)
    os.execvpe(command[0], command, {**os.environ, **plan.env})


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
