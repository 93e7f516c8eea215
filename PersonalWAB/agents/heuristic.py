"""An offline agent that needs no model, so the benchmark runs with no API key.

It picks the function from cue words in the instruction and fills the parameters
from the instruction and, when a memory mode other than `none` is chosen, from
the user's past behaviours: the store the user usually buys in the requested
product line is added to search queries, past purchases feed the recommender,
and the user's habitual review sentences shape the review. With `none` it uses
the instruction alone, which makes the value of history visible in the scores.

In the multi-turn track it follows the release's protocol: tool results reach the
agent only, so after each attempt it tells the user what it found (the top results'
titles and ASINs, or the review it posted) and reads the reply. Unless built with
`use_feedback=False`, it then refines its call: the content words of the user's
feedback join the search query, past purchases that match them move to the most
recent end of the recommender's sequence, and the review is rewritten to cover the
aspects and rating the user asked for. It calls `stop` when the user is satisfied or
after `max_attempts` attempts; without feedback it makes one attempt and stops.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from typing import Any

from PersonalWAB.agents.base import Agent
from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.data.schema import RECOMMEND, REVIEW, SEARCH
from PersonalWAB.envs.pwab.env import PWABEnv
from PersonalWAB.memory import retrieve_memory, run_random_memory
from PersonalWAB.schema_types import Behaviour, Product, Task
from PersonalWAB.types import RESPOND, STOP, Action, Episode

SYSTEM_PROMPT = "Offline heuristic agent: one function call chosen by rules, no language model."
REVIEW_CUES = ("review", "feedback", "write up", "rate it", "my rating", "share my thoughts", "my thoughts on")
RECOMMEND_CUES = ("recommend", "suggest", "what should i", "what else", "ideas for", "next purchase",
                  "another purchase", "get next", "pick out", "show me something", "in the mood for", "surprise me",
                  "based on what i", "my taste", "my style", "feels like me", "my habits", "shopping history",
                  "previous purchases", "recent orders", "usually buy", "things i've liked", "something new",
                  "something fresh", "probably pick")
STOPWORDS = frozenset(
    "a an and are as at be but by for from has have i i'm im in is it its me my of on or so that the this "
    "to was were will with you your can could would should please want need looking some something any "
    "find get like just also really very what which who how when where there their them they we our us "
    "do does did not no yes usually normally trust brand budget price range usual".split()
)
# Words of feedback that say how the user feels rather than what they want.
FEEDBACK_WORDS = frozenset(
    "closer but top ones none these after quite said put mention sound sounds more less keep stars give star "
    "thanks thank okay ok great good not right wrong wanted want should must have from budget firm "
    "never mind look elsewhere further down looks work "
    "all at worked hard describe one item product products result results show showed shown try again".split()
)
CONTRACTION = re.compile(r"\b\w+'\w+\b")
ASIN_TOKEN = re.compile(r"\b[A-Z0-9]{10}\b")
REPORTED_RESULTS = 5
SATISFIED = re.compile(r"\b(perfect|exactly what|that's the one|that is the one|sounds like me|post it|"
                       r"that's what i wanted|that's it)\b")
SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+")
WORD = re.compile(r"[a-z0-9]+")


def content_words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if w not in STOPWORDS and len(w) > 1}


def choose_function(instruction: str) -> str:
    text = instruction.lower()
    if any(cue in text for cue in REVIEW_CUES):
        return REVIEW
    if any(cue in text for cue in RECOMMEND_CUES):
        return RECOMMEND
    return SEARCH


def usual_store(instruction: str, memory: list[Behaviour]) -> str | None:
    """The store the user buys most in the product line closest to the request."""
    words = content_words(instruction)
    if not words or not memory:
        return None

    def overlap(behaviour: Behaviour) -> int:
        product = behaviour["product_info"]
        return len(words & content_words(f"{product['title']} {' '.join(product['categories'] or [])}"))

    closest = max(memory, key=overlap)
    if overlap(closest) == 0:
        return None
    # categories, main_category and store may be null in the official data (None == None, as in the release)
    closest_product = closest["product_info"]
    line: list[str | None] = [*(closest_product["categories"] or [])[-1:]] or [closest_product["main_category"]]
    same_line = [b for b in memory if (b["product_info"]["categories"] or [])[-1:] == line]
    peers = same_line if len(same_line) > 1 else [
        b for b in memory if b["product_info"]["main_category"] == closest["product_info"]["main_category"]
    ]
    stores = Counter(b["product_info"]["store"] for b in peers if b["product_info"]["store"])
    return stores.most_common(1)[0][0] if stores else None


def search_query(instruction: str, memory: list[Behaviour]) -> str:
    store = usual_store(instruction, memory)
    if store and store.lower() not in instruction.lower():
        return f"{instruction} {store}"
    return instruction


def recommendation_sequence(memory: list[Behaviour], limit: int = 30) -> list[str]:
    ordered = sorted(memory, key=lambda b: b["review"]["timestamp"])
    asins = list(dict.fromkeys(b["product_info"]["parent_asin"] for b in ordered))
    return asins[-limit:]


def write_review(product: Product, memory: list[Behaviour]) -> str:
    """A short review of the product, in the user's habitual phrasing when known."""
    feature = (product.get("features") or [""])[0].rstrip(".")
    opening = f"I bought the {product['title']}."
    body = f"{feature}." if feature else ""
    if not memory:
        return f"{opening} {body} Overall it is a good product and does what it promises.".replace("  ", " ")
    sentences = Counter(
        s.strip() for b in memory for s in SENTENCE_SPLIT.split(b["review"]["text"]) if s.strip()
    )
    habitual = [s for s, n in sentences.most_common(3) if n > 1]
    if not habitual:
        latest = max(memory, key=lambda b: b["review"]["timestamp"])
        habitual = SENTENCE_SPLIT.split(latest["review"]["text"].strip())[-2:]
    return " ".join([opening, body, *habitual]).replace("  ", " ").strip()


def result_asins(observation: str, products: dict[str, Product]) -> list[str]:
    """The product of each result in a search/recommend observation (Python's text of a list
    of result texts), as the first catalogue ASIN each result names; [] when it is not a list."""
    try:
        results = ast.literal_eval(observation)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return []
    if not isinstance(results, list):
        return []
    found = []
    for text in results:
        asin = next((token for token in ASIN_TOKEN.findall(str(text)) if token in products), None)
        if asin is not None:
            found.append(asin)
    return found


def report(action: Action, observation: str, products: dict[str, Product]) -> str:
    """What the agent tells the user after an attempt, so the user can judge it."""
    if action.name == REVIEW:
        return (f'I wrote and posted this review for you: "{action.arguments.get("review", "")}". '
                'Is that how you would put it?')
    asins = result_asins(observation, products)[:REPORTED_RESULTS]
    if not asins:
        return "I could not find anything that fits yet. What matters most to you in this product?"
    listed = "; ".join(f"{rank}. {products[asin].get('title', '')} ({asin})" for rank, asin in enumerate(asins, 1))
    return f"Here is what I found: {listed}. Is the one you want among them?"


def satisfied(reply: str) -> bool:
    return bool(SATISFIED.search(reply.lower()))


def feedback_words(replies: list[str]) -> list[str]:
    """What the user asked for, as content words, in the order they were said."""
    found: list[str] = []
    for reply in replies:
        plain = CONTRACTION.sub(" ", reply.lower().replace("\u2019", "'"))
        found.extend(w for w in WORD.findall(plain)
                     if w not in STOPWORDS and w not in FEEDBACK_WORDS and len(w) > 1 and not w.isdigit())
    return list(dict.fromkeys(found))


def refine_sequence(sequence: list[str], data: BenchmarkData, wanted: list[str]) -> list[str]:
    """Move past purchases that match the user's feedback to the most recent end."""
    wanted_set = set(wanted)

    def matches(asin: str) -> int:
        product = data.products.get(asin)
        if product is None:
            return 0
        text = f"{product['title']} {product['store'] or ''} {' '.join(product['categories'] or [])}"
        return len(wanted_set & content_words(text))

    scores = {asin: matches(asin) for asin in sequence}
    return sorted(sequence, key=lambda asin: scores[asin])  # stable: time order kept within a score


def refine_review(review: str, wanted: list[str], replies: list[str]) -> str:
    """Add the aspects and rating the user asked for."""
    extra = [w for w in wanted if w not in content_words(review)]
    rating = None
    for reply in replies:
        found = re.search(r"(\d(?:\.\d)?) stars", reply)
        if found:
            rating = found.group(1)
    parts = [review]
    if extra:
        parts.append(f"What stands out: {', '.join(extra)}.")
    if rating:
        parts.append(f"{rating} stars from me.")
    return " ".join(parts)


class HeuristicAgent(Agent):
    def __init__(self, data: BenchmarkData, memory_mode: str = "last", memory_length: int = 10, seed: int = 2024,
                 random_memory: Any = None, use_feedback: bool = True, max_attempts: int = 4,
                 memory_tokens: int | None = None):
        self.data = data
        self.memory_tokens = memory_tokens
        self.memory_mode = memory_mode
        self.memory_length = memory_length
        self.seed = seed
        self.random_memory = random_memory
        self.use_feedback = use_feedback
        self.max_attempts = max_attempts

    def decide(self, env: PWABEnv, task: Task) -> Action:
        draw = self.random_memory.draw(env.trial, env.task_index) if self.random_memory is not None else None
        memory = retrieve_memory(self.data, task, self.memory_mode, self.memory_length, protocol=env.protocol,
                                 random_draw=draw, seed=self.seed, tokens=self.memory_tokens)
        instruction = task["task"]
        name = choose_function(instruction)
        if name == SEARCH:
            return Action(name, {"query": search_query(instruction, memory)})
        if name == RECOMMEND:
            return Action(name, {"product_sequence": recommendation_sequence(memory)})
        return Action(name, {"review": write_review(task["target"]["product_info"], memory)})

    def refine(self, first: Action, replies: list[str]) -> Action:
        """The first call, refined by everything the user has said since."""
        wanted = feedback_words(replies)
        if first.name == SEARCH:
            query = first.arguments["query"]
            extra = [w for w in wanted if w not in content_words(query)]
            return Action(first.name, {"query": " ".join([query, *extra])})
        if first.name == RECOMMEND:
            return Action(first.name, {"product_sequence": refine_sequence(
                first.arguments["product_sequence"], self.data, wanted)})
        return Action(first.name, {"review": refine_review(first.arguments["review"], wanted, replies)})

    def solve(self, env: PWABEnv, task_index: int) -> Episode:
        """Single-turn: one call. Multi-turn: call, tell the user what came of it, and refine
        with their feedback until they are satisfied (then stop), the attempts run out, or
        the step limit ends the episode."""
        observation, info = env.reset(task_index)
        episode = Episode(traj=[{"role": "system", "content": SYSTEM_PROMPT},
                                {"role": "user", "content": observation}])
        first = action = self.decide(env, info["task"])
        replies: list[str] = []
        while True:
            observation, done = self._step(env, episode, action)
            if done:
                return episode
            if not self.use_feedback or len(env.attempts) >= self.max_attempts:
                break
            reply, done = self._step(env, episode, Action(RESPOND, {"content": report(action, observation,
                                                                                       self.data.products)}))
            if done:
                return episode
            if satisfied(reply):
                break
            replies.append(reply)
            action = self.refine(first, replies)
        self._step(env, episode, Action(STOP))
        return episode

    def _step(self, env: PWABEnv, episode: Episode, action: Action) -> tuple[str, bool]:
        episode.usage.add_call()
        episode.record_action(action)
        observation, _, done, _ = env.step(action)
        if action.name == RESPOND:
            episode.record_message("assistant", action.arguments["content"])
            episode.record_message("user", observation)
        else:
            episode.record_tool_call(action, observation)
        return observation, done


def build(data: BenchmarkData, config: Any) -> HeuristicAgent:
    """The `heuristic` strategy for a run (the registry's factory)."""
    return HeuristicAgent(data, config.agent_memory, config.memory_length, config.seed,
                          run_random_memory(data, config), memory_tokens=config.memory_tokens)
