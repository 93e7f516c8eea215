"""A scripted model for the construction pipeline and its consistency judge.

It reads the pipeline's own prompts (`PersonalWAB.construct.prompts`) and answers them
the way a careful, terse model would, deterministically: profiles inferred from the
history lines (stores bought most, areas, price level, review habits; gender, age and
occupation, which a history barely shows, are guessed from a hash of it), instructions
written from the target product and the profile, and judge answers chosen by how much of
the profile's brands and interests a candidate shows. Tests, the smoke script and the
cost measurements run the whole pipeline against it through the scripted HTTP server.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from statistics import mean, median
from typing import Any

from PersonalWAB.construct import prompts
from devtools.doubles.scripted_server import ScriptedReply

_LINE = re.compile(r"^- (\d{4}-\d{2}-\d{2}) \| (.*) \| category: (.*?) \| store: (.*?) \| price: (.*?) \| "
                   r"rated ([\d.]+)/5 \| review: (.*)$")
_PRODUCT = re.compile(r"^\[(\d+)\] (.*) \| category: (.*?) \| store: (.*?) \| price: (.*?)$")
_WORD = re.compile(r"[a-z0-9]+")
_ASPECTS = {"Quality": ("quality", "well made", "sturdy"), "Price": ("price", "cheap", "expensive", "money"),
            "Value": ("value", "worth"), "Durability": ("durable", "lasted", "last", "broke"),
            "Comfort": ("comfort", "comfortable", "soft"), "Design": ("design", "look", "looks", "color"),
            "Ease of use": ("easy", "simple", "setup"), "Size and fit": ("fit", "size", "fits"),
            "Performance": ("performance", "works", "fast", "powerful"), "Taste": ("taste", "flavor", "delicious")}
_OCCUPATIONS = ("Teacher", "Nurse", "Software engineer", "Accountant", "Student", "Project manager", "Writer",
                "Retail associate", "Small business owner", "Researcher", "Chef", "Retired")
_AGES = (("18-24", 8), ("25-34", 38), ("35-44", 34), ("45-54", 13), ("55-64", 7))
_STOP = frozenset("a an and the of for with to in on my i me is it this that from by at or".split())


def _hash(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()[:8], "big")


def _weighted(seed: int, options: tuple[tuple[str, int], ...]) -> str:
    point = seed % sum(w for _, w in options)
    for value, weight in options:
        if point < weight:
            return value
        point -= weight
    return options[-1][0]


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _price(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _history(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            date, title, category, store, price, rating, review = match.groups()
            out.append({"title": title, "category": category, "store": store, "price": _price(price),
                        "rating": float(rating), "review": review})
    return out


def _fields(text: str) -> dict[str, str]:
    """`Name: value` lines (a profile block, a product block)."""
    out = {}
    for line in text.splitlines():
        name, sep, value = line.partition(": ")
        if sep and name and not name.startswith(("-", "[")):
            out.setdefault(name.strip(), value.strip())
    return out


def _level(value: float, low: float, high: float, names: tuple[str, str, str]) -> str:
    return names[0] if value < low else names[2] if value > high else names[1]


def profile_answer(history_text: str) -> str:
    """A profile inferred from the history lines."""
    items = _history(history_text)
    if not items:
        return "I cannot tell anything from an empty history."
    seed = _hash(history_text)
    stores = [s for s, _ in Counter(i["store"] for i in items if i["store"]).most_common(5)]
    areas = Counter(i["category"].split(" > ")[1] if " > " in i["category"] else i["category"].split(" / ")[0]
                    for i in items)
    prices = [i["price"] for i in items if i["price"] is not None]
    review_words = mean(len(i["review"].split()) for i in items)
    brand_mentions = mean(any(w in i["review"].lower() for w in i["store"].lower().split()) for i in items
                          if i["store"])
    found = Counter({aspect: sum(any(k in i["review"].lower() for k in keys) for i in items)
                     for aspect, keys in _ASPECTS.items()})
    aspects = [a for a, n in sorted(found.items(), key=lambda x: (-x[1], x[0])) if n][:3] or ["Quality", "Value"]
    rating = mean(i["rating"] for i in items)
    tone = "Warm and enthusiastic" if rating >= 4.3 else "Critical and direct" if rating <= 3.2 else \
        "Balanced and practical"
    profile = {
        "Gender": "Female" if seed % 100 < 80 else "Male",
        "Age": _weighted(seed // 100, _AGES),
        "Occupation": _OCCUPATIONS[(seed // 10_000) % len(_OCCUPATIONS)],
        "Price Sensitivity": _level(median(prices) if prices else 30.0, 20.0, 60.0, ("High", "Medium", "Low")),
        "Shopping Interest": ", ".join(a for a, _ in areas.most_common(3)),
        "Brand Preference": ", ".join(stores),
        "Diversity Preference": _level(len({i["store"] for i in items}) / len(items), 0.35, 0.6,
                                       ("Low", "Medium", "High")),
        "Interaction Complexity": _level(review_words, 30, 55, ("Low", "Medium", "High")),
        "Tone and Style": tone + (", detailed" if review_words > 55 else ""),
        "Item Reference": ("Names brands and product lines in reviews" if brand_mentions > 0.3
                           else "Refers to products by type and use"),
        "Focus Aspect": ", ".join(aspects),
    }
    return json.dumps(profile)


def _short_title(title: str, store: str) -> str:
    head = title.split(",")[0]
    return head[len(store):].strip() if store and head.startswith(store) else head


def instruction_answer(prompt: str, variant: int) -> str:
    """A request written from the target product and the profile; `variant` > 0 after a
    'this request is taken' reply, each one more specific."""
    task_type = next(t for t, text in prompts.TASK_TEXT.items() if prompt.startswith(text))
    profile_part, _, rest = prompt.partition("Target product:\n")
    profile = _fields(profile_part)
    product = _fields(rest.split("\n\n")[0])
    title, store = product.get("Title", "this product"), product.get("Store", "")
    path = product.get("Category", "").split(" / ")[-1].split(" > ")
    leaf, area = path[-1].lower(), (path[1] if len(path) > 1 else path[0]).lower()
    seed = _hash(prompt)
    pick = lambda options, salt=0: options[(seed // (7 ** salt) + variant) % len(options)]  # noqa: E731
    detailed = profile.get("Interaction Complexity") == "High"
    aspect = (profile.get("Focus Aspect") or "Quality").split(",")[0].strip()
    if task_type == "search":
        name = _short_title(title, store).lower()
        extra = title.split(",")[1].strip().lower() if "," in title else ""
        text = f"{pick(('I am looking for', 'Can you find me', 'Help me find', 'I need'))} {name}"
        if extra and variant % 2 == 0:
            text += f", ideally {extra}"
        budget = {"High": "at a price that does not stretch my budget", "Low": "where quality comes before price"}
        text += f", {pick(('from a brand I already trust', 'in the style I tend to go for'), 1)}"
        text += f" {budget.get(profile.get('Price Sensitivity', ''), 'at a sensible price')}."
        if detailed or variant > 1:
            text += f" It is for my {leaf}."
    elif task_type == "recommend":
        text = pick((f"Can you recommend something for my {area} based on what I have bought before?",
                     f"What would you suggest for my {area} next, going by my previous purchases?",
                     f"Please recommend a new {leaf} item that fits my shopping history.",
                     "Surprise me with a recommendation that matches my taste.",
                     f"Any ideas for {area} that would suit me?",
                     f"Recommend me something new in {leaf}, in line with my recent orders.",
                     "What should I get next? Go by what I have liked so far.",
                     f"Suggest a {leaf} product I would probably pick myself."))
        text += " " + pick(("Keep it close to what I usually like.", "Something I would actually use.",
                            "Nothing too far from my usual picks.", "I trust your judgment on this one.",
                            "No rush, just curious.", "Something practical would be great.",
                            f"{aspect} matters most to me.", f"I care a lot about {aspect.lower()}.",
                            f"It should be good on {aspect.lower()}."), 2)
        text += " " + pick(("", "Thanks!", "Happy to try something new.", "Nothing fancy.",
                            "Something for everyday use.", "I am open to ideas.", "Quality over quantity."), 3)
        if detailed or variant > 1:
            text += f" I am mostly shopping for {leaf} these days."
    else:
        rating = float(re.search(r"They rated it ([\d.]+) out of 5", prompt).group(1))
        feeling = pick(("I really liked it.", "I am very happy with it.", "It turned out great.")) if rating >= 4 \
            else pick(("It let me down.", "I am not happy with it.", "It disappointed me.")) if rating <= 2 \
            else pick(("It was just okay.", "It is fine, nothing special.", "Mixed feelings about it."))
        name = _short_title(title, store)
        text = pick((f"Please write a review of the {name} from {store} I bought.",
                     f"Help me write a review for my {store} {leaf}.",
                     f"Could you post a review of the {name} I got?",
                     f"I want to leave a review for the {name}."), 1) + " " + feeling
        text += " " + pick(("", "Keep it short.", "Make it sound like me.",
                            f"Say something about the {aspect.lower()}.", f"Mention how it worked for my {area}."), 2)
    if variant > 2:
        text += f" ({title.split(',')[-1].strip()})"
    return " ".join(text.split())


def _profile_parts(prompt: str) -> tuple[set[str], set[str]]:
    profile = _fields(prompt.split("\n\n")[0])
    brands = {b.strip().lower() for b in profile.get("Brand Preference", "").split(",") if b.strip()}
    return brands, _words(profile.get("Shopping Interest", ""))


def match_answer(prompt: str) -> str:
    """The history sharing most stores (then interest words) with the profile."""
    brands, interests = _profile_parts(prompt)
    scores = []
    for block in prompt.split("\n\n")[1:]:
        if block.startswith("History "):
            items = _history(block)
            scores.append(sum(2 * (i["store"].lower() in brands) + len(_words(i["category"]) & interests)
                              for i in items))
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    return prompts.option_letter(best)


def rank_answer(prompt: str) -> str:
    """Products ordered by store and interest overlap with the profile (ties: shown order)."""
    brands, interests = _profile_parts(prompt)
    scored = []
    for line in prompt.splitlines():
        match = _PRODUCT.match(line)
        if match:
            number, _, category, store, _ = match.groups()
            scored.append((-(2 * (store.lower() in brands) + len(_words(category) & interests)), int(number)))
    return ", ".join(str(number) for _, number in sorted(scored))


def respond(request: dict[str, Any]) -> ScriptedReply:
    """Dispatch on the system prompt of the pipeline's and the judge's requests."""
    messages = request["messages"]
    system, first = messages[0]["content"], messages[1]["content"]
    if system == prompts.PROFILE_SYSTEM:
        history_text = first.split(":\n", 1)[1] if ":\n" in first else first
        return ScriptedReply(content=profile_answer(history_text))
    if system == prompts.INSTRUCTION_SYSTEM:
        variant = sum(m["role"] == "user" and m["content"] == prompts.INSTRUCTION_DUPLICATE for m in messages)
        return ScriptedReply(content=instruction_answer(first, variant))
    if system == prompts.MATCH_SYSTEM:
        return ScriptedReply(content=match_answer(first))
    if system == prompts.RANK_SYSTEM:
        return ScriptedReply(content=rank_answer(first))
    return ScriptedReply(status=400, content="the construction responder does not know this prompt")
