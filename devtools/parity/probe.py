"""The project side of a PUMA parity item, run inside one source tree: `python -m
devtools.parity.probe PROBE --inputs DIR --out OUT.json` with that tree as the working folder,
so `PUMA` is imported from it (the self-test runs it in copies with small differences injected).

Probes (each reads the files `parity_selftest.prepare_inputs` writes into DIR):
    generation  step 3's DPO candidates under `--recipe release` from a stand-in whose folder
                carries Llama-2-chat's generation defaults, one prompt per call, seeded: the
                settings each call ran with (after the library's defaults), the prompt ids (the
                memory cut to 768 tokens), the outputs
    scores      step 4 under `--recipe release` on candidates that hit: search queries holding the
                target's title, recommend lists holding the target and the user's history in
                several orders
    sft, dpo    steps 2 and 6 under `--recipe release`: a few optimizer steps from a fixed
                initial adapter (`devtools.parity.training`)
    settings    what every step of `puma run --recipe release` would record that the settings
                items compare, and each setting's documented default (`settings` below)

Every probe takes its settings as the step's own command line makes them under `--recipe
release` (`parity_puma.project_settings`): the recipe file and the steps' defaults decide.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

from PersonalWAB.settings import parse, setting


def generation(inputs: Path) -> dict[str, Any]:
    from devtools.parity.puma import GenerateRecorder
    from devtools.parity.puma_context import project_settings
    from PUMA.generate import GenerateConfig, generate_file

    config = project_settings(GenerateConfig, "generate", "--model_path", str(inputs / "model"), "--mode", "param",
                              "--dtype", "float32", "--data_file", str(inputs / "param.json"),
                              "--function_file", str(inputs / "functions.json"),
                              "--out", str(inputs.parent / "gen.json"), "--batch_size", "1")
    with GenerateRecorder() as recorder:
        path = generate_file(config, log=lambda _: None)
    return {"calls": [{"effective": call["effective"]} for call in recorder.calls], "prompt_ids": recorder.prompts(),
            "outputs": json.loads(Path(path).read_text(encoding="utf-8"))}


def scores(inputs: Path) -> dict[str, Any]:
    from PUMA.candidate_scores import load_engines, score_candidates
    from PUMA.score import ScoreConfig

    _, engines, tasks = load_engines(str(inputs / "data"), "bm25s", None, "train", log=lambda _: None)
    candidates = json.loads((inputs / "candidates.json").read_text(encoding="utf-8"))
    release = ScoreConfig()  # the step's documented defaults: the release's reading and review score
    return {"scores": score_candidates(engines, tasks, candidates, parsing=release.parsing,
                                       review_score=release.review_score)}


def sft(inputs: Path) -> dict[str, Any]:
    from devtools.parity.training import selftest_sft_observation

    return selftest_sft_observation(inputs)


def dpo(inputs: Path) -> dict[str, Any]:
    from devtools.parity.training import selftest_dpo_observation

    return selftest_dpo_observation(inputs)


def settings(inputs: Path) -> dict[str, Any]:
    """What each step of `puma run --recipe release` would record (its settings, the trainer's
    arguments and adapter its own builder makes, its decoding), made by the steps' own settings
    parsers and builders without training or generating; and each setting's documented default.
    The values are those the `settings` items compare (devtools/parity/step_settings.py)."""
    from PersonalWAB.settings import resolved

    from devtools.parity.puma_context import project_settings
    from devtools.parity.step_settings import documented_defaults, project_values
    from devtools.parity.training import tiny_training_data
    from PUMA.data import DataConfig
    from PUMA.dpo import DPOStepConfig, build_dpo_trainer
    from PUMA.generate import GenerateConfig, effective_settings
    from PUMA.lora import json_value
    from PUMA.sft import SFTConfig, build_sft_trainer

    scratch = inputs.parent / "settings_probe"
    function_data, pairs = tiny_training_data(inputs / "data", scratch)
    model = str(inputs / "model")
    records: dict[str, dict[str, Any]] = {}
    records["data"] = {"settings": resolved(project_settings(DataConfig, "data", "all", "--data_dir",
                                                             str(inputs / "data"), "--out", str(scratch / "data")))}
    for step, cls, build, files in (
            ("sft", SFTConfig, build_sft_trainer, ("--function_data", str(function_data), "--param_data",
                                                   str(scratch / "param_train.json"))),
            ("dpo", DPOStepConfig, build_dpo_trainer, ("--data_file", str(pairs)))):
        config = project_settings(cls, step, "--model_path", model, "--out", str(scratch / step), *files)
        trainer, _ = build(config)
        records[step] = {"settings": resolved(config), "training_arguments": json_value(trainer.args.to_dict()),
                         "lora": json_value(trainer.model.peft_config["default"].to_dict())}
    for mode in ("function", "param"):
        config = project_settings(GenerateConfig, "generate", "--model_path", model, "--mode", mode,
                                  "--out", str(scratch / f"{mode}.json"))
        records[f"generate_{mode}"] = {"settings": resolved(config),
                                       "effective_decoding": effective_settings(config, "hf")}
    records["dpo_data"] = records["data"]
    processes = {"sft": 4, "dpo": 4}  # the release's node
    return {"values": project_values(records, processes), "defaults": documented_defaults(processes)}


PROBES: dict[str, Callable[[Path], dict[str, Any]]] = {"generation": generation, "scores": scores, "sft": sft,
                                                        "dpo": dpo, "settings": settings}


@dataclass
class ProbeSettings:
    """The probe run, its inputs and where its observation goes."""

    probe: str = setting(str, f"the parity item observed, one of: {', '.join(sorted(PROBES))}", positional=True,
                         choices=sorted(PROBES))
    inputs: str = setting(str, "the folder parity_selftest.prepare_inputs wrote", required=True)
    out: str = setting(str, "the observation (JSON)", required=True)


def main(argv: list[str] | None = None) -> int:
    args = parse(ProbeSettings, argv, prog="python -m devtools.parity.probe", description=__doc__)
    observation = PROBES[args.probe](Path(args.inputs).resolve())
    Path(args.out).write_text(json.dumps(observation), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
