"""How a training step starts on the GPUs there are (or N CPU processes, or several nodes): the
launcher, the precision, DeepSpeed or FSDP.

    python -m PUMA.launch STEP [-- STEP_ARGS...]     # STEP: sft | dpo | grpo (PUMA/scripts/*.sh)

runs `python -m PUMA.<STEP> <precision and DeepSpeed flags> STEP_ARGS` through the launcher
the GPUs call for, after one line on stderr (`PUMA launch: recipe ..., N GPU(s), ...`). Run it
from the repository root: the config paths it passes are relative to it. The environment decides:

- RECIPE: release (default), improved or a recipe file (PUMA/recipe.py), when the step's own
  settings do not say (`python -m PUMA.launch` reads the step's `--recipe`, `--gpu_dtype` and
  `--gpu_launch`); anything else stops with status 2.
- GPUs: those in GPUS (which becomes the step's CUDA_VISIBLE_DEVICES) or CUDA_VISIBLE_DEVICES when
  set, else every GPU `nvidia-smi -L` lists (none without it).
- PRECISION=bf16|fp16|fp32: the step's --bf16 / --fp16 / neither; the default is the step's
  `--gpu_dtype` (release fp16, improved bf16) on a GPU, fp32 without one.
- DEEPSPEED=release|zero2|zero3|none: `release` is PUMA/configs/deepspeed_zero2_release.json (the
  release's ZeRO-2 fp16 settings), zero2/zero3 PUMA/configs/deepspeed_<stage>.json. The default is
  `release` for sft and dpo on GPUs when the step's `--gpu_launch` is deepspeed_zero2 (the release
  recipe's), else none; that default without the
  deepspeed package installed stops with status 3 (DEEPSPEED=none trains with AMP fp16 instead,
  and the step records it as a departure from the release).
- FSDP=fsdp2|none: `fsdp2` shards the model, gradients and optimizer state over the processes with
  PyTorch's FSDP2 through accelerate (PUMA/configs/accelerate_fsdp2.yaml), for a model that does not
  fit one GPU; it takes the place of the DeepSpeed default and refuses a DeepSpeed config (DeepSpeed's
  own sharding is DEEPSPEED=zero3). GPUs only: accelerate enables FSDP for GPU processes, not CPU ones.
- CPU_PROCESSES=N: N processes on the CPU (the gloo backend, the GPUs hidden) through the launcher
  the GPUs take, to check the distributed path on any machine; in place of the GPUs.
- NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT: a run over NNODES machines, started once on each with
  its NODE_RANK (0 .. NNODES-1) and the same MASTER_ADDR (node 0's address, needed) and MASTER_PORT
  (default 29500), each with the same number of processes; the launcher's static rendezvous (torchrun's
  --nnodes/--node_rank, accelerate's --num_machines/--machine_rank). MASTER_ADDR or MASTER_PORT on one
  node fixes the address and port the processes meet on (default: torchrun's free port, accelerate's
  29500).
- PUMA_PYTHON: the Python that runs the step (default: this one).

Launcher: torchrun with DeepSpeed (DeepSpeed needs the rank variables even for one process, as the
release's `deepspeed` launcher set them), else accelerate (PUMA/configs/accelerate_{single,multi}_gpu.yaml
by the processes over all nodes, accelerate_fsdp2.yaml under FSDP), plain Python without a GPU or
CPU_PROCESSES. The batch is the step's own (python -m PUMA.sft --help): under `--recipe release` 64
examples per optimizer step on any processes x nodes; a global batch the processes do not divide
is refused (status 2) before any starts. docs/scaling.md has a two-node example.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from PersonalWAB.settings import parse, setting
from PUMA.recipe import get_recipe
from PUMA.steps import LAUNCHED, get_step

PRECISION_FLAGS = {"bf16": ("--bf16",), "fp16": ("--fp16",), "fp32": ()}
TORCH_DTYPE_PRECISION = {"float16": "fp16", "bfloat16": "bf16"}  # a step's --gpu_dtype as PRECISION
DEEPSPEED_CONFIGS = {"release": "PUMA/configs/deepspeed_zero2_release.json",
                     "zero2": "PUMA/configs/deepspeed_zero2.json", "zero3": "PUMA/configs/deepspeed_zero3.json",
                     "none": None}
ACCELERATE_CONFIGS = {"single": "PUMA/configs/accelerate_single_gpu.yaml",
                      "multi": "PUMA/configs/accelerate_multi_gpu.yaml",
                      "fsdp2": "PUMA/configs/accelerate_fsdp2.yaml"}
FSDP_CHOICES = ("fsdp2", "none")
DEFAULT_MASTER_PORT = "29500"
# What a CPU process run sets for the step: no GPU visible, and accelerate's CPU state (gloo)
CPU_ENV = {"CUDA_VISIBLE_DEVICES": "", "ACCELERATE_USE_CPU": "true"}
MISSING_DEEPSPEED = ("RECIPE=release trains as the release did, with DeepSpeed ZeRO-2 in fp16, and the deepspeed "
                     "package is not installed: pip install -r requirements-gpu.txt, or set DEEPSPEED=none to train "
                     "with AMP fp16 instead (the step's record then lists it as a departure from the release)")


@dataclass
class LaunchSettings:
    """`python -m PUMA.launch`'s own settings (the step's come after `--`)."""

    step: str = setting("sft", "the training step to start", positional=True, choices=LAUNCHED)


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
    cpu_processes: int = 0  # CPU_PROCESSES: processes on the CPU in place of the GPUs
    nodes: int = 1

    def command(self, module: str, args: Sequence[str] = ()) -> list[str]:
        """The step's command line; its own `args` come last, so a flag there overrides the plan's."""
        return [*self.launcher, "-m", module, *self.train_args, *args]

    @property
    def world_size(self) -> int:
        """The processes of the run over all its nodes."""
        return (self.cpu_processes or self.gpus or 1) * self.nodes

    def summary(self) -> str:
        devices = f"{self.cpu_processes} CPU process(es)" if self.cpu_processes else f"{self.gpus} GPU(s)"
        nodes = f" on each of {self.nodes} nodes" if self.nodes > 1 else ""
        return (f"PUMA launch: recipe {self.recipe}, {devices}{nodes}, {' '.join(self.launcher[:3])}... "
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


def whole_number(env: Mapping[str, str], name: str, default: int, least: int) -> int:
    """The environment variable `name` as a number of at least `least` (`default` when unset)."""
    value = (env.get(name) or "").strip()
    if not value:
        return default
    if not value.isdigit() or int(value) < least:
        raise LaunchError(f"{name}={value}: expected a whole number of at least {least}", 2)
    return int(value)


@dataclass(frozen=True)
class Rendezvous:
    """Where the processes of a run meet: NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT (all
    empty on one node unless an address or port is fixed)."""

    nodes: int
    node_rank: int
    address: str | None
    port: str | None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Rendezvous:
        nodes = whole_number(env, "NNODES", 1, 1)
        node_rank = whole_number(env, "NODE_RANK", 0, 0)
        if node_rank >= nodes:
            raise LaunchError(f"NODE_RANK={node_rank}: expected 0 .. NNODES-1 ({nodes - 1})", 2)
        address = env.get("MASTER_ADDR") or None
        if nodes > 1 and not address:
            raise LaunchError(f"NNODES={nodes}: set MASTER_ADDR to node 0's address (and the same MASTER_PORT on "
                              "every node)", 2)
        port = str(whole_number(env, "MASTER_PORT", 0, 1)) if env.get("MASTER_PORT") else None
        return cls(nodes, node_rank, address, port)

    @property
    def fixed(self) -> bool:
        return self.nodes > 1 or self.address is not None or self.port is not None

    def torchrun(self) -> tuple[str, ...]:
        if not self.fixed:
            return ("--standalone",)
        return ("--nnodes", str(self.nodes), "--node_rank", str(self.node_rank), "--master_addr",
                self.address or "127.0.0.1", "--master_port", self.port or DEFAULT_MASTER_PORT)

    def accelerate(self) -> tuple[str, ...]:
        if not self.fixed:
            return ()
        return ("--num_machines", str(self.nodes), "--machine_rank", str(self.node_rank), "--main_process_ip",
                self.address or "127.0.0.1", "--main_process_port", self.port or DEFAULT_MASTER_PORT)


def plan_launch(step: str, env: Mapping[str, str], gpus: int | None = None,
                has_deepspeed: Callable[[str], bool] = deepspeed_installed, settings: Any = None) -> LaunchPlan:
    """The launch of `step` under `env` (RECIPE, GPUS, CUDA_VISIBLE_DEVICES, PRECISION, DEEPSPEED,
    FSDP, CPU_PROCESSES, NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT, PUMA_PYTHON) on `gpus` GPUs
    (default: `count_gpus(env)`), with the step's `settings` (their recipe, gpu_dtype and
    gpu_launch; default: RECIPE's values for the step); `has_deepspeed(python)` is asked only
    when the release's DeepSpeed default applies."""
    try:
        recipe = get_recipe(settings.recipe if settings is not None else env.get("RECIPE") or "release")
    except ValueError as error:
        raise LaunchError(f"RECIPE={env.get('RECIPE')}: {error}" if settings is None else str(error), 2) from error
    gpu_dtype = settings.gpu_dtype if settings is not None else recipe.value(step, "gpu_dtype")
    gpu_launch = settings.gpu_launch if settings is not None else recipe.value(step, "gpu_launch")
    cpu_processes = whole_number(env, "CPU_PROCESSES", 0, 1)
    rendezvous = Rendezvous.from_env(env)
    n = 0 if cpu_processes else count_gpus(env) if gpus is None else gpus
    if rendezvous.nodes > 1 and not (n or cpu_processes):
        raise LaunchError(f"NNODES={rendezvous.nodes}: no GPU here; set CPU_PROCESSES to check on the CPU", 2)
    python = env.get("PUMA_PYTHON") or sys.executable
    precision = env.get("PRECISION") or (TORCH_DTYPE_PRECISION[gpu_dtype] if n else "fp32")
    if precision not in PRECISION_FLAGS:
        raise LaunchError(f"PRECISION={precision}: expected bf16, fp16 or fp32", 2)
    fsdp = env.get("FSDP") or "none"
    if fsdp not in FSDP_CHOICES:
        raise LaunchError(f"FSDP={fsdp}: expected fsdp2 or none", 2)
    release_default = gpu_launch == "deepspeed_zero2" and n and get_step(step).release_deepspeed and fsdp == "none"
    default_deepspeed = "release" if release_default else "none"
    deepspeed = env.get("DEEPSPEED") or default_deepspeed
    if deepspeed not in DEEPSPEED_CONFIGS:
        raise LaunchError(f"DEEPSPEED={deepspeed}: expected release, zero2, zero3 or none", 2)
    if not env.get("DEEPSPEED") and deepspeed == "release" and not has_deepspeed(python):
        raise LaunchError(MISSING_DEEPSPEED, 3)
    config = DEEPSPEED_CONFIGS[deepspeed]
    if fsdp != "none" and config:
        raise LaunchError(f"FSDP={fsdp} with DEEPSPEED={deepspeed}: choose one (DEEPSPEED=none, or FSDP=none; "
                          "DEEPSPEED=zero3 is DeepSpeed's sharding)", 2)
    if fsdp != "none" and not n:
        raise LaunchError(f"FSDP={fsdp}: FSDP shards over GPUs (accelerate enables it for GPU processes only, so "
                          "not without a GPU nor with CPU_PROCESSES)", 2)
    if cpu_processes and config:
        raise LaunchError(f"CPU_PROCESSES={cpu_processes} with DEEPSPEED={deepspeed}: DeepSpeed trains on GPUs; "
                          "set DEEPSPEED=none on the CPU", 2)
    train_args = PRECISION_FLAGS[precision] + (("--deepspeed", config) if config else ())
    per_node = cpu_processes or n
    launcher: tuple[str, ...]
    if per_node and config:
        launcher = (python, "-m", "torch.distributed.run", *rendezvous.torchrun(), "--nproc_per_node", str(per_node))
    elif per_node:
        total = per_node * rendezvous.nodes  # accelerate counts the processes of every node
        name = "fsdp2" if fsdp != "none" else "multi" if total > 1 else "single"
        launcher = (python, "-m", "accelerate.commands.launch", "--config_file", ACCELERATE_CONFIGS[name],
                    "--num_processes", str(total), *rendezvous.accelerate())
    else:
        launcher = (python,)
    step_env = dict(CPU_ENV) if cpu_processes else {"CUDA_VISIBLE_DEVICES": env["GPUS"]} if env.get("GPUS") else {}
    return LaunchPlan(recipe.name, n, launcher, train_args, step_env, cpu_processes, rendezvous.nodes)


def step_settings(step: str, step_args: Sequence[str]) -> Any:
    """The step's settings from its arguments, refused before any process starts (each would
    refuse them on its own, in a launcher's traceback): a bad setting or output (DataError)."""
    from PUMA.cli import parse_step

    row = get_step(step)
    return parse_step(row.settings_class(), step_args, f"python -m {row.module}", None, step)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    own, step_args = (args[:args.index("--")], args[args.index("--") + 1:]) if "--" in args else (args, [])
    step = parse(LaunchSettings, own, prog="python -m PUMA.launch STEP [-- STEP_ARGS...]",
                 description=__doc__).step
    settings = step_settings(step, step_args)
    try:
        plan = plan_launch(step, os.environ, settings=settings)
    except LaunchError as exc:
        print(exc, file=sys.stderr)
        return exc.status
    settings.batch_layout(plan.world_size)  # a global batch the processes do not divide: refused here
    print(plan.summary(), file=sys.stderr, flush=True)
    command = plan.command(get_step(step).module, step_args)
    os.execvpe(command[0], command, {**os.environ, **plan.env})


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
