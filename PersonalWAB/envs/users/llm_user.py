"""`--user_mode naive`: a language model plays the user (any litellm model)."""

from __future__ import annotations

from typing import Any

from PersonalWAB.envs.user import STOP_TOKEN, UserSimulator
from PersonalWAB.envs.users.persona import key_features, persona_text, price_band, product_kind

USER_PROMPT = """You are role-playing a shopper who is talking to a shopping assistant on a website. \
Stay in character; never say you are an AI or a simulator.

About you:
{persona}

What you came for ({kind} task): "{instruction}"
{goal}

How to behave:
- Your first message has already been sent (it is the request above). From now on, write one short line per turn, \
as this person would.
- Answer the assistant's questions from what you know about yourself and what you want; do not volunteer \
everything at once.
- When the assistant shows you results, judge them against what you want. If they are not right, say what is \
wrong or missing (the brand, the price, a feature, the kind of product), without naming the exact product.
- Never write the product's ID or ASIN, never paste its full title, and never quote your own review word for word.
- When you are satisfied, or when it is clear the assistant cannot help, end the conversation by writing \
{stop} on its own at the end of your line."""

TARGET_FACTS = """- Kind of product: {kind}
- Brand / store: {store}
- Price: {price}
- Notable features: {features}
- What it is, roughly: {title}
"""
SEARCH_GOAL = ("The product you have in mind (keep the details to yourself and reveal them only bit by bit, "
               "as a real shopper would):\n" + TARGET_FACTS
               + "You are satisfied when it appears among the first three results.")
RECOMMEND_GOAL = ("You want suggestions that match your taste. Secretly, the item you would actually pick next is:\n"
                  + TARGET_FACTS + "You are satisfied when it appears among the first three suggestions.")
REVIEW_GOAL = """You want the assistant to write and post a review of a product you bought:
- Product: {title} (brand / store: {store})
- The review you would write yourself, rating {rating} out of 5 (for your eyes only; guide the assistant \
towards its content and tone, but never copy it):
\"\"\"{review}\"\"\"
You are satisfied when the posted review says roughly what you would say, in your tone."""


def build_user_prompt(task: dict[str, Any], profile: dict[str, str]) -> str:
    product = task["target"]["product_info"]
    review = task["target"].get("review") or {}
    values = {
        "kind": product_kind(product),
        "store": product.get("store") or "no particular one",
        "price": price_band(product.get("price")) or "not important",
        "features": ", ".join(key_features(product)) or "none in particular",
        "title": product.get("title", ""),
        "rating": review.get("rating", ""),
        "review": review.get("text", ""),
    }
    goal = {"search": SEARCH_GOAL, "recommend": RECOMMEND_GOAL, "review": REVIEW_GOAL}[task["type"]].format(**values)
    return USER_PROMPT.format(persona=persona_text(profile), kind=task["type"], instruction=task["task"],
                              goal=goal, stop=STOP_TOKEN)


class LLMUser(UserSimulator):
    """Opens with the task's instruction, then answers through the model, one line per turn."""

    def __init__(self, model: str, api_base: str | None = None, temperature: float = 0.0, max_retries: int = 5):
        from PersonalWAB.llm import LLMClient

        self.client = LLMClient(model, api_base=api_base, temperature=temperature, max_retries=max_retries)
        self.messages: list[dict[str, str]] = []
        self.cost = 0.0

    def reset(self, task: dict[str, Any], profile: dict[str, str]) -> str:
        # Roles are mirrored: the simulated user speaks as "assistant", the agent as "user".
        self.messages = [{"role": "system", "content": build_user_prompt(task, profile)},
                         {"role": "assistant", "content": task["task"]}]
        return task["task"]

    def reply(self, agent_message: str) -> str:
        self.messages.append({"role": "user", "content": agent_message})
        reply = self.client.complete(self.messages)
        self.cost += reply.prompt_price + reply.completion_price
        text = (reply.message.get("content") or "").strip()
        if not text:
            text = STOP_TOKEN
        self.messages.append({"role": "assistant", "content": text})
        return text
