"""How PUMA's training steps start (PUMA/launch.py) on 0, 1 or 4 GPUs under each recipe and
override, without a GPU: the environment and the GPU count are passed in; and the `puma` command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from PUMA.launch import CPU_ENV, LaunchError, LaunchPlan, count_gpus, main, plan_launch
from tests.conftest import REPO_ROOT

RELEASE_DS = ("--deepspeed", "PUMA/configs/deepspeed_zero2_release.json")
TORCHRUN = ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node")
ACCELERATE = ("-m", "accelerate.commands.launch", "--config_file")
LAUNCH_VARIABLES = ("CUDA_VISIBLE_DEVICES", "GPUS", "RECIPE", "DEEPSPEED", "PRECISION", "PUMA_PYTHON", "FSDP",
                    "CPU_PROCESSES", "NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")


def installed(python: str) -> bool:
    return True


def not_asked(python: str) -> bool:
    raise AssertionError("the deepspeed check runs only for the release's DeepSpeed default")


def plan(step: str, gpus: int, has_deepspeed=not_asked, **env: str) -> LaunchPlan:
    return plan_launch(step, {"PUMA_PYTHON": "py", **env}, gpus, has_deepspeed)


@pytest.mark.parametrize("step", ["sft", "dpo"])
def test_release_trains_sft_and_dpo_under_deepspeed_zero2_fp16_on_gpus(step: str):
    for gpus in (1, 4):
        p = plan(step, gpus, installed)
        assert p.launcher == ("py", *TORCHRUN, str(gpus)) and p.train_args == ("--fp16", *RELEASE_DS)
    assert plan(step, 4, installed).command(f"PUMA.{step}", ["--recipe", "release"]) == [
        "py", *TORCHRUN, "4", "-m", f"PUMA.{step}", "--fp16", *RELEASE_DS, "--recipe", "release"]
    asked = []
    with pytest.raises(LaunchError) as missing:
        plan(step, 4, lambda python: asked.append(python) and False)
    assert missing.value.status == 3 and asked == ["py"]
    assert "pip install -r requirements-gpu.txt" in str(missing.value) and "DEEPSPEED=none" in str(missing.value)
    # DEEPSPEED=none: AMP fp16 by choice (the step's record lists it); nothing asks for deepspeed
    p = plan(step, 4, DEEPSPEED="none")
    assert p.launcher == ("py", "-m", "accelerate.commands.launch", "--config_file",
                          "PUMA/configs/accelerate_multi_gpu.yaml", "--num_processes", "4")
    assert p.train_args == ("--fp16",)


def test_improved_other_steps_and_no_gpu_take_no_deepspeed():
    p = plan("sft", 1, RECIPE="improved")
    assert p.launcher == ("py", "-m", "accelerate.commands.launch", "--config_file",
                          "PUMA/configs/accelerate_single_gpu.yaml", "--num_processes", "1")
    assert p.train_args == ("--bf16",) and p.recipe == "improved"
    assert plan("dpo", 4, RECIPE="improved").train_args == ("--bf16",)
    p = plan("grpo", 4)  # the release trained only SFT and DPO under DeepSpeed
    assert "PUMA/configs/accelerate_multi_gpu.yaml" in p.launcher and p.train_args == ("--fp16",)
    for step in ("sft", "dpo", "grpo"):  # no GPU: plain Python in fp32
        p = plan(step, 0)
        assert p.launcher == ("py",) and p.train_args == () and p.gpus == 0
        assert p.summary() == "PUMA launch: recipe release, 0 GPU(s), py... fp32"


def test_precision_and_deepspeed_overrides():
    zero2 = plan("sft", 2, DEEPSPEED="zero2")
    assert zero2.train_args == ("--fp16", "--deepspeed", "PUMA/configs/deepspeed_zero2.json")
    p = plan("grpo", 2, RECIPE="improved", DEEPSPEED="zero3", PRECISION="fp32")
    assert p.launcher == ("py", *TORCHRUN, "2") and p.train_args == ("--deepspeed", "PUMA/configs/deepspeed_zero3.json")
    assert p.summary() == ("PUMA launch: recipe improved, 2 GPU(s), py -m torch.distributed.run... "
                           "--deepspeed PUMA/configs/deepspeed_zero3.json")
    assert plan("sft", 4, installed, PRECISION="bf16").train_args == ("--bf16", *RELEASE_DS)
    assert plan("sft", 0, PRECISION="fp16").train_args == ("--fp16",)
    assert plan("sft", 0, DEEPSPEED="release").launcher == ("py",)  # DeepSpeed's flag, but no GPU to run torchrun on
    assert plan("sft", 1, RECIPE="", PRECISION="", DEEPSPEED="", has_deepspeed=installed).recipe == "release"
    for env, message in ((dict(RECIPE="other"), "RECIPE=other: --recipe 'other': expected release, improved or a "
                                                "recipe file"),
                         (dict(PRECISION="half"), "PRECISION=half: expected bf16, fp16 or fp32"),
                         (dict(DEEPSPEED="zero1"), "DEEPSPEED=zero1: expected release, zero2, zero3 or none")):
        with pytest.raises(LaunchError, match=message) as error:
            plan("sft", 1, **env)
        assert error.value.status == 2


def test_gpus_come_from_gpus_cuda_visible_devices_or_nvidia_smi(tmp_path: Path):
    assert count_gpus({"GPUS": "1,3", "CUDA_VISIBLE_DEVICES": "0"}) == 2
    assert count_gpus({"GPUS": "", "CUDA_VISIBLE_DEVICES": "0,1,2"}) == 3
    assert count_gpus({"CUDA_VISIBLE_DEVICES": ""}) == 0  # set and empty: no GPU, whatever nvidia-smi says
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\n" + "".join(f"echo 'GPU {i}: Fake (UUID: x)'\n" for i in range(3)))
    (tmp_path / "nvidia-smi").chmod(0o755)
    assert count_gpus({"PATH": str(tmp_path)}) == 3
    assert count_gpus({"PATH": str(tmp_path / "none")}) == 0
    p = plan_launch("sft", {"GPUS": "2", "PUMA_PYTHON": "py"}, has_deepspeed=installed)
    assert p.gpus == 1 and p.env == {"CUDA_VISIBLE_DEVICES": "2"} and p.launcher[-1] == "1"
    assert plan_launch("sft", {"PATH": str(tmp_path / "none")}).launcher == (sys.executable,)


def test_main_prints_the_launch_line_and_runs_the_step(monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(os, "execvpe", lambda file, args, env: ran.append((file, args, env)))
    for name in LAUNCH_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    main(["dpo", "--", "--recipe", "release", "--fp16"])
    (file, args, env), = ran
    assert file == sys.executable and args == [sys.executable, "-m", "PUMA.dpo", "--recipe", "release", "--fp16"]
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert capsys.readouterr().err == f"PUMA launch: recipe release, 0 GPU(s), {sys.executable}... fp32\n"
    monkeypatch.setenv("PRECISION", "fp8")
    assert main(["sft"]) == 2 and "PRECISION=fp8" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["merge", "--", "--adapter_path", "x"])  # only the training steps are launched


def test_cpu_processes_take_the_gpu_launcher_on_the_cpu():
    p = plan("sft", 4, CPU_PROCESSES="2")  # in place of the GPUs there are; no DeepSpeed default on the CPU
    assert p.launcher == ("py", *ACCELERATE, "PUMA/configs/accelerate_multi_gpu.yaml", "--num_processes", "2")
    assert p.train_args == () and p.env == CPU_ENV and p.world_size == 2
    assert p.summary() == "PUMA launch: recipe release, 2 CPU process(es), py -m accelerate.commands.launch... fp32"
    one = plan("dpo", 0, CPU_PROCESSES="1")
    assert one.launcher == ("py", *ACCELERATE, "PUMA/configs/accelerate_single_gpu.yaml", "--num_processes", "1")
    for env, message in ((dict(CPU_PROCESSES="0"), "CPU_PROCESSES=0: expected a whole number of at least 1"),
                         (dict(CPU_PROCESSES="two"), "CPU_PROCESSES=two: expected a whole number"),
                         (dict(CPU_PROCESSES="2", DEEPSPEED="zero3"), "DeepSpeed trains on GPUs"),
                         (dict(CPU_PROCESSES="2", FSDP="fsdp2"), "FSDP shards over GPUs")):
        with pytest.raises(LaunchError, match=message) as error:
            plan("sft", 2, **env)
        assert error.value.status == 2


def test_nodes_meet_at_the_master_through_either_launcher():
    nodes = dict(NNODES="2", NODE_RANK="1", MASTER_ADDR="10.0.0.1", MASTER_PORT="29400")
    p = plan("sft", 4, installed, **nodes)  # the release's DeepSpeed: torchrun's static rendezvous
    assert p.launcher == ("py", "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank", "1", "--master_addr",
                          "10.0.0.1", "--master_port", "29400", "--nproc_per_node", "4")
    assert p.world_size == 8 and p.summary().startswith("PUMA launch: recipe release, 4 GPU(s) on each of 2 nodes")
    p = plan("dpo", 4, DEEPSPEED="none", **nodes)  # accelerate counts the processes of every node
    assert p.launcher == ("py", *ACCELERATE, "PUMA/configs/accelerate_multi_gpu.yaml", "--num_processes", "8",
                          "--num_machines", "2", "--machine_rank", "1", "--main_process_ip", "10.0.0.1",
                          "--main_process_port", "29400")
    p = plan("grpo", 0, CPU_PROCESSES="1", NNODES="2", NODE_RANK="0", MASTER_ADDR="127.0.0.1")
    assert p.launcher[4] == "PUMA/configs/accelerate_multi_gpu.yaml" and p.launcher[-4:] == (
        "--main_process_ip", "127.0.0.1", "--main_process_port", "29500")
    port = plan("sft", 2, RECIPE="improved", MASTER_PORT="29611")  # one node, a fixed port (tests, shared hosts)
    assert port.launcher[-8:] == ("--num_machines", "1", "--machine_rank", "0", "--main_process_ip", "127.0.0.1",
                                  "--main_process_port", "29611")
    for env, message in ((dict(NNODES="2"), "NNODES=2: set MASTER_ADDR to node 0's address"),
                         (dict(NNODES="2", NODE_RANK="2", MASTER_ADDR="h"), "NODE_RANK=2: expected 0 .. NNODES-1"),
                         (dict(MASTER_PORT="port"), "MASTER_PORT=port: expected a whole number")):
        with pytest.raises(LaunchError, match=message):
            plan("sft", 1, installed, **env)
    with pytest.raises(LaunchError, match="NNODES=2: no GPU here; set CPU_PROCESSES"):
        plan("sft", 0, NNODES="2", MASTER_ADDR="h")


def test_fsdp2_through_accelerate_instead_of_deepspeed():
    p = plan("sft", 2, RECIPE="improved", FSDP="fsdp2")
    assert p.launcher == ("py", *ACCELERATE, "PUMA/configs/accelerate_fsdp2.yaml", "--num_processes", "2")
    assert p.train_args == ("--bf16",) and (REPO_ROOT / "PUMA/configs/accelerate_fsdp2.yaml").is_file()
    assert plan("sft", 2, FSDP="fsdp2", DEEPSPEED="none").launcher[4] == "PUMA/configs/accelerate_fsdp2.yaml"
    for env, message in ((dict(FSDP="fsdp2", DEEPSPEED="zero3"), "FSDP=fsdp2 with DEEPSPEED=zero3: choose one"),
                         (dict(FSDP="fsdp1"), "FSDP=fsdp1: expected fsdp2 or none")):
        with pytest.raises(LaunchError, match=message):
            plan("sft", 2, **env)
    with pytest.raises(LaunchError, match="FSDP shards over GPUs"):
        plan("sft", 0, FSDP="fsdp2")


def test_a_global_batch_the_processes_do_not_divide_is_refused_before_any_starts(monkeypatch):
    ran = []
    monkeypatch.setattr(os, "execvpe", lambda file, args, env: ran.append(args))
    for name in LAUNCH_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CPU_PROCESSES", "3")
    with pytest.raises(ValueError, match="global batch 64 .* is not a multiple of 3 process"):
        main(["sft", "--", "--model_path", "m"])
    with pytest.raises(ValueError, match="global batch 10 .* is not a multiple of 3 process"):
        main(["dpo", "--", "--global_batch_size", "10"])
    main(["sft", "--", "--global_batch_size", "12"])
    assert ran and "--global_batch_size" in ran[0]


def _run_script(tmp_path: Path, script: str, gpus: int, **env: str) -> tuple[int, list[str], str]:
    """Run a training script with `gpus` fake GPUs and a fake step Python (PUMA_PYTHON) that prints
    its argv (and answers the deepspeed check with FAKE_DEEPSPEED_RC)."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "nvidia-smi").write_text("#!/bin/sh\n" + "".join(f"echo 'GPU {i}: Fake (UUID: x)'\n" for i in range(gpus)))
    (fake / "fake-python").write_text('#!/bin/sh\n[ "$1" = -c ] && exit "${FAKE_DEEPSPEED_RC:-0}"\n'
                                      'printf "%s\\n" "$@"\n')
    for name in ("nvidia-smi", "fake-python"):
        (fake / name).chmod(0o755)
    clean = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARIABLES}
    done = subprocess.run(["bash", f"PUMA/scripts/{script}"], cwd=REPO_ROOT, capture_output=True, text=True,
                          env={**clean, "PATH": f"{fake}:{clean['PATH']}", "PUMA_PYTHON": str(fake / "fake-python"),
                               **env})
    return done.returncode, done.stdout.splitlines(), done.stderr


@pytest.mark.parametrize("script, module", [("finetune_function_param.sh", "PUMA.sft"), ("dpo_llama.sh", "PUMA.dpo")])
def test_release_scripts_launch_deepspeed_zero2_fp16_on_gpus(tmp_path: Path, script: str, module: str):
    rc, argv, err = _run_script(tmp_path, script, 2)
    assert rc == 0 and argv[:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    assert argv[5:7] == ["-m", module] and "--fp16" in argv
    assert argv[argv.index("--deepspeed") + 1] == "PUMA/configs/deepspeed_zero2_release.json"
    assert "--gradient_accumulation_steps" not in argv and "--per_device_train_batch_size" not in argv
    assert err.startswith("PUMA launch: recipe release, 2 GPU(s), ") and "-m torch.distributed.run... --fp16" in err
    rc, argv, err = _run_script(tmp_path, script, 2, FAKE_DEEPSPEED_RC="1")  # deepspeed not installed
    assert rc == 3 and not argv and "pip install -r requirements-gpu.txt" in err and "DEEPSPEED=none" in err
    rc, argv, _ = _run_script(tmp_path, script, 2, FAKE_DEEPSPEED_RC="1", DEEPSPEED="none")  # AMP fp16, by choice
    assert rc == 0 and "accelerate.commands.launch" in argv and "--fp16" in argv and "--deepspeed" not in argv
    rc, argv, _ = _run_script(tmp_path, script, 1, RECIPE="improved")
    assert rc == 0 and "accelerate.commands.launch" in argv and "--bf16" in argv and "--deepspeed" not in argv
    assert argv[argv.index("--recipe") + 1] == "improved"
    rc, argv, _ = _run_script(tmp_path, script, 0)  # no GPU: plain Python in fp32
    assert rc == 0 and argv[:2] == ["-m", module] and "--fp16" not in argv and "--deepspeed" not in argv
    rc, _, err = _run_script(tmp_path, script, 1, RECIPE="other")
    assert rc == 2 and "--recipe 'other': expected release, improved or a recipe file" in err


def test_scripts_take_the_nodes_from_the_environment(tmp_path: Path):
    nodes = dict(NNODES="2", NODE_RANK="1", MASTER_ADDR="10.0.0.1", MASTER_PORT="29400")
    for script in ("finetune_function_param.sh", "dpo_llama.sh", "grpo_llama.sh"):
        rc, argv, err = _run_script(tmp_path, script, 2, DEEPSPEED="none", **nodes)
        assert rc == 0 and argv[argv.index("--num_processes") + 1] == "4", err
        assert argv[argv.index("--machine_rank") + 1] == "1" and argv[argv.index("--main_process_ip") + 1] == "10.0.0.1"


def test_grpo_script_passes_its_flags_after_the_launch_flags(tmp_path: Path):
    rc, argv, _ = _run_script(tmp_path, "grpo_llama.sh", 3, GPUS="0,1", VLLM_MODE="server")
    assert rc == 0 and argv[:4] == ["-m", "accelerate.commands.launch", "--config_file",
                                    "PUMA/configs/accelerate_multi_gpu.yaml"]
    assert argv[argv.index("--num_processes") + 1] == "2"
    assert argv[argv.index("-m", 1):][:3] == ["-m", "PUMA.grpo", "--fp16"]
    assert argv[-2:] == ["--vllm_server_base_url", "http://localhost:8000"] and "--deepspeed" not in argv


# --- the `puma` command -------------------------------------------------------------------------------------------
def test_puma_command_lists_and_runs_the_steps(capsys):
    from PUMA.__main__ import COMMANDS
    from PUMA.__main__ import main as puma

    assert puma(["--help"]) == 0
    listing = capsys.readouterr().out
    assert all(f"  {name} " in listing for name in COMMANDS) and "puma STEP --help" in listing
    assert puma([]) == 2 and puma(["nope"]) == 2 and "unknown step 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        puma(["sft", "--help"])  # the step's own help
    assert done.value.code == 0 and "--train_on" in capsys.readouterr().out
    for name, (target, _) in COMMANDS.items():
        module, _, function = target.partition(":")
        assert callable(getattr(__import__(module, fromlist=[function]), function)), name


def test_python_dash_m_puma_runs_the_command():
    done = subprocess.run([sys.executable, "-m", "PUMA", "launch", "--help"], cwd=REPO_ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0 and "DEEPSPEED=release|zero2|zero3|none" in done.stdout


def test_the_steps_own_gpu_settings_decide_its_precision_and_deepspeed():
    """`--gpu_dtype` and `--gpu_launch` are settings of the step (its recipe's, a config file's or its
    flags'): the launcher reads them from the step's settings, not from RECIPE."""
    from PUMA.cli import parse_step
    from PUMA.sft import SFTConfig

    mine = parse_step(SFTConfig, ["--gpu_dtype", "bfloat16", "--gpu_launch", "accelerate"], "sft", None, "sft")
    p = plan_launch("sft", {"PUMA_PYTHON": "py"}, 2, not_asked, settings=mine)
    assert p.train_args == ("--bf16",) and "accelerate.commands.launch" in p.launcher
    release = plan_launch("sft", {"PUMA_PYTHON": "py", "RECIPE": "improved"}, 2, installed,
                          settings=parse_step(SFTConfig, [], "sft", None, "sft"))
    assert release.recipe == "release" and release.train_args == ("--fp16", *RELEASE_DS)
