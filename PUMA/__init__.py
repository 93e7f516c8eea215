"""PUMA (Personalized User Memory-enhanced Alignment): the fine-tuning pipeline of the
PersonalWAB paper. Each step is a library module with a thin CLI (`puma STEP`, or
`python -m PUMA.STEP`):

- `PUMA.data`: function and parameter SFT data (step 1)
- `PUMA.sft`: LoRA SFT on function / param / function_param data (step 2)
- `PUMA.generate`: function predictions and parameter candidates (step 3)
- `PUMA.score`: benchmark scores of every candidate (step 4; the scoring itself: `PUMA.candidate_scores`)
- `PUMA.dpo_data`: chosen/rejected pairs (step 5)
- `PUMA.merge`, `PUMA.dpo`: merge the SFT LoRA, then DPO with LoRA (step 6)
- `PUMA.agent`: the evaluated agent (step 7); `PUMA.prompting`: its prompts and output reading
- `PUMA.recipe`: the `release` and `improved` recipes (`configs/{release,improved}.yaml`)
- `PUMA.launch`: how sft / dpo / grpo start on the GPUs there are (launcher, precision, DeepSpeed)
- `PUMA.tiny_model`: a tiny random Llama + local tokenizer for CPU tests and the smoke run
"""

import PersonalWAB  # noqa: F401,E402  (its OpenMP wait policy must be set before torch loads)
