"""The vLLM generation backend, driven through `PUMA.generate` against an in-process
stand-in for vLLM's offline API (`LLM.generate`, `LLM.beam_search`, `SamplingParams`,
`BeamSearchParams`, `LoRARequest`, as in vLLM 0.33.0): vLLM needs a GPU, so these tests
check what the backend asks of it and how it turns its token ids back into outputs."""

from __future__ import annotations

import importlib.machinery
import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from PUMA.generate import GenerateConfig, generate_file
from PUMA.vllm_backend import resolve_backend
from PUMA.modeling import load_tokenizer, write_json
from PUMA.vllm_backend import lora_rank_limit

PROMPTS = {"find me a red kettle": "Instruction: find me a red kettle for my kitchen please\nParameter: ",
           "review the mug": "Instruction: review the mug I bought last week, I loved it\nParameter: "}


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None
    max_tokens: int | None = 16
    detokenize: bool = True


@dataclass
class BeamSearchParams:
    beam_width: int
    max_tokens: int


@dataclass
class LoRARequest:
    lora_name: str
    lora_int_id: int
    lora_path: str = ""


class FakeLLM:
    """Answers request k, output i with the text `B{k}{i % 2}` (so outputs repeat) plus EOS."""

    instances: list[FakeLLM] = []

    def __init__(self, model: str, **options: Any):
        self.model, self.options, self.calls = model, options, []
        self.tokenizer = load_tokenizer(options.get("tokenizer") or model)
        FakeLLM.instances.append(self)

    def _tokens(self, k: int, i: int) -> list[int]:
        return self.tokenizer(f"B{k}{i % 2}", add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]

    def generate(self, requests: list[dict], params: SamplingParams, *, use_tqdm: bool = True,
                 lora_request: Any = None) -> list[Any]:
        self.calls.append(("generate", requests, params, lora_request))
        return [types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=self._tokens(k, i))
                                               for i in range(params.n)]) for k in range(len(requests))]

    def beam_search(self, requests: list[dict], params: BeamSearchParams, lora_request: Any = None) -> list[Any]:
        self.calls.append(("beam_search", requests, params, lora_request))
        return [types.SimpleNamespace(sequences=[
            types.SimpleNamespace(tokens=request["prompt_token_ids"] + self._tokens(k, i))
            for i in range(params.beam_width)]) for k, request in enumerate(requests)]


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> type[FakeLLM]:
    modules = {name: types.ModuleType(name) for name in ("vllm", "vllm.sampling_params", "vllm.lora",
                                                         "vllm.lora.request")}
    for name, module in modules.items():
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)
        monkeypatch.setitem(sys.modules, name, module)
    modules["vllm"].LLM = FakeLLM
    modules["vllm"].SamplingParams = SamplingParams
    modules["vllm.sampling_params"].BeamSearchParams = BeamSearchParams
    modules["vllm.lora.request"].LoRARequest = LoRARequest
    FakeLLM.instances = []
    return FakeLLM


def _data_file(tmp_path: Path) -> Path:
    return write_json(tmp_path / "param.json", [{"instruction": i, "prompt": p} for i, p in PROMPTS.items()])


def test_sampled_candidates_are_seeded_samples_of_prompts_cut_on_the_left(fake_vllm, tiny_model_dir: Path,
                                                                          tmp_path: Path):
    out = generate_file(GenerateConfig(model_path=str(tiny_model_dir), data_file=str(_data_file(tmp_path)),
                                       output_file=str(tmp_path / "cands.json"), backend="vllm", prompts="training",
                                       num_return_sequences=4, num_beams=10, do_sample=True, temperature=1.5,
                                       top_p=0.9, max_new_tokens=20, max_prompt_tokens=12, dtype="bfloat16"),
                        log=lambda _: None)
    assert json.loads(out.read_text()) == {"find me a red kettle": ["B00", "B01"], "review the mug": ["B10", "B11"]}
    (llm,) = fake_vllm.instances
    assert llm.model == str(tiny_model_dir)
    assert llm.options["dtype"] == "bfloat16" and llm.options["max_model_len"] == 12 + 20
    assert "enable_lora" not in llm.options
    ((kind, requests, params, lora),) = llm.calls
    assert kind == "generate" and lora is None
    assert params == SamplingParams(n=4, temperature=1.5, top_p=0.9, top_k=50, seed=42, max_tokens=20, detokenize=False)
    tokenizer = load_tokenizer(tiny_model_dir)
    for request, prompt in zip(requests, PROMPTS.values()):
        full = tokenizer(prompt, add_special_tokens=True)["input_ids"]
        assert len(full) > 12 and request["prompt_token_ids"] == [tokenizer.bos_token_id] + full[-11:]


def test_beam_candidates_drop_the_prompt_and_keep_the_best_beams(fake_vllm, tiny_model_dir: Path, tmp_path: Path):
    out = generate_file(GenerateConfig(model_path=str(tiny_model_dir), data_file=str(_data_file(tmp_path)),
                                       output_file=str(tmp_path / "beams.json"), backend="vllm", prompts="training",
                                       num_return_sequences=1, num_beams=3, do_sample=False, max_new_tokens=8),
                        log=lambda _: None)
    assert json.loads(out.read_text()) == {"find me a red kettle": ["B00"], "review the mug": ["B10"]}
    ((kind, _, params, _),) = fake_vllm.instances[0].calls
    assert kind == "beam_search" and params == BeamSearchParams(beam_width=3, max_tokens=8)


def test_function_predictions_are_greedy_and_short(fake_vllm, tiny_model_dir: Path, tmp_path: Path):
    generate_file(GenerateConfig(model_path=str(tiny_model_dir), mode="function", data_file=str(_data_file(tmp_path)),
                                 output_file=str(tmp_path / "functions.json"), backend="vllm"), log=lambda _: None)
    ((kind, _, params, _),) = fake_vllm.instances[0].calls
    assert kind == "generate"
    assert (params.n, params.temperature, params.max_tokens) == (1, 0.0, 32)  # the release: greedy, 32 new tokens


def test_adapter_folder_is_served_as_a_lora_on_its_base(fake_vllm, tiny_model_dir: Path, tmp_path: Path):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 12, "base_model_name_or_path": str(tiny_model_dir),
                                                             "peft_type": "LORA"}))
    generate_file(GenerateConfig(model_path=str(adapter), data_file=str(_data_file(tmp_path)),
                                 output_file=str(tmp_path / "cands.json"), backend="vllm", prompts="training",
                                 num_return_sequences=2),
                  log=lambda _: None)
    (llm,) = fake_vllm.instances
    assert llm.model == str(tiny_model_dir) and llm.options["tokenizer"] == str(tiny_model_dir)
    assert llm.options["enable_lora"] is True and llm.options["max_lora_rank"] == 16
    ((_, _, _, lora),) = llm.calls
    assert lora == LoRARequest(lora_name="puma", lora_int_id=1, lora_path=str(adapter))


def test_backend_choice(fake_vllm, monkeypatch: pytest.MonkeyPatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_backend("auto") == "hf"
    assert resolve_backend("vllm") == "vllm"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_backend("auto") == "vllm"
    assert resolve_backend("hf") == "hf"
    with pytest.raises(ValueError, match="--backend must be one of"):
        resolve_backend("tgi")


def test_backend_vllm_without_vllm_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("PUMA.vllm_backend.vllm_installed", lambda: False)
    assert resolve_backend("auto") == "hf"
    with pytest.raises(ValueError, match="pip install vllm"):
        resolve_backend("vllm")


def test_lora_rank_rounds_up_to_a_rank_vllm_supports():
    assert [lora_rank_limit(r) for r in (1, 8, 12, 16, 17, 512)] == [1, 8, 16, 16, 32, 512]
    with pytest.raises(ValueError, match="above the largest"):
        lora_rank_limit(600)


def test_release_candidates_sample_with_top_k_and_read_the_whole_sequence(fake_vllm, tiny_model_dir: Path,
                                                                          tmp_path: Path):
    examples = [{"instruction": i, "prompt": p, "memory": "Title:Kettle\n", "product": None}
                for i, p in PROMPTS.items()]
    write_json(tmp_path / "param.json", examples)
    write_json(tmp_path / "functions.json", {i: ["search_product_by_query"] for i in PROMPTS})
    out = generate_file(GenerateConfig(model_path=str(tiny_model_dir), data_file=str(tmp_path / "param.json"),
                                       function_file=str(tmp_path / "functions.json"),
                                       output_file=str(tmp_path / "cands.json"), backend="vllm", num_return_sequences=2,
                                       num_beams=2, do_sample=True, temperature=1.5, max_new_tokens=20),
                        log=lambda _: None)
    ((kind, requests, params, _),) = fake_vllm.instances[0].calls
    assert kind == "generate" and params.top_k == 50 and params.n == 2  # the HF default the release sampled with
    # every sampling field set, and the engine told to ignore the model folder's generation defaults
    assert (params.min_p, params.repetition_penalty, params.presence_penalty, params.frequency_penalty) == (0, 1, 0, 0)
    assert fake_vllm.instances[0].options["generation_config"] == "vllm"
    outputs = json.loads(out.read_text())
    # read as the release: the whole sequence decoded, the text after the prompt's cue (no prompt cut)
    assert all(len(v) == 2 for v in outputs.values())
    assert all("Tool Parameter" not in o for v in outputs.values() for o in v)
    tokenizer = load_tokenizer(tiny_model_dir)
    assert all(request["prompt_token_ids"][0] == tokenizer.bos_token_id for request in requests)
