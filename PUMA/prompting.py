"""PUMA's prompts and output reading, shared by the training data (`PUMA.data`), the
scoring step (`PUMA.score`), DPO data (`PUMA.dpo_data`), generation (`PUMA.generate`) and the
agent (`PUMA.agent`): the task-specific memory, its token cut, the parameter prompt, and how a
generated parameter becomes an action. The texts themselves come from the protocol."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.data.schema import RECOMMEND, REVIEW, SEARCH, TASK_FUNCTIONS
from PersonalWAB.memory import most_relevant, newest_first, past_behaviours
from PersonalWAB.memory.embeddings import MEMORY_TEMPLATE, PUMA_TEMPLATE
from PersonalWAB.protocol import Protocol
from PersonalWAB.schema_types import Behaviour, Product, Task
from PersonalWAB.types import RESPOND, STOP, Action

# How a model's output is read: strict = as the release's agent reads it (unstripped, a case-sensitive `Say:`, any
# output starting with the stop word stops), lenient = stripped, `Say:` in any case, only the exact stop word stops.
Parsing = Literal["strict", "lenient"]
# How a DPO prompt over the length limit is cut: start = the release's (its start, instruction included, is
# lost), memory = the end of its memory (step 5 fits it; header and instruction stay).
PromptCut = Literal["start", "memory"]
FUNCTION_NEW_TOKENS = 32  # function predictions (the release's generate_function.sh)
PARAM_NEW_TOKENS = 256  # parameters, greedy, at evaluation (the release's agent)
# The behaviour text relevance ranks: the release's PUMA data scripts rank by `PUMA_TEMPLATE`,
# its agent by the agents' `MEMORY_TEMPLATE`.
__all__ = ["MEMORY_TEMPLATE", "PUMA_TEMPLATE"]


def prompt_cue(template: str) -> str:
    """A prompt template's last line (`### Tool Parameter:` and its line break), after which
    the release reads what its model generated."""
    return template[template.rfind("\n", 0, len(template) - 1) + 1:]


def cut_to_tokens(text: str, tokenizer: Any, max_tokens: int | None) -> str:
    """`text` through the tokenizer as the release cuts memory: encoded with truncation to
    `max_tokens` tokens *including* the special tokens the tokenizer adds (Llama's BOS, so
    767 memory tokens at 768), then decoded without them. No tokenizer or limit: as it is."""
    if tokenizer is None or max_tokens is None:
        return text
    room = max(0, max_tokens - tokenizer.num_special_tokens_to_add())
    ids = tokenizer(text, add_special_tokens=False)["input_ids"][:room]
    return tokenizer.decode(ids, skip_special_tokens=True)


def puma_behaviours(protocol: Protocol, data: BenchmarkData, task: Task, task_type: str, k: int,
                    relevance_text: str = PUMA_TEMPLATE) -> list[Behaviour]:
    """PUMA's task-specific memory before rendering: the `k` past behaviours whose
    `relevance_text` is closest to the instruction, best first; for a recommendation newest
    first, so the latest purchases survive the token cut (as the release's PUMA orders it)."""
    chosen = most_relevant(data, task, past_behaviours(data, task), k, protocol, relevance_text)
    return newest_first(chosen) if task_type == "recommend" else chosen


def puma_memory_text(protocol: Protocol, data: BenchmarkData, task: Task, task_type: str, k: int,
                     tokenizer: Any = None, mem_token_length: int | None = None,
                     relevance_text: str = PUMA_TEMPLATE) -> str:
    """The task-specific memory of a prompt: entries joined by `|`, cut to `mem_token_length` tokens."""
    behaviours = puma_behaviours(protocol, data, task, task_type, k, relevance_text)
    return cut_to_tokens(protocol.puma_memory(behaviours, task_type), tokenizer, mem_token_length)


def parameter_prompt(protocol: Protocol, instruction: str, function_name: str, memory_text: str,
                     product: Product | None = None, *, agent: bool = False) -> str:
    """The parameter prompt for `function_name` (the product is shown for a review only);
    `agent=True`: the release agent's evaluation prompt instead of the training prompt."""
    if function_name not in TASK_FUNCTIONS:
        raise ValueError(f"unknown function {function_name!r}; expected one of {TASK_FUNCTIONS}")
    return protocol.puma_param_prompt(instruction, function_name, memory_text,
                                      product if function_name == REVIEW else None, agent=agent)


@dataclass(frozen=True)
class OutputRules:
    """How a generated parameter is read: a message to the user, a stop, or the parameter.

    `strict` follows the release's agent (case-sensitive prefix, the message after the last
    separator, any output starting with the stop word stops); `lenient`: the prefix matches
    in any case and only the exact stop word stops."""

    say_prefix: str
    say_separator: str
    stop_word: str
    parsing: Parsing

    @classmethod
    def of(cls, protocol: Protocol, parsing: Parsing) -> OutputRules:
        return cls(protocol.text("puma.agent.say_prefix"), protocol.text("puma.agent.say_separator"),
                   protocol.text("puma.agent.stop_prefix"), parsing)

    def special(self, text: str) -> Action | None:
        """The message or stop `text` stands for, None for a parameter."""
        if self.parsing == "strict":
            if text.startswith(self.say_prefix):
                return Action(RESPOND, {"content": text.split(self.say_separator)[-1]})
            return Action(STOP) if text.startswith(self.stop_word) else None
        if text.lower().startswith(self.say_prefix.lower()):
            return Action(RESPOND, {"content": text[len(self.say_prefix):].strip()})
        return Action(STOP) if text.lower() == self.stop_word.lower() else None


def parse_asins(text: str, keep_empty: bool = False) -> list[str]:
    """Comma-separated ASINs, stripped, de-duplicated keeping the first occurrence's position
    (the release used an unordered set); empty items dropped unless `keep_empty` (the
    release sends them on; the recommender skips them)."""
    return list(dict.fromkeys(part.strip() for part in text.split(",") if keep_empty or part.strip()))


def parse_parameters(function_name: str, output: str, rules: OutputRules | None = None,
                     parsing: Parsing = "lenient") -> Action:
    """The action a generated parameter stands for. With `rules`, a message or a stop is
    recognised first; without, every output is the parameter (the release scores its DPO
    candidates that way). `strict`: the output as the release reads it, not stripped (a
    leading space makes `Say:` or `stop` a parameter; a query or review is sent as written;
    empty ASIN items stay)."""
    release = parsing == "strict"
    text = output if release else output.strip()
    special = rules.special(text) if rules is not None else None
    if special is not None:
        return special
    if function_name == RECOMMEND:
        return Action(function_name, {"product_sequence": parse_asins(text, keep_empty=release)})
    if function_name == SEARCH:
        return Action(function_name, {"query": text})
    if function_name == REVIEW:
        return Action(function_name, {"review": text})
    raise ValueError(f"unknown function {function_name!r}; expected one of {TASK_FUNCTIONS}")


