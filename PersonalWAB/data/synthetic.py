"""Deterministic synthetic PersonalWAB, written in exactly the official file layout.

The official data cannot be downloaded on every machine, so tests, benchmarks and the
offline quick start run on this generator's output instead. It is built to carry the
same kind of personalization signal as the real benchmark: every user has latent
category interests, loyal stores, a price band, favourite product types and a reviewing
voice, and these show in their history. Search instructions leave the store and the
budget implicit, recommendation requests are vague and review requests only name the
product, so an agent that reads the user's history does measurably better than one
that does not. A few product lines, bought in order by many users, make the next purchase
depend on the last one, so a sequential recommender fed recent history beats popularity.

Pipeline: stores (price tier, appeal, product types) -> users (latent traits, loyal
stores, profile) -> a catalogue stocked per store shelf in proportion to the users'
expected demand, so that (as in the real data) most purchases are of distinct products
while a small head of bestsellers recurs across users -> product lines -> time-ordered
histories split 80/10/10 -> exactly the planned number of tasks of each type per split.

Everything is driven by `random.Random` instances seeded from strings (stable across
processes and PYTHONHASHSEED values); no set or hash order is ever iterated and no
clock is read, so the same seed and scale give byte-identical files.

Numbers measured on this data are not comparable to the paper's.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from PersonalWAB.outputs import FOLDER, parse_command
from PersonalWAB.data import amazon_raw
from PersonalWAB.data import synthetic_vocab as vocab
from PersonalWAB.data.layout import json_bytes, official_files, write_atomic, write_files
from PersonalWAB.data.loader import INSTRUCTIONS_FILE
from PersonalWAB.data.schema import TASK_TYPES
from PersonalWAB.errors import DataError
from PersonalWAB.paths import OFFICIAL_DATA_DIR, SYNTHETIC_MANIFEST, ArtifactPaths, remove_derived_artifacts
from PersonalWAB.settings import setting

GENERATOR_VERSION = "1.2"  # 1.1: null store / main_category in a few products; 1.2: product lines
LAYOUTS = ("official", "raw")
NOTE = "synthetic data; numbers are not comparable to the paper"

_FIRST_MS = int(dt.datetime(2018, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
_LAST_MS = int(dt.datetime(2023, 12, 31, 23, 59, tzinfo=dt.UTC).timestamp() * 1000)
_DAY_MS = 86_400_000
_ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_ACRONYMS = ("usb", "gan", "pd", "led", "rgb", "pbt", "gps", "amoled", "hd", "spf", "iu", "cfu", "lcd", "eva",
             "rfid", "bpa", "pfoa", "gsm", "vpm", "umf", "uv400", "ipx7", "2k", "4k", "1080p", "9h", "pps", "aux",
             "gmo", "sd")

# Behaviour model. Probabilities are per behaviour unless noted.
_POPULARITY_EXPONENT = 0.9  # Zipf exponent of product popularity (rating counts, draws)
_DRAW_POPULARITY = 0.5  # how strongly popularity steers a user's choice inside a pool
_REPEAT_FACTOR = 0.05  # weight factor per earlier purchase of a (non-bestseller) product by anyone
_BESTSELLER_SHARE = 0.001  # the most popular products (at least one), bought again and again across
# users; few, to leave the product lines most of the repeats that target-side distinctness allows
_STOCK_BASELINE = 0.03  # share of the stock not driven by demand
_STORE_POPULARITY_EXPONENT = 0.4  # Zipf exponent of store size and appeal
_LOYAL_DECAY = 0.35  # weight ratio between a user's n-th and (n+1)-th loyal store
_COMPLEMENT_PROB = 0.2  # follow the previous purchase with its natural companion
_FAVOURITE_TYPE_WEIGHT = 5.0
_TIER_WIDTH = 0.28  # how far from their price band users still shop at a store
_BAND_WIDTH = 0.12  # tolerance of a user's price band for a product, in relative price position
_TASTE_BOOST = 2.0  # extra weight per preferred attribute a product has
_TIERS = ((0.2, 0.35), (0.5, 0.45), (0.82, 0.2))  # (price position, share) of budget/mid/premium stores
# Product lines: short ordered series of one store's products (a starter, then its add-ons and
# upgrades) that many users buy in the same order, so the next purchase depends on the last one
# and a sequential recommender can learn it. Lines are few and each is shared by many users,
# and line purchases are kept rare enough that target-side products stay mostly distinct, as in
# the real data (how many lines there are and how often a purchase starts one is set per scale).
_LINE_LENGTH = (5, 8)  # products per line, inclusive
_LINE_CONTINUE_PROB = 0.9  # the purchase after a line's product is the line's next product
_LINE_LOYAL_BOOST = 4.0  # a line of one of the user's loyal stores is this much likelier to be started
# Null product fields, as Amazon Reviews 2023 metadata has them (the loader's schema lists which
# fields may be null). The rates are estimates, not measured on the official files (not readable
# here): a listing without a named shop is uncommon but not rare, so `store` is null in ~3%; one
# without a top-level department is rarer, so `main_category` is null in ~1%. That is enough for
# every scale down to `tiny` to hold some of each, in histories and task targets alike. The other
# fields the schema lets be null are lists or numbers that the metadata writes as `[]` or a
# value, so the generator never leaves them null. The draws come from their own seeded stream
# after the catalogue is built, so the rest of the world is the same as without them; the store's
# name still shows in the title and details' "Brand".
_NULL_STORE_RATE = 0.03
_NULL_MAIN_CATEGORY_RATE = 0.01

# Instruction model.
_EXPLICIT_STORE_PROB = 0.2
_TWO_DESCRIPTORS_PROB = 0.7
_VALUE_MENTION_PROB = 0.5
_PRICE_HINT_PROB = 0.35
# Preference of each task type for target behaviours, by how the behaviour was chosen.
_SEARCH_WEIGHTS = {0: 1.0, 1: 0.45, 2: 0.3, 3: 0.3, "interest": 0.06, "explore": 0.03}
_RECOMMEND_WEIGHTS = {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0, "interest": 0.35, "explore": 0.1}


@dataclass(frozen=True)
class SyntheticScale:
    """How much to generate. `full` matches the published PersonalWAB statistics."""

    users: int
    users_with_train: int
    products: int
    behaviours: int
    train_mix: tuple[int, int, int]  # search, recommend, review
    test_mix: tuple[int, int, int]
    stores_per_category: int
    descriptors_per_type: int  # a smaller catalogue draws from fewer distinct attributes
    # Product lines and the probability that a purchase starts one. The start rate is higher in
    # smaller worlds: a recommender trained on 100 users needs a stronger pattern than one trained
    # on 1,000, while `full` keeps its target-side products about as distinct as the published data's.
    # `tiny` (16 users, too few to learn a line from) has none.
    product_lines: int
    line_start: float

    @property
    def train_tasks(self) -> int:
        return sum(self.train_mix)

    @property
    def test_tasks(self) -> int:
        return sum(self.test_mix)


SCALES: dict[str, SyntheticScale] = {
    "tiny": SyntheticScale(users=16, users_with_train=15, products=500, behaviours=640, train_mix=(32, 33, 31),
                           test_mix=(13, 14, 13), stores_per_category=8, descriptors_per_type=5,
                           product_lines=0, line_start=0.0),
    "small": SyntheticScale(users=100, users_with_train=94, products=3_577, behaviours=4_060,
                            train_mix=(220, 240, 230), test_mix=(69, 76, 72), stores_per_category=20,
                            descriptors_per_type=5, product_lines=20, line_start=0.08),
    "medium": SyntheticScale(users=300, users_with_train=282, products=10_731, behaviours=12_180,
                             train_mix=(660, 720, 690), test_mix=(208, 227, 217), stores_per_category=35,
                             descriptors_per_type=7, product_lines=20, line_start=0.03),
    "full": SyntheticScale(users=1_000, users_with_train=939, products=35_772, behaviours=40_600,
                           train_mix=(2_200, 2_401, 2_295), test_mix=(694, 757, 723), stores_per_category=60,
                           descriptors_per_type=10, product_lines=20, line_start=0.013),
}


# ------------------------------------------------------------------ internal model


@dataclass
class _Store:
    name: str
    category: int
    tier: float  # price position of the store's range, 0 = cheapest
    weight: float  # size and general appeal
    types: list[int]


@dataclass
class _Market:
    """The stores of every category; products are stocked once demand is known."""

    stores: list[_Store]
    by_category: list[list[int]]


@dataclass
class _Item:
    category: int
    type: int
    store: int
    noun: str
    descriptors: tuple[str, ...]
    value: str
    price_pos: float
    quality: float
    appeal: float = 0.0  # draw weight from popularity
    bestseller: bool = False
    product: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Catalogue:
    market: _Market
    items: list[_Item]
    by_store_type: dict[tuple[int, int], list[int]]
    by_store: dict[int, list[int]]
    by_category: list[list[int]]
    complements: dict[tuple[int, int], int]
    bought: list[int]  # purchases of each item so far, across users
    lines: list[list[int]] = field(default_factory=list)  # product lines, items in buying order
    line_of: dict[int, tuple[int, int]] = field(default_factory=dict)  # item -> (line, position)


@dataclass
class _User:
    user_id: str
    interests: list[int]
    category_probs: list[float]
    loyal: dict[int, list[int]]
    store_options: list[tuple[list[int], list[float]]]  # per category: stores, purchase probabilities
    type_pref: dict[int, dict[int, float]]
    taste: dict[tuple[int, int], tuple[str, ...]]
    price_pos: float
    tone: vocab.Tone
    signatures: list[str]
    mean_rating: float
    aspects: list[str]
    names_brands: bool
    complexity: str
    profile: dict[str, str] = field(default_factory=dict)


@dataclass
class _Behaviour:
    item: int
    origin: int | str  # loyal-store rank, "interest" or "explore": how the store was chosen
    review: dict[str, Any]
    split: str = "history"


# ------------------------------------------------------------------ small helpers


def _rng(seed: int, *labels: object) -> random.Random:
    """An independent stream per stage, so changing one stage never reshuffles another."""
    return random.Random(":".join(str(part) for part in (seed, *labels)))


def _pick(rng: random.Random, options: Sequence[Any], weights: list[float]) -> Any:
    return rng.choices(options, weights=weights, k=1)[0]


def _clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))


def _apportion(total: int, weights: list[float]) -> list[int]:
    """Split `total` into integers proportional to `weights` (largest remainder)."""
    scale = total / sum(weights)
    raw = [w * scale for w in weights]
    counts = [int(r) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: (counts[i] - raw[i], i))
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    return counts


def _weighted_sample(rng: random.Random, options: list[Any], weights: list[float], k: int) -> list[Any]:
    """k distinct options, each drawn with probability proportional to its weight."""
    keys = [math.log(rng.random() or 1e-300) / w for w in weights]
    order = sorted(range(len(options)), key=lambda i: (-keys[i], i))
    return [options[i] for i in order[:k]]


def _band_fit(position: float, band: float, width: float = _BAND_WIDTH) -> float:
    return math.exp(-(((position - band) / width) ** 2))


def _title_word(word: str) -> str:
    head = word.split("-")[0]
    if head in _ACRONYMS or word in _ACRONYMS:
        return word.upper()
    return word[:1].upper() + word[1:]


def _title(phrase: str) -> str:
    return " ".join(_title_word(w) for w in phrase.split())


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _join(parts: list[str]) -> str:
    """Join phrase pieces with spaces, keeping punctuation-led pieces attached."""
    text = ""
    for part in parts:
        if not part:
            continue
        text = f"{text}{part}" if part[0] in ",;" or not text else f"{text} {part}"
    return text


def _random_id(rng: random.Random, prefix: str, length: int, taken: set[str]) -> str:
    while True:
        candidate = prefix + "".join(rng.choice(_ID_CHARS) for _ in range(length))
        if candidate not in taken:
            taken.add(candidate)
            return candidate


# ------------------------------------------------------------------ stores


def _reserved_words() -> set[str]:
    """Words of the product vocabulary, kept out of store names so a store name is a
    token of its own for a search engine (a membership set only, never iterated)."""
    words: set[str] = set()
    for category in vocab.CATEGORIES:
        for ptype in category.types:
            for phrase in (*ptype.nouns, *ptype.descriptors, *ptype.values, ptype.name, *ptype.uses):
                words.update(phrase.lower().split())
    return words


def _store_name(rng: random.Random, suffixes: tuple[str, ...], taken: set[str], reserved: set[str]) -> str:
    while True:
        stem = rng.choice(vocab.STORE_ONSETS) + rng.choice(vocab.STORE_VOWELS) + rng.choice(vocab.STORE_CODAS)
        if rng.random() < 0.6:
            stem += rng.choice(vocab.STORE_ONSETS).lower() + rng.choice(vocab.STORE_VOWELS)
            stem += rng.choice(("", "", "n", "x", "s", "r"))
        key = stem.lower()
        if len(key) < 4 or key in taken or key in reserved:
            continue
        taken.add(key)
        style = rng.random()
        if style < 0.2 and len(stem) <= 7:
            return stem.upper()
        if style < 0.5:
            return f"{stem} {rng.choice(suffixes)}"
        return stem


def _make_market(seed: int, scale: SyntheticScale) -> _Market:
    """Stores per category, each with a price tier, an appeal and a few product types."""
    rng = _rng(seed, "stores")
    reserved = _reserved_words()
    taken: set[str] = set()
    stores: list[_Store] = []
    by_category: list[list[int]] = []
    for c, category in enumerate(vocab.CATEGORIES):
        n_types = len(category.types)
        count = max(4, round(scale.stores_per_category * rng.uniform(0.8, 1.2)))
        ranks = list(range(1, count + 1))
        rng.shuffle(ranks)
        members: list[int] = []
        for rank in ranks:
            tier = _pick(rng, [t for t, _ in _TIERS], [s for _, s in _TIERS])
            k = max(2, min(n_types, round(n_types * rng.uniform(0.2, 0.45))))
            members.append(len(stores))
            stores.append(_Store(_store_name(rng, category.suffixes, taken, reserved), c, tier,
                                 1.0 / rank**_STORE_POPULARITY_EXPONENT, sorted(rng.sample(range(n_types), k))))
        for t in range(n_types):  # every type needs a seller
            if not any(t in stores[s].types for s in members):
                owner = stores[rng.choice(members)]
                owner.types = sorted([*owner.types, t])
        by_category.append(members)
    return _Market(stores, by_category)


# ------------------------------------------------------------------ users


def _level(rng: random.Random) -> str:
    return _pick(rng, ["Low", "Medium", "High"], [0.1, 0.8, 0.1])


def _store_options(market: _Market, category: int, loyal: list[int], loyal_weights: list[float], loyalty: float,
                   price_pos: float) -> tuple[list[int], list[float]]:
    """Where a user buys in one category: loyal stores with probability `loyalty`,
    otherwise any store, by its appeal and how well its tier fits the user's budget."""
    candidates = market.by_category[category]
    appeal = [market.stores[s].weight * _band_fit(market.stores[s].tier, price_pos, _TIER_WIDTH) + 1e-6
              for s in candidates]
    open_share = ((1.0 - loyalty) if loyal else 1.0) / sum(appeal)
    probs = [open_share * a for a in appeal]
    for s, w in zip(loyal, loyal_weights):
        probs[candidates.index(s)] += loyalty * w / sum(loyal_weights)
    return candidates, probs


def _make_user(seed: int, index: int, market: _Market, scale: SyntheticScale, taken_ids: set[str]) -> _User:
    """Latent traits of one user; the profile is written from the same traits."""
    rng = _rng(seed, "user", index)
    sensitivity, diversity, complexity = _level(rng), _level(rng), _level(rng)
    price_pos = {"High": rng.uniform(0.05, 0.3), "Medium": rng.uniform(0.25, 0.75),
                 "Low": rng.uniform(0.65, 0.95)}[sensitivity]
    n_interests = {"Low": _pick(rng, [1, 2], [0.7, 0.3]), "Medium": _pick(rng, [1, 2, 3], [0.3, 0.5, 0.2]),
                   "High": _pick(rng, [2, 3], [0.4, 0.6])}[diversity]
    exploration = {"Low": 0.08, "Medium": 0.15, "High": 0.25}[diversity]
    loyalty = {"Low": 0.8, "Medium": 0.72, "High": 0.62}[diversity]
    n_categories = len(vocab.CATEGORIES)
    interests = rng.sample(range(n_categories), n_interests)
    interest_weights = sorted((rng.uniform(0.5, 1.0) for _ in interests), reverse=True)
    category_probs = [exploration / n_categories] * n_categories
    for c, w in zip(interests, interest_weights):
        category_probs[c] += (1.0 - exploration) * w / sum(interest_weights)

    loyal: dict[int, list[int]] = {}
    loyal_weights: dict[int, list[float]] = {}
    type_pref: dict[int, dict[int, float]] = {}
    taste: dict[tuple[int, int], tuple[str, ...]] = {}
    for c in interests:
        candidates = market.by_category[c]
        fit = [market.stores[s].weight * _band_fit(market.stores[s].tier, price_pos, _TIER_WIDTH) for s in candidates]
        loyal[c] = _weighted_sample(rng, candidates, fit, rng.randint(2, 4))
        loyal_weights[c] = [rng.uniform(0.7, 1.0) * _LOYAL_DECAY**rank for rank in range(len(loyal[c]))]
        carried = sorted({t for s in loyal[c] for t in market.stores[s].types})
        type_pref[c] = {t: _FAVOURITE_TYPE_WEIGHT for t in rng.sample(carried, min(len(carried), rng.randint(2, 3)))}
        for t, ptype in enumerate(vocab.CATEGORIES[c].types):
            taste[(c, t)] = tuple(rng.sample(ptype.descriptors[: scale.descriptors_per_type], 2))
    store_options = [_store_options(market, c, loyal.get(c, []), loyal_weights.get(c, []), loyalty, price_pos)
                     for c in range(n_categories)]
    user = _User(
        user_id=_random_id(rng, "A", 27, taken_ids), interests=interests, category_probs=category_probs,
        loyal=loyal, store_options=store_options, type_pref=type_pref, taste=taste, price_pos=price_pos,
        tone=rng.choice(vocab.TONES), signatures=rng.sample(vocab.SIGNATURES, rng.randint(2, 3)),
        mean_rating=_clamp(rng.gauss(4.1, 0.45), 2.6, 4.9), aspects=rng.sample(vocab.FOCUS_ASPECTS, rng.randint(2, 3)),
        names_brands=rng.random() < 0.55, complexity=complexity,
    )
    user.profile = _profile(rng, user, market, sensitivity, diversity)
    return user


def _profile(rng: random.Random, user: _User, market: _Market, sensitivity: str, diversity: str) -> dict[str, str]:
    """The 11 profile fields, consistent with the user's latent traits."""
    interest_text = []
    for c in user.interests:
        label = vocab.CATEGORIES[c].interest
        favourite = [vocab.CATEGORIES[c].types[t].name for t in user.type_pref[c]]
        interest_text.append(f"{label} ({', '.join(favourite)})" if rng.random() < 0.5 else label)
    loyal = [s for c in user.interests for s in user.loyal[c]]
    others = [s for s in range(len(market.stores)) if s not in loyal]
    brands = [market.stores[s].name for s in loyal + rng.sample(others, rng.randint(1, 4))]
    rng.shuffle(brands)
    return {
        "Gender": "Female" if rng.random() < 0.84 else "Male",
        "Age": _pick(rng, list(vocab.AGE_BUCKETS), list(vocab.AGE_WEIGHTS)),
        "Occupation": rng.choice(vocab.OCCUPATIONS),
        "Price Sensitivity": sensitivity,
        "Shopping Interest": ", ".join(interest_text),
        "Brand Preference": ", ".join(brands),
        "Diversity Preference": diversity,
        "Interaction Complexity": user.complexity,
        "Tone and Style": rng.choice(user.tone.labels),
        "Item Reference": rng.choice(vocab.ITEM_REFERENCE_BRANDS if user.names_brands else vocab.ITEM_REFERENCE_TYPES),
        "Focus Aspect": ", ".join(user.aspects),
    }


def _type_weights(user: _User, category: int, carried: list[int]) -> list[float]:
    prefs = user.type_pref.get(category, {})
    return [prefs.get(t, 1.0) for t in carried]


def _behaviour_counts(rng: random.Random, scale: SyntheticScale, minimum: int = 10) -> list[int]:
    """Per-user history lengths: at least `minimum`, long-tailed, summing to the scale's total."""
    extra_mean = scale.behaviours / scale.users - minimum
    draws = [rng.gammavariate(1.4, extra_mean / 1.4) for _ in range(scale.users)]
    extras = _apportion(scale.behaviours - minimum * scale.users, draws)
    return [minimum + e for e in extras]


# ------------------------------------------------------------------ catalogue


def _demand(users: list[_User], lengths: list[int], market: _Market) -> dict[tuple[int, int], float]:
    """Expected purchases per (store, product type) under the users' own habits; stores
    stock in proportion, so most purchases are of distinct products, as in the real data."""
    demand: dict[tuple[int, int], float] = {}
    for user, n in zip(users, lengths):
        for c, p_category in enumerate(user.category_probs):
            for s, p_store in zip(*user.store_options[c]):
                carried = market.stores[s].types
                weights = _type_weights(user, c, carried)
                scale = n * p_category * p_store / sum(weights)
                for t, w in zip(carried, weights):
                    demand[(s, t)] = demand.get((s, t), 0.0) + scale * w
    return demand


def _price(rng: random.Random, ptype: vocab.ProductType, position: float) -> float | str | None:
    """A retail-looking price; a few products have an unknown price, as in the official data."""
    roll = rng.random()
    if roll < 0.03:
        return "None"
    if roll < 0.05:
        return None
    low, high = ptype.price
    raw = low * (high / low) ** position
    return round(max(1, math.floor(raw)) + rng.choice((0.99, 0.99, 0.49, 0.95, 0.0)), 2)


def _product_dict(rng: random.Random, item: _Item, store: _Store, asin: str, rating_number: int) -> dict[str, Any]:
    """The product record in the official field order, ~100-200 words of text."""
    category = vocab.CATEGORIES[item.category]
    ptype = category.types[item.type]
    d1, d2, d3 = item.descriptors
    uses = rng.sample(ptype.uses, 2)
    fields = {"store": store.name, "noun": item.noun, "noun_lower": item.noun.lower(), "use": uses[0],
              "use2": uses[1], "d1": d1, "d2": d2, "d3": d3, "value": item.value.lower()}
    templates = rng.sample(vocab.DESCRIPTOR_FEATURES, 3)
    features = [
        _sentence(template.format(Desc=_title(d), DESC=d.upper(), desc=d, **{**fields, "use": rng.choice(ptype.uses)}))
        for template, d in zip(templates, item.descriptors)
    ]
    features += [t.format(**fields) for t in rng.sample(category.extra_features, rng.randint(0, 2))]
    description = [_sentence(rng.choice(vocab.DESCRIPTIONS_FIRST).format(**fields)) + "."]
    if rng.random() < 0.6:
        description.append(_sentence(rng.choice(vocab.DESCRIPTIONS_SECOND).format(**fields)) + ".")
    details: dict[str, Any] = {"Brand": store.name, ptype.axis: item.value}
    for key, values in rng.sample(category.details, rng.randint(1, len(category.details))):
        details[key] = rng.choice(values)
    first_available = dt.datetime(2014, 1, 1) + dt.timedelta(days=rng.randrange(8 * 365))
    details["Date First Available"] = f"{first_available:%B} {first_available.day}, {first_available.year}"
    return {
        "main_category": category.main,
        "title": f"{store.name} {_title(d1)} {item.noun}, {_title(d2)}, {item.value}",
        "average_rating": round(item.quality, 1),
        "rating_number": rating_number,
        "features": features,
        "description": description,
        "price": _price(rng, ptype, item.price_pos),
        "store": store.name,
        "categories": [category.top, ptype.mid, ptype.leaf],
        "details": details,
        "parent_asin": asin,
    }


def _title_order(descriptors: list[str], noun: str) -> tuple[str, ...]:
    """Descriptors sharing a word with the noun go last, so the title (which shows the
    first two) never reads "Microfiber Microfiber Sheets"."""
    noun_words = noun.lower().split()
    return tuple(sorted(descriptors, key=lambda d: any(w in noun_words for w in d.split())))


def _stock(rng: random.Random, scale: SyntheticScale, market: _Market,
           demand: dict[tuple[int, int], float]) -> list[_Item]:
    """Exactly `scale.products` products over every (store, type) a store carries,
    in proportion to expected demand (plus a little stock nobody in particular wants)."""
    pools = [(s, t) for members in market.by_category for s in members for t in market.stores[s].types]
    if scale.products < len(pools):
        raise DataError(f"synthetic plan: {scale.products} products cannot stock {len(pools)} store shelves")
    mean = sum(demand.values()) / len(pools)
    sizes = _apportion(scale.products - len(pools), [demand.get(p, 0.0) + _STOCK_BASELINE * mean for p in pools])
    items: list[_Item] = []
    for (s, t), size in zip(pools, sizes):
        store = market.stores[s]
        ptype = vocab.CATEGORIES[store.category].types[t]
        descriptors = ptype.descriptors[: scale.descriptors_per_type]
        for _ in range(size + 1):
            noun = rng.choice(ptype.nouns)
            items.append(_Item(
                category=store.category, type=t, store=s, noun=noun,
                descriptors=_title_order(rng.sample(descriptors, 3), noun), value=rng.choice(ptype.values),
                price_pos=_clamp(rng.gauss(store.tier, 0.12), 0.0, 1.0),
                quality=_clamp(rng.gauss(4.2 + 0.3 * (store.tier - 0.5), 0.35), 1.0, 5.0),
            ))
    return items


def _build_catalogue(seed: int, scale: SyntheticScale, market: _Market,
                     demand: dict[tuple[int, int], float]) -> _Catalogue:
    """Products with Zipf-like popularity, ASINs and text, indexed for the purchase draws."""
    rng = _rng(seed, "catalogue")
    items = _stock(rng, scale, market, demand)
    ranks = list(range(1, len(items) + 1))
    rng.shuffle(ranks)
    taken: set[str] = set()
    for item, rank in zip(items, ranks):
        popularity = 1.0 / rank**_POPULARITY_EXPONENT
        item.appeal = popularity**_DRAW_POPULARITY
        item.bestseller = rank <= max(1.0, _BESTSELLER_SHARE * len(items))
        rating_number = max(1, int(popularity * 30_000 * rng.lognormvariate(0, 0.4)) + rng.randint(0, 15))
        item.product = _product_dict(rng, item, market.stores[item.store], _random_id(rng, "B0", 8, taken),
                                     rating_number)
    items.sort(key=lambda it: it.product["parent_asin"])
    nulls = _rng(seed, "null fields")
    for item in items:
        if nulls.random() < _NULL_STORE_RATE:
            item.product["store"] = None
        if nulls.random() < _NULL_MAIN_CATEGORY_RATE:
            item.product["main_category"] = None

    by_store_type: dict[tuple[int, int], list[int]] = {}
    by_store: dict[int, list[int]] = {}
    by_category: list[list[int]] = [[] for _ in vocab.CATEGORIES]
    for i, item in enumerate(items):
        by_store_type.setdefault((item.store, item.type), []).append(i)
        by_store.setdefault(item.store, []).append(i)
        by_category[item.category].append(i)
    complements: dict[tuple[int, int], int] = {}
    for c, category in enumerate(vocab.CATEGORIES):
        names = [ptype.name for ptype in category.types]
        for t, ptype in enumerate(category.types):
            if ptype.then:
                complements[(c, t)] = names.index(ptype.then)
    return _Catalogue(market, items, by_store_type, by_store, by_category, complements, [0] * len(items))


def _make_lines(seed: int, scale: SyntheticScale, catalogue: _Catalogue, users: list[_User]) -> None:
    """Product lines, per category in proportion to the users' interest in it: each a few
    products of one store (larger stores have more lines), bestsellers left out, no product
    in two lines. Fills `catalogue.lines` and `catalogue.line_of`."""
    rng = _rng(seed, "product lines")
    market = catalogue.market
    interest = [sum(user.category_probs[c] for user in users) for c in range(len(vocab.CATEGORIES))]
    counts = _apportion(scale.product_lines, interest)
    for c, count in enumerate(counts):
        members = market.by_category[c]
        for _ in range(count):
            store = _pick(rng, members, [market.stores[s].weight for s in members])
            free = [i for i in catalogue.by_store[store]
                    if i not in catalogue.line_of and not catalogue.items[i].bestseller]
            length = rng.randint(*_LINE_LENGTH)
            if len(free) < length:
                continue
            line = rng.sample(free, length)
            for position, i in enumerate(line):
                catalogue.line_of[i] = (len(catalogue.lines), position)
            catalogue.lines.append(line)


def _line_start(rng: random.Random, user: _User, catalogue: _Catalogue, owned: set[int]) -> int | None:
    """The first product of a line in a category the user shops in (their loyal stores'
    lines and lines in their price band first), or None when none is left to start."""
    category = _pick(rng, range(len(vocab.CATEGORIES)), user.category_probs)
    loyal = user.loyal.get(category, [])
    stores = catalogue.market.stores
    lines = [line for line in catalogue.lines
             if catalogue.items[line[0]].category == category and line[0] not in owned]
    if not lines:
        return None
    weights = []
    for line in lines:
        store = catalogue.items[line[0]].store
        weights.append(stores[store].weight * (_LINE_LOYAL_BOOST if store in loyal else 1.0)
                       * (_band_fit(stores[store].tier, user.price_pos, _TIER_WIDTH) + 0.05))
    return _pick(rng, lines, weights)[0]


def _line_next(catalogue: _Catalogue, previous: int | None, owned: set[int]) -> int | None:
    """The product after `previous` in its line, unless it ends the line or is owned already."""
    if previous is None or previous not in catalogue.line_of:
        return None
    line, position = catalogue.line_of[previous]
    following = catalogue.lines[line][position + 1 : position + 2]
    return following[0] if following and following[0] not in owned else None


def _store_origin(user: _User, catalogue: _Catalogue, item: int) -> int | str:
    """How a store would have been chosen for this product: loyal rank, "interest" or "explore"."""
    product = catalogue.items[item]
    loyal = user.loyal.get(product.category, [])
    return loyal.index(product.store) if product.store in loyal else "interest" if loyal else "explore"


# ------------------------------------------------------------------ histories


def _timestamps(rng: random.Random, n: int) -> list[int]:
    """n strictly increasing millisecond timestamps inside one activity window in 2018-2023."""
    span = rng.uniform(0.35, 1.0) * (_LAST_MS - _FIRST_MS)
    start = rng.uniform(_FIRST_MS, _LAST_MS - span)
    times = sorted(int(start + rng.random() * span) for _ in range(n))
    for i in range(1, n):
        times[i] = max(times[i], times[i - 1] + rng.randint(1, _DAY_MS))
    return times


def _pick_item(rng: random.Random, user: _User, catalogue: _Catalogue, pool: list[int] | range,
               owned: set[int], fresh_only: bool) -> int | None:
    """A product of `pool` the user does not own yet, favouring popular products, the
    user's price band and preferred attributes, and (bestsellers aside) products few
    others bought, so most purchases are of distinct products as in the real data.
    `fresh_only` allows only bestsellers and products nobody bought yet."""
    bought = catalogue.bought
    options = [i for i in pool if i not in owned
               and not (fresh_only and bought[i] and not catalogue.items[i].bestseller)]
    if not options:
        return None
    weights = []
    for i in options:
        item = catalogue.items[i]
        liked = user.taste.get((item.category, item.type), ())
        weights.append(item.appeal * (_band_fit(item.price_pos, user.price_pos) + 0.02)
                       * (1.0 + _TASTE_BOOST * sum(d in liked for d in item.descriptors))
                       * (1.0 if item.bestseller else _REPEAT_FACTOR ** bought[i]))
    return _pick(rng, options, weights)


def _draw_product(rng: random.Random, user: _User, catalogue: _Catalogue, previous: _Item | None,
                  owned: set[int]) -> tuple[int, int | str]:
    """One purchase: category by interest (or exploration), store by loyalty, type by
    favourites or as the companion of the previous purchase, product by `_pick_item`,
    moving to the store's other shelves before buying what others already bought."""
    category = _pick(rng, range(len(vocab.CATEGORIES)), user.category_probs)
    store = _pick(rng, *user.store_options[category])
    loyal = user.loyal.get(category, [])
    origin: int | str = loyal.index(store) if store in loyal else "interest" if loyal else "explore"
    carried = catalogue.market.stores[store].types
    complement = catalogue.complements.get((previous.category, previous.type)) if previous else None
    if (previous is not None and complement is not None and complement in carried and previous.category == category
            and rng.random() < _COMPLEMENT_PROB):
        ptype = complement
    else:
        ptype = _pick(rng, carried, _type_weights(user, category, carried))
    shelf, store_pool = catalogue.by_store_type.get((store, ptype), []), catalogue.by_store[store]
    for pool, fresh_only in ((shelf, True), (store_pool, True), (shelf, False), (store_pool, False),
                             (catalogue.by_category[category], False), (range(len(catalogue.items)), False)):
        choice = _pick_item(rng, user, catalogue, pool, owned, fresh_only)
        if choice is not None:
            catalogue.bought[choice] += 1
            return choice, origin
    raise DataError("synthetic catalogue is smaller than a user's history; raise the product count")


def _sentiment(rating: float) -> str:
    return "pos" if rating >= 4 else "mid" if rating >= 3 else "neg"


def _review(rng: random.Random, user: _User, item: _Item, store_name: str, timestamp: int) -> dict[str, Any]:
    """The user's rating and review of one purchase: the rating sits around the user's
    mean, moved by the product's quality; the text is 2-5 sentences in the user's voice
    (opener, a feature, focus aspects, maybe the brand and a signature phrase, a closer)."""
    rating = float(int(_clamp(round(rng.gauss(user.mean_rating + 0.6 * (item.quality - 4.2), 0.75)), 1, 5)))
    mood = _sentiment(rating)
    ptype = vocab.CATEGORIES[item.category].types[item.type]
    name = ptype.single
    desc = rng.choice(item.descriptors)
    opener = rng.choice(user.tone.openers[mood]).format(name=name)
    remark = rng.choice(vocab.FEATURE_REMARKS[mood]).format(desc=desc, Desc=_sentence(desc),
                                                             use=rng.choice(ptype.uses))
    optional = [vocab.ASPECT_SENTENCES[a][("pos", "mid", "neg").index(mood)] for a in user.aspects]
    if user.names_brands and rng.random() < 0.6:
        optional.append(rng.choice(vocab.BRAND_REMARKS[mood]).format(store=store_name))
    if rng.random() < 0.7:
        optional.append(rng.choice(user.signatures))
    optional.append(rng.choice(user.tone.closers[mood]))
    low, high = user.tone.length
    room = rng.randint(low, high) - 2
    if len(optional) > room:
        keep = sorted(rng.sample(range(len(optional)), room))
        optional = [optional[i] for i in keep]
    text = " ".join([opener, remark, *optional])
    title = rng.choice(vocab.REVIEW_TITLES[mood]).format(name=name)
    return {"rating": rating, "title": title, "text": text, "parent_asin": item.product["parent_asin"],
            "timestamp": timestamp}


def _history(seed: int, index: int, user: _User, catalogue: _Catalogue, n: int,
             line_start: float) -> list[_Behaviour]:
    """A user's behaviours in time order, with the 80/10/10 history/train/test split: each
    purchase continues the line of the previous one (when it has a next product) with
    probability `_LINE_CONTINUE_PROB`, else starts a line with probability
    `line_start`, else is a free choice (`_draw_product`)."""
    rng = _rng(seed, "history", index)
    owned: set[int] = set()
    previous: int | None = None
    behaviours: list[_Behaviour] = []
    for timestamp in _timestamps(rng, n):
        line_item = _line_next(catalogue, previous, owned)
        if line_item is None or rng.random() >= _LINE_CONTINUE_PROB:
            line_item = _line_start(rng, user, catalogue, owned) if line_start and rng.random() < line_start else None
        if line_item is not None:
            choice, origin = line_item, _store_origin(user, catalogue, line_item)
            catalogue.bought[choice] += 1
        else:
            last = catalogue.items[previous] if previous is not None else None
            choice, origin = _draw_product(rng, user, catalogue, last, owned)
        owned.add(choice)
        previous = choice
        item = catalogue.items[choice]
        review = _review(rng, user, item, catalogue.market.stores[item.store].name, timestamp)
        behaviours.append(_Behaviour(choice, origin, review))
    for i, behaviour in enumerate(behaviours):  # first 80% history, next 10% train, last 10% test
        behaviour.split = "history" if i < n * 8 // 10 else "train" if i < n * 9 // 10 else "test"
    return behaviours


# ------------------------------------------------------------------ tasks


def _slot_weight(task_type: str, behaviour: _Behaviour) -> float:
    """Search targets come mostly from loyal stores (so the user's usual store is worth
    knowing) and recommendation targets follow the user's habits; reviews are uniform."""
    if task_type == "search":
        return _SEARCH_WEIGHTS[behaviour.origin]
    if task_type == "recommend":
        return _RECOMMEND_WEIGHTS[behaviour.origin]
    return 1.0


def _allocate(rng: random.Random, histories: list[list[_Behaviour]], eligible: list[int], split: str,
              mix: tuple[int, int, int]) -> list[tuple[int, int, str]]:
    """Exactly `mix` targets per type among the split's behaviours: every eligible user
    gets at least one task, and a behaviour carries at most one task of each type."""
    remaining = dict(zip(TASK_TYPES, mix))
    if len(eligible) > sum(mix):
        raise DataError(f"synthetic plan: {len(eligible)} users need a {split} task but only {sum(mix)} exist")
    positions = {u: [i for i, b in enumerate(histories[u]) if b.split == split] for u in eligible}
    chosen: list[tuple[int, int, str]] = []
    taken: set[tuple[int, int, str]] = set()
    for u in eligible:
        open_types = [t for t in TASK_TYPES if remaining[t] > 0]
        task_type = _pick(rng, open_types, [remaining[t] for t in open_types])
        i = _pick(rng, positions[u], [_slot_weight(task_type, histories[u][i]) for i in positions[u]])
        chosen.append((u, i, task_type))
        taken.add((u, i, task_type))
        remaining[task_type] -= 1
    for task_type in TASK_TYPES:
        slots = [(u, i) for u in eligible for i in positions[u] if (u, i, task_type) not in taken]
        if len(slots) < remaining[task_type]:
            raise DataError(f"synthetic plan: not enough {split} behaviours for {mix} tasks; add behaviours")
        weights = [_slot_weight(task_type, histories[u][i]) for u, i in slots]
        chosen += [(u, i, task_type) for u, i in _weighted_sample(rng, slots, weights, remaining[task_type])]
    chosen.sort(key=lambda c: (c[0], histories[c[0]][c[1]].review["timestamp"], TASK_TYPES.index(c[2])))
    return chosen


def _what(rng: random.Random, ptype: vocab.ProductType, item: _Item) -> str:
    """How the user names the product type: the plain type, or the product's own noun
    where the phrasing allows ("a pair of bluetooth earbuds")."""
    if ptype.name in ptype.ask and rng.random() < 0.35:
        prefix = ptype.ask[: ptype.ask.index(ptype.name)]
        if prefix not in ("a ", "an "):
            return prefix + item.noun.lower()
    return ptype.ask


def _search_instruction(rng: random.Random, user: _User, item: _Item, store_name: str) -> str:
    """Product type plus one or two attributes; the store is named only sometimes and
    otherwise left to the user's history ("from a brand I usually trust")."""
    ptype = vocab.CATEGORIES[item.category].types[item.type]
    opener = rng.choice(vocab.SEARCH_OPENERS)
    if rng.random() < _TWO_DESCRIPTORS_PROB:
        d1, d2 = rng.sample(item.descriptors, 2)
        clause = rng.choice(vocab.ATTRIBUTE_CLAUSES_TWO).format(d1=d1, d2=d2)
    else:
        clause = rng.choice(vocab.ATTRIBUTE_CLAUSES_ONE).format(d1=rng.choice(item.descriptors))
    parts = [opener, _what(rng, ptype, item), clause]
    if rng.random() < _VALUE_MENTION_PROB:
        parts.append(rng.choice(vocab.VALUE_CLAUSES).format(value=item.value.lower()))
    separate_hint = ""
    if rng.random() < _EXPLICIT_STORE_PROB:
        parts.append(rng.choice(vocab.EXPLICIT_BRAND).format(store=store_name))
    elif rng.random() < 0.5:
        parts.append(rng.choice(vocab.IMPLICIT_BRAND))
    else:
        separate_hint = f" {_sentence(rng.choice(vocab.IMPLICIT_BRAND))}."
    if rng.random() < _PRICE_HINT_PROB:
        parts.append(rng.choice(vocab.PRICE_HINTS))
    text = _join(parts) + ("?" if opener.startswith(("Can", "Could")) else ".") + separate_hint
    if rng.random() < {"Low": 0.1, "Medium": 0.35, "High": 0.8}[user.complexity]:
        text += " " + rng.choice(vocab.CONTEXT_SENTENCES).format(use=rng.choice(ptype.uses))
    return text


def _recommend_instruction(rng: random.Random, user: _User, item: _Item) -> str:
    """A vague request that at most names the area or a loose kind of product."""
    category = vocab.CATEGORIES[item.category]
    roll = rng.random()
    if roll < 0.4:
        obj = rng.choice(vocab.RECOMMEND_OBJECTS_GENERIC)
    elif roll < 0.7:
        obj = rng.choice(vocab.RECOMMEND_OBJECTS_AREA).format(area=rng.choice(category.areas))
    else:
        obj = rng.choice(vocab.RECOMMEND_OBJECTS_LOOSE).format(loose=category.types[item.type].loose)
    text = rng.choice(vocab.RECOMMEND_TEMPLATES).format(obj=obj, rel=rng.choice(vocab.RECOMMEND_RELATIVES))
    if rng.random() < {"Low": 0.15, "Medium": 0.35, "High": 0.7}[user.complexity]:
        text += " " + rng.choice(vocab.RECOMMEND_EXTRAS)
    return text


def _review_instruction(rng: random.Random, item: _Item, store_name: str, rating: float) -> str:
    """Asks for a review of a named purchase, sometimes hinting at how it went."""
    ptype = vocab.CATEGORIES[item.category].types[item.type]
    roll = rng.random()
    if roll < 0.4:
        ref = f"{store_name} {ptype.name}"
    elif roll < 0.7:
        ref = f"{ptype.name} from {store_name}"
    elif roll < 0.85:
        ref = item.noun.lower()
    else:
        ref = item.product["title"].split(",")[0]
    text = rng.choice(vocab.REVIEW_TEMPLATES).format(item=ref)
    if rng.random() < 0.5:
        text += " " + rng.choice(vocab.REVIEW_FEELINGS[_sentiment(rating)])
    return text


def _instruction_text(rng: random.Random, task_type: str, user: _User, item: _Item, store_name: str,
                      rating: float) -> str:
    if task_type == "search":
        return _search_instruction(rng, user, item, store_name)
    if task_type == "recommend":
        return _recommend_instruction(rng, user, item)
    return _review_instruction(rng, item, store_name, rating)


def _unique(rng: random.Random, build: Callable[[], str], used: set[str]) -> str:
    """A text not used yet in this split (texts key PUMA's result files): redraw a few
    times, then add closing words."""
    for attempt in range(60):
        text = build()
        if attempt >= 10:
            text = f"{text} {' '.join(rng.sample(vocab.CLOSERS, 1 + attempt // 25))}"
        if text not in used:
            used.add(text)
            return text
    raise DataError("synthetic generator: could not make a unique instruction text")


def _instructions(seed: int, split: str, assignments: list[tuple[int, int, str]], users: list[_User],
                  histories: list[list[_Behaviour]], catalogue: _Catalogue) -> list[dict[str, Any]]:
    """The split's task records, in the official shape, with unique instruction texts."""
    rng = _rng(seed, "instructions", split)
    used: set[str] = set()
    tasks: list[dict[str, Any]] = []
    for u, i, task_type in assignments:
        behaviour = histories[u][i]
        item = catalogue.items[behaviour.item]
        build = partial(_instruction_text, rng, task_type, users[u], item, catalogue.market.stores[item.store].name,
                        behaviour.review["rating"])
        tasks.append({
            "user_id": users[u].user_id,
            "task": _unique(rng, build, used),
            "type": task_type,
            "timestamp": behaviour.review["timestamp"],
            "target": {"product_info": item.product, "review": behaviour.review},
        })
    return tasks


# ------------------------------------------------------------------ output


def _check_out_dir(out: Path) -> None:
    """Never write over the official release, nor over any data that is not ours."""
    official = OFFICIAL_DATA_DIR.resolve()
    resolved = out.resolve()
    if resolved == official or official in resolved.parents:
        raise DataError(f"{out}: refusing to write synthetic data into the official data folder "
                        f"{OFFICIAL_DATA_DIR}; pass another --out (e.g. data/synthetic/small)")
    if (out / INSTRUCTIONS_FILE).exists() and not (out / SYNTHETIC_MANIFEST).exists():
        raise DataError(f"{out}: already holds benchmark data without a {SYNTHETIC_MANIFEST} (official data?); "
                        "refusing to overwrite it")


def _clear_stale_artifacts(out: Path, manifest: dict[str, Any]) -> None:
    """Derived artefacts of different earlier synthetic data go when the data changes."""
    path = out / SYNTHETIC_MANIFEST
    if path.exists() and json.loads(path.read_text(encoding="utf-8")) != manifest:
        remove_derived_artifacts(out)


def _counts(scale: SyntheticScale, catalogue: _Catalogue, histories: list[list[_Behaviour]],
            instructions: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    target_side = {catalogue.items[b.item].product["parent_asin"] for h in histories for b in h
                   if b.split != "history"}
    task_targets = {t["target"]["product_info"]["parent_asin"] for split in instructions.values() for t in split}
    return {
        "users": scale.users,
        "users_with_train_tasks": len({t["user_id"] for t in instructions["train"]}),
        "products": len(catalogue.items),
        "stores": len(catalogue.market.stores),
        "main_categories": [category.main for category in vocab.CATEGORIES],
        "behaviours": sum(len(h) for h in histories),
        "train_tasks": len(instructions["train"]),
        "test_tasks": len(instructions["test"]),
        "train_types": {t: sum(task["type"] == t for task in instructions["train"]) for t in TASK_TYPES},
        "test_types": {t: sum(task["type"] == t for task in instructions["test"]) for t in TASK_TYPES},
        "target_side_products": len(target_side),
        "task_target_products": len(task_targets),
    }


def _plan(scale: str) -> SyntheticScale:
    if scale not in SCALES:
        raise DataError(f"unknown synthetic scale {scale!r}; expected one of {list(SCALES)}")
    return SCALES[scale]


def _world(seed: int, plan: SyntheticScale) -> tuple[list[_User], _Catalogue, list[list[_Behaviour]]]:
    """Stores, users, the catalogue and every user's time-ordered, split history."""
    market = _make_market(seed, plan)
    taken_ids: set[str] = set()
    users = [_make_user(seed, i, market, plan, taken_ids) for i in range(plan.users)]
    lengths = _behaviour_counts(_rng(seed, "lengths"), plan)
    catalogue = _build_catalogue(seed, plan, market, _demand(users, lengths, market))
    _make_lines(seed, plan, catalogue, users)
    # in user order: each user's draws see what earlier users bought (catalogue.bought)
    histories = [_history(seed, i, user, catalogue, n, plan.line_start)
                 for i, (user, n) in enumerate(zip(users, lengths))]
    return users, catalogue, histories


def generate_synthetic(out_dir: Path | str, scale: str = "small", seed: int = 0,
                       layout: str = "official") -> dict[str, Any]:
    """Write a synthetic PersonalWAB of `scale` into `out_dir` and return its manifest.

    `layout="official"` writes the benchmark's files; `layout="raw"` writes the same world
    (same users, products and reviews) as Amazon Reviews 2023 raw files, the input of
    `python -m PersonalWAB.construct`, with no profiles or instructions. The same seed,
    scale and layout always give byte-identical files. Refuses the official data folder
    and folders holding non-synthetic data; derived artefacts (indexes, SASRec
    checkpoint, caches) of different earlier synthetic data in `out_dir` are removed.
    """
    plan = _plan(scale)
    if layout not in LAYOUTS:
        raise DataError(f"unknown synthetic layout {layout!r}; expected one of {list(LAYOUTS)}")
    out = Path(out_dir)
    _check_out_dir(out)
    users, catalogue, histories = _world(seed, plan)
    if layout == "raw":
        return _write_raw(out, scale, seed, users, catalogue, histories)

    rng = _rng(seed, "tasks")
    without_train = set(rng.sample(range(plan.users), plan.users - plan.users_with_train))
    assignments = {
        "train": _allocate(rng, histories, [u for u in range(plan.users) if u not in without_train], "train",
                           plan.train_mix),
        "test": _allocate(rng, histories, list(range(plan.users)), "test", plan.test_mix),
    }
    instructions = {split: _instructions(seed, split, chosen, users, histories, catalogue)
                    for split, chosen in assignments.items()}
    manifest = {"synthetic": True, "generator_version": GENERATOR_VERSION, "scale": scale, "seed": seed,
                "counts": _counts(plan, catalogue, histories, instructions), "note": NOTE}

    out.mkdir(parents=True, exist_ok=True)
    _clear_stale_artifacts(out, manifest)
    write_atomic(out / SYNTHETIC_MANIFEST, json_bytes(manifest))
    products = [(item.product["parent_asin"], item.product) for item in catalogue.items]
    behaviours = [
        (user.user_id, [{"product_info": catalogue.items[b.item].product, "review": b.review, "split": b.split}
                        for b in history])
        for user, history in zip(users, histories)
    ]
    write_files(out, official_files(products, behaviours, instructions,
                                    {user.user_id: user.profile for user in users}, synthetic_marker=NOTE))
    write_atomic(ArtifactPaths.for_data_dir(out).item_map,
                 json_bytes({asin: i for i, (asin, _) in enumerate(products, start=1)}))
    return manifest


def _raw_review(rng: random.Random, user: _User, review: dict[str, Any]) -> dict[str, Any]:
    """A review line as Amazon Reviews 2023 stores it (field order of the release files)."""
    return {"rating": review["rating"], "title": review["title"], "text": review["text"], "images": [],
            "asin": review["parent_asin"], "parent_asin": review["parent_asin"], "user_id": user.user_id,
            "timestamp": review["timestamp"], "helpful_vote": _pick(rng, [0, 1, 2, 3, 7], [0.6, 0.2, 0.1, 0.07, 0.03]),
            "verified_purchase": rng.random() < 0.93}


def _raw_meta(product: dict[str, Any]) -> dict[str, Any]:
    """A metadata line: the product plus the media and link fields the benchmark drops."""
    extra: dict[str, Any] = {"images": [], "videos": [], "bought_together": None}
    return {key: product[key] if key in product else extra[key] for key in amazon_raw.META_FIELDS}


def _write_raw(out: Path, scale: str, seed: int, users: list[_User], catalogue: _Catalogue,
               histories: list[list[_Behaviour]]) -> dict[str, Any]:
    """One review file and one metadata file per category; reviews in time order across
    users (as in a real dump, no file is grouped by user), every product in the metadata
    (bought or not)."""
    rng = _rng(seed, "raw")
    reviews: list[list[tuple[int, str, dict[str, Any]]]] = [[] for _ in vocab.CATEGORIES]
    for user, history in zip(users, histories):
        for behaviour in history:
            line = _raw_review(rng, user, behaviour.review)
            reviews[catalogue.items[behaviour.item].category].append((line["timestamp"], user.user_id, line))
    names = [amazon_raw.category_file_name(category.top) for category in vocab.CATEGORIES]
    manifest = {"synthetic": True, "format": "amazon-reviews-2023-raw", "generator_version": GENERATOR_VERSION,
                "scale": scale, "seed": seed,
                "counts": {"users": len(users), "products": len(catalogue.items),
                           "behaviours": sum(len(h) for h in histories),
                           "reviews_per_category": {name: len(r) for name, r in zip(names, reviews)}},
                "categories": names, "note": NOTE}
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / SYNTHETIC_MANIFEST, json_bytes(manifest))
    for c, name in enumerate(names):
        lines = [json_bytes(line) for _, _, line in sorted(reviews[c], key=lambda r: (r[0], r[1]))]
        write_atomic(out / amazon_raw.review_file(name), b"\n".join(lines) + b"\n")
        meta = [json_bytes(_raw_meta(item.product)) for item in catalogue.items if item.category == c]
        write_atomic(out / amazon_raw.meta_file(name), b"\n".join(meta) + b"\n")
    return manifest


# ------------------------------------------------------------------ command line


@dataclass
class SyntheticSettings:
    """The flags of `python -m PersonalWAB.data synthetic`."""

    out: str = setting(str, "data folder to write (never the official data folder)", required=True, metavar="DIR")
    scale: str = setting("small", "how big a world to write: tiny (tests), small (~100 users, quick runs), medium "
                                  "(~300 users) or full (the published PersonalWAB's size)", choices=list(SCALES))
    seed: int = setting(0, "random seed: the same seed and scale give identical files; change it for another world "
                           "of the same size")
    layout: str = setting("official", "official: the benchmark's files, ready for run.py; raw: the same world as "
                                      "Amazon Reviews 2023 review and metadata files, the input of `python -m "
                                      "PersonalWAB.construct build`", choices=LAYOUTS)


def same_world(settings: SyntheticSettings) -> Callable[[Path], bool]:
    """Whether a folder already holds the synthetic world these settings write (its manifest says
    the same scale, seed and layout): rewriting it changes nothing a user made or chose."""
    def own(folder: Path) -> bool:
        try:
            manifest = json.loads((folder / SYNTHETIC_MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(manifest, dict) and (manifest.get("scale"), manifest.get("seed"), "format" in manifest) == \
            (settings.scale, settings.seed, settings.layout == "raw")

    return own


def main(argv: list[str] | None = None) -> int:
    """`python -m PersonalWAB.data synthetic`: write a synthetic PersonalWAB."""
    args = parse_command([SyntheticSettings], argv, {"out": FOLDER}, own=same_world, description="Write a synthetic "
                         "PersonalWAB: made-up users, products and tasks in the official layout (or as raw review "
                         "files), for tests and trying the tools.")[0]
    manifest = generate_synthetic(args.out, scale=args.scale, seed=args.seed, layout=args.layout)
    counts = manifest["counts"]
    if args.layout == "raw":
        print(f"Wrote a SYNTHETIC world as Amazon Reviews 2023 raw files (scale={args.scale}, seed={args.seed}) to "
              f"{args.out}: {counts['users']} users, {counts['behaviours']} reviews, {counts['products']} products "
              f"in {len(manifest['categories'])} categories ({', '.join(manifest['categories'])}).")
        return 0
    print(f"Wrote SYNTHETIC PersonalWAB data (scale={args.scale}, seed={args.seed}) to {args.out}: "
          f"{counts['users']} users, {counts['behaviours']} behaviours, {counts['products']} products, "
          f"{counts['train_tasks']} train / {counts['test_tasks']} test tasks.")
    print("This is synthetic data: numbers measured on it are not comparable to the paper.")
    return 0
