"""The project side of a PUMA parity item, run inside one source tree: `python -m
devtools.parity_probe PROBE --inputs DIR --out OUT.json` with that tree as the working folder,
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
                initial adapter (`devtools.parity_training`)
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
    from devtools.parity_puma import GenerateRecorder
    from PUMA.generate import GenerateConfig, generate_file

    config = GenerateConfig(model_path=str(inputs / "model"), mode="param", recipe="release", backend="hf",
                            dtype="float32", data_file=str(inputs / "param.json"),
                            function_file=str(inputs / "functions.json"), output_file=str(inputs.parent / "gen.json"),
                            max_new_tokens=6, num_beams=4, num_return_sequences=4, do_sample=True, temperature=1.5,
                            batch_size=1)
    with GenerateRecorder() as recorder:
        path = generate_file(config, log=lambda _: None)
    return {"calls": [{"effective": call["effective"]} for call in recorder.calls], "prompt_ids": recorder.prompts(),
            "outputs": json.loads(Path(path).read_text(encoding="utf-8"))}


def scores(inputs: Path) -> dict[str, Any]:
    from PUMA.score import load_engines, score_candidates

    _, engines, tasks = load_engines(str(inputs / "data"), "bm25s", None, "train", log=lambda _: None)
    candidates = json.loads((inputs / "candidates.json").read_text(encoding="utf-8"))
    return {"scores": score_candidates(engines, tasks, candidates, recipe="release")}


def sft(inputs: Path) -> dict[str, Any]:
    from devtools.parity_training import selftest_sft_observation

    return selftest_sft_observation(inputs)


def dpo(inputs: Path) -> dict[str, Any]:
    from devtools.parity_training import selftest_dpo_observation

    return selftest_dpo_observation(inputs)


PROBES: dict[str, Callable[[Path], dict[str, Any]]] = {"generation": generation, "scores": scores, "sft": sft,
                                                        "dpo": dpo}


@dataclass
class ProbeSettings:
    """The probe run, its inputs and where its observation goes."""

    probe: str = setting(None, f"the parity item observed, one of: {', '.join(sorted(PROBES))}", positional=True,
                         choices=sorted(PROBES))
    inputs: str = setting(None, "the folder parity_selftest.prepare_inputs wrote", required=True)
    out: str = setting(None, "the observation (JSON)", required=True)


def main(argv: list[str] | None = None) -> int:
    args = parse(ProbeSettings, argv, prog="python -m devtools.parity_probe", description=__doc__)
    observation = PROBES[args.probe](Path(args.inputs).resolve())
    Path(args.out).write_text(json.dumps(observation), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
