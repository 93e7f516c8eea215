"""Word lists and sentence templates of the synthetic PersonalWAB generator.

Pure data, kept apart from the generator so the sampling logic stays readable.
Lists use "|"-separated strings to stay compact; every list is ordered and is only
ever indexed or sampled through a seeded random generator, never iterated as a set.
Templates use `str.format` fields; the generator documents which fields each gets.
"""

from __future__ import annotations

from dataclasses import dataclass


def _split(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split("|") if part.strip())


@dataclass(frozen=True)
class ProductType:
    """One kind of product (e.g. wireless earbuds) and the words that describe it.

    `descriptors` are the distinctive attributes a shopper asks for; they are ordered
    from most to least common so a smaller catalogue can use a prefix of them.
    """

    name: str
    ask: str
    mid: str
    leaf: str
    nouns: tuple[str, ...]
    descriptors: tuple[str, ...]
    price: tuple[float, float]
    uses: tuple[str, ...]
    loose: str
    axis: str
    values: tuple[str, ...]
    then: str

    @property
    def single(self) -> str:
        """The type as a singular phrase for "this ..." ("pair of wireless earbuds")."""
        return self.ask.split(" ", 1)[1]


@dataclass(frozen=True)
class Category:
    """One Amazon-style main category with its product types and shared wording."""

    main: str
    top: str
    interest: str
    areas: tuple[str, ...]
    suffixes: tuple[str, ...]
    extra_features: tuple[str, ...]
    details: tuple[tuple[str, tuple[str, ...]], ...]
    types: tuple[ProductType, ...]


def _type(name: str, ask: str, path: str, nouns: str, descriptors: str, price: tuple[float, float],
          uses: str, loose: str, axis: str = "Color", values: str = "", then: str = "") -> ProductType:
    mid, leaf = (part.strip() for part in path.split(">"))
    return ProductType(name=name, ask=ask, mid=mid, leaf=leaf, nouns=_split(nouns),
                       descriptors=_split(descriptors), price=price, uses=_split(uses), loose=loose,
                       axis=axis, values=_split(values or DEFAULT_COLORS), then=then)


DEFAULT_COLORS = "Black|White|Gray|Navy Blue|Sage Green|Blush Pink|Charcoal|Sand Beige"

ELECTRONICS = Category(
    main="All Electronics",
    top="Electronics",
    interest="Electronics and tech gadgets",
    areas=_split("tech setup|desk|home office|gadget collection"),
    suffixes=_split("Audio|Tech|Electronics|Digital|Labs"),
    extra_features=_split(
        "Works with most phones, tablets and laptops; check the compatibility chart for your exact model|"
        "In the box: the {noun_lower}, a quick start guide and an 18-month warranty card|"
        "Built-in protection circuits guard against overheating, overcharging and short circuits|"
        "Friendly support from the {store} team if anything feels off during setup"
    ),
    details=(("Connectivity Technology", _split("Bluetooth|USB|Wireless|Wired")),
             ("Item Weight", _split("2.1 ounces|3.5 ounces|5.3 ounces|8 ounces|12.6 ounces|1.1 pounds"))),
    types=(
        _type("wireless earbuds", "a pair of wireless earbuds",
              "Headphones, Earbuds & Accessories > Earbud Headphones",
              "Wireless Earbuds|Bluetooth Earbuds|True Wireless Earphones",
              "active noise cancelling|ipx7 waterproof|ear hook sport fit|deep bass|touch controls|"
              "40 hour playtime|low latency game mode|wireless charging case|quad microphone calls|transparency mode",
              (15, 180), "workouts|the daily commute|long phone calls|travel|studying", "audio gadget",
              values="Black|White|Navy Blue|Sage Green|Rose Gold|Graphite|Lavender|Sand Beige", then="phone case"),
        _type("over-ear headphones", "a pair of over-ear headphones",
              "Headphones, Earbuds & Accessories > Over-Ear Headphones",
              "Over-Ear Headphones|Wireless Headphones|Studio Headphones",
              "hybrid noise cancelling|memory foam ear cushions|foldable travel design|hi-res audio|60 hour battery|"
              "wired aux mode|detachable boom mic|multipoint pairing|lightweight headband|spatial sound",
              (25, 350), "flights|working from home|music production|gaming sessions", "audio gadget",
              values="Black|Silver|Midnight Blue|Cream|Forest Green|Space Gray|Burgundy|White"),
        _type("phone case", "a phone case", "Cell Phones & Accessories > Cases, Holsters & Sleeves",
              "Phone Case|Protective Case|Slim Case",
              "military grade drop protection|magsafe compatible|clear anti-yellowing back|raised camera lip|"
              "built-in kickstand|card holder wallet|shockproof corners|matte frosted finish|wrist strap|"
              "glitter sparkle",
              (8, 45), "everyday carry|hiking trips|busy workdays|weekend outings", "phone accessory",
              values="Clear|Black|Midnight Green|Pink Sand|Ocean Blue|Purple|Red|Frosted Gray",
              then="screen protector"),
        _type("USB-C charger", "a USB-C wall charger", "Cell Phones & Accessories > Chargers & Power Adapters",
              "USB C Charger|Fast Wall Charger|GaN Charger Block",
              "65w gan fast charging|dual port|foldable prongs|pd 3.0|compact travel size|laptop compatible|"
              "overheat protection|three port hub|pps super fast charge|cable included",
              (10, 60), "travel|the nightstand|the office|charging a laptop", "charging accessory",
              values="White|Black|Gray|Blue|Green|Pink", then="charging cable"),
        _type("power bank", "a portable power bank", "Cell Phones & Accessories > Portable Power Banks",
              "Portable Charger|Power Bank|Battery Pack",
              "20000mah capacity|led display|built-in cables|magnetic wireless charging|slim pocket size|solar panel|"
              "airline approved|fast recharge input|flashlight|three device output",
              (15, 90), "camping|long flights|festivals|power outages", "charging accessory",
              values="Black|White|Blue|Green|Pink|Gray|Orange|Purple"),
        _type("charging cable", "a charging cable", "Cell Phones & Accessories > Cables",
              "Charging Cable|USB C Cable|Fast Charge Cord",
              "braided nylon|10 ft extra long|right angle connector|100w fast charging|3 pack variety lengths|"
              "data sync|reinforced strain relief|magnetic tip|coiled design|led charge indicator",
              (6, 30), "the car|the bedside|the office desk|travel bags", "charging accessory",
              values="Black|White|Gray|Red|Blue|Green|Pink|Multicolor"),
        _type("bluetooth speaker", "a bluetooth speaker", "Portable Audio & Video > Portable Bluetooth Speakers",
              "Bluetooth Speaker|Portable Speaker|Wireless Speaker",
              "360 degree sound|waterproof floating|party lights|stereo pairing|24 hour battery|rugged shockproof|"
              "bass radiator|outdoor carabiner|voice assistant|usb-c charging",
              (20, 250), "pool parties|camping|the kitchen|backyard barbecues", "audio gadget",
              values="Black|Blue|Red|Teal|Camo|Gray|Orange|White"),
        _type("smartwatch", "a smartwatch", "Wearable Technology > Smartwatches",
              "Smart Watch|Fitness Tracker Watch|Smartwatch",
              "heart rate monitor|sleep tracking|built-in gps|amoled touchscreen|blood oxygen sensor|100 sport modes|"
              "bluetooth calling|7 day battery|swim proof|message notifications",
              (30, 300), "running|tracking sleep|daily step goals|cycling", "wearable",
              values="Black|Silver|Rose Gold|Navy Blue|Pink|Olive|Starlight|Graphite"),
        _type("wireless mouse", "a wireless mouse", "Computers & Accessories > Mice",
              "Wireless Mouse|Ergonomic Mouse|Silent Mouse",
              "silent click|ergonomic vertical grip|rechargeable battery|dual mode bluetooth|adjustable dpi|"
              "programmable side buttons|compact travel size|rgb lighting|multi-device switching|smooth scroll wheel",
              (10, 100), "the home office|gaming|spreadsheets|laptop travel", "computer accessory",
              then="mechanical keyboard"),
        _type("mechanical keyboard", "a mechanical keyboard", "Computers & Accessories > Keyboards",
              "Mechanical Keyboard|Gaming Keyboard|Wireless Keyboard",
              "hot-swappable switches|tactile brown switches|rgb backlight|compact 75 percent layout|pbt keycaps|"
              "wireless 2.4g|gasket mount|detachable usb-c cable|wrist rest|mac layout",
              (35, 200), "coding|gaming|writing|the home office", "computer accessory",
              values="Black|White|Gray|Pink|Retro Beige|Blue|Green|Purple", then="wireless mouse"),
        _type("webcam", "a webcam", "Computers & Accessories > Webcams",
              "Webcam|HD Web Camera|Streaming Camera",
              "1080p full hd|auto focus|privacy cover|dual noise reducing mic|ring light|wide angle lens|plug and play|"
              "4k resolution|low light correction|tripod mount",
              (20, 180), "video calls|streaming|online classes|remote meetings", "computer accessory",
              values="Black|White|Gray|Silver"),
        _type("screen protector", "a screen protector", "Cell Phones & Accessories > Screen Protectors",
              "Screen Protector|Tempered Glass Protector|Privacy Screen Film",
              "9h tempered glass|easy install frame|anti-glare matte|privacy filter|bubble free|case friendly|2 pack|"
              "blue light filter|full coverage|scratch resistant",
              (6, 25), "everyday use|kids who borrow the phone|outdoor work|gaming", "phone accessory",
              axis="Style", values="Clear|Matte|Privacy|Full Cover|2 Pack|3 Pack"),
        _type("security camera", "a home security camera", "Camera & Photo > Surveillance Cameras",
              "Security Camera|Indoor Camera|Wi-Fi Camera",
              "2k night vision|motion alerts|two-way audio|pan and tilt|local sd storage|pet detection|"
              "weatherproof outdoor|spotlight siren|alexa compatible|battery powered",
              (25, 150), "watching the pets|the front porch|the nursery|the garage", "smart home device",
              values="White|Black|Gray"),
    ),
)

HOME = Category(
    main="Amazon Home",
    top="Home & Kitchen",
    interest="Home and kitchen essentials",
    areas=_split("kitchen|home|living room|bedroom|apartment"),
    suffixes=_split("Home|Kitchen|Living|Housewares|Co."),
    extra_features=_split(
        "Easy care: wipe clean or follow the care label and it keeps looking new|"
        "Designed in-house by {store} to sit comfortably in modern and classic homes|"
        "Arrives in recyclable, plastic-free packaging that doubles as gift wrap|"
        "Covered by a one-year promise: if it disappoints, {store} will make it right"
    ),
    details=(("Material", _split("Cotton|Stainless Steel|Ceramic|Bamboo|Glass|Polyester|Stoneware|Wood")),
             ("Product Dimensions", _split('8"L x 6"W x 4"H|12"L x 9"W x 3"H|16"L x 12"W x 5"H|20"L x 14"W x 2"H'))),
    types=(
        _type("coffee mug", "a coffee mug", "Kitchen & Dining > Coffee Mugs",
              "Coffee Mug|Ceramic Mug|Travel Mug",
              "double wall insulated|leak-proof lid|16 oz capacity|stoneware glaze|dishwasher safe|large handle|"
              "set of 4|"
              "speckled finish|stainless steel|microwave safe",
              (8, 40), "morning coffee|tea time|the office|road trips", "kitchen item",
              values="Matte Black|Cream|Sage|Terracotta|Navy|Blush Pink|Speckled White|Charcoal", then="coffee maker"),
        _type("chef knife", "a chef knife", "Kitchen & Dining > Chef's Knives",
              "Chef Knife|Kitchen Knife|Santoku Knife",
              "german high carbon steel|damascus pattern|ergonomic pakkawood handle|8 inch blade|full tang|"
              "razor sharp edge|knife sheath|granton edge|forged bolster|gift box",
              (15, 150), "meal prep|slicing vegetables|carving roasts|weeknight dinners", "kitchen tool",
              values="Black|Wood Grain|Silver|Red|Blue|Olive", then="cutting board"),
        _type("nonstick skillet", "a nonstick frying pan", "Kitchen & Dining > Skillets",
              "Nonstick Frying Pan|Skillet|Fry Pan",
              "ceramic coating|pfoa free|induction compatible|oven safe to 500f|12 inch|glass lid|stay-cool handle|"
              "hard anodized|granite stone finish|deep saute sides",
              (18, 120), "eggs and pancakes|stir fry|weeknight dinners|searing steaks", "piece of cookware",
              values="Black|Gray|Cream|Green|Blue|Copper"),
        _type("food storage containers", "a set of food storage containers", "Kitchen & Dining > Food Storage Sets",
              "Food Storage Containers|Glass Meal Prep Containers|Airtight Canisters",
              "airtight locking lids|borosilicate glass|bpa free|stackable|24 piece set|freezer safe|labels and marker|"
              "oven safe glass|leak proof seal|pantry organization",
              (15, 60), "meal prep|leftovers|packed lunches|the pantry", "kitchen organizer",
              values="Clear|Gray|Blue|Green|White|Black"),
        _type("bath towel set", "a bath towel set", "Bath > Bath Towels",
              "Bath Towel Set|Cotton Towels|Bath Sheets",
              "100 percent cotton|quick dry|600 gsm plush|oversized bath sheet|turkish cotton|highly absorbent|"
              "hotel quality|waffle weave|hanging loop|8 piece set",
              (20, 90), "the guest bathroom|the gym|the beach|everyday showers", "bathroom upgrade",
              values="White|Gray|Navy|Sage Green|Beige|Aqua|Charcoal|Blush", then="shower curtain"),
        _type("bed sheet set", "a bed sheet set", "Bedding > Sheet & Pillowcase Sets",
              "Bed Sheet Set|Microfiber Sheets|Cotton Sheet Set",
              "deep pocket|cooling bamboo|400 thread count|wrinkle resistant|brushed microfiber|queen size|"
              "breathable percale|hypoallergenic|4 piece set|sateen weave",
              (20, 140), "hot sleepers|the guest room|everyday use|kids' rooms", "bedding upgrade",
              values="White|Light Gray|Navy|Sage|Ivory|Dusty Rose|Taupe|Charcoal", then="throw pillow cover"),
        _type("throw pillow cover", "a set of throw pillow covers", "Home Décor Products > Decorative Pillow Covers",
              "Throw Pillow Covers|Decorative Cushion Covers|Pillow Cases",
              "velvet soft|18x18 inch|hidden zipper|boho pattern|set of 2|farmhouse linen|chenille texture|"
              "machine washable|tassel trim|outdoor waterproof",
              (10, 40), "the couch|the bed|the patio|seasonal decor", "decor piece",
              values="Mustard|Cream|Teal|Rust|Sage|Navy|Blush|Gray"),
        _type("scented candle", "a scented candle", "Home Décor Products > Candles",
              "Scented Candle|Soy Candle|Jar Candle",
              "natural soy wax|cotton wick|50 hour burn time|long lasting fragrance|three wick|glass jar|"
              "aromatherapy blend|essential oils|gift set|wood wick crackle",
              (10, 45), "relaxing evenings|the bathroom|gifts|the holidays", "decor piece", axis="Scent",
              values="Lavender|Vanilla|Eucalyptus|Sea Salt|Cedarwood|Fresh Linen|Pumpkin Spice|Citrus"),
        _type("drawer organizer", "a drawer organizer", "Storage & Organization > Drawer Organizers",
              "Drawer Organizer|Bamboo Drawer Dividers|Storage Bins",
              "expandable bamboo|non-slip base|adjustable dividers|clear acrylic|set of 6 bins|utensil tray|"
              "foldable fabric|stackable design|label holder|spring loaded",
              (10, 40), "the kitchen drawer|the closet|the bathroom vanity|the craft room", "storage solution",
              values="Natural|White|Clear|Gray|Black|Beige"),
        _type("coffee maker", "a coffee maker", "Kitchen & Dining > Coffee Machines",
              "Coffee Maker|Drip Coffee Machine|French Press",
              "programmable timer|12 cup carafe|single serve|thermal carafe|built-in grinder|keep warm plate|"
              "reusable filter|brew strength control|compact footprint|stainless steel body",
              (20, 200), "busy mornings|small kitchens|the office|weekend brunch", "kitchen appliance",
              values="Black|Stainless|White|Red|Cream|Matte Gray", then="coffee mug"),
        _type("cutting board", "a cutting board", "Kitchen & Dining > Cutting Boards",
              "Cutting Board|Chopping Board|Bamboo Board Set",
              "organic bamboo|juice groove|set of 3|reversible|non-slip feet|end grain wood|dishwasher safe plastic|"
              "built-in handles|extra large|knife friendly surface",
              (12, 80), "meal prep|serving charcuterie|carving roasts|chopping herbs", "kitchen tool",
              values="Natural|Walnut|Acacia|Gray|Green|White"),
        _type("shower curtain", "a shower curtain", "Bath > Shower Curtains",
              "Shower Curtain|Fabric Shower Curtain|Shower Liner",
              "waterproof fabric|weighted hem|rust-proof hooks|72x72 inch|mildew resistant|waffle texture|"
              "machine washable|extra long|botanical print|magnetic liner",
              (10, 40), "the main bathroom|the kids' bathroom|a rental refresh|the guest bath", "bathroom upgrade",
              values="White|Gray|Sage|Navy|Beige|Black|Terracotta|Blue"),
        _type("electric kettle", "an electric kettle", "Kitchen & Dining > Electric Kettles",
              "Electric Kettle|Tea Kettle|Gooseneck Kettle",
              "variable temperature|1.7 liter|auto shut off|gooseneck spout|glass body|rapid boil|keep warm mode|"
              "bpa free|cordless base|stainless interior",
              (20, 100), "tea time|pour over coffee|instant oatmeal|the office", "kitchen appliance",
              values="Black|Stainless|White|Matte Green|Cream|Copper"),
    ),
)

GROCERY = Category(
    main="Grocery",
    top="Grocery & Gourmet Food",
    interest="Grocery and gourmet food",
    areas=_split("pantry|snack drawer|kitchen|morning routine"),
    suffixes=_split("Foods|Farms|Pantry|Provisions|Roasters"),
    extra_features=_split(
        "Packed fresh and sealed to lock in flavor from our kitchen to yours|"
        "Ingredients sourced from growers {store} has worked with for years|"
        "Store in a cool, dry place and reseal after opening to keep it at its best|"
        "Produced in a facility that also handles tree nuts, milk and soy"
    ),
    details=(("Package Weight", _split("8 ounces|12 ounces|1 pound|1.5 pounds|2 pounds|3 pounds")),
             ("Specialty", _split("Non-GMO|Kosher|Organic|Gluten Free|Vegan|All Natural"))),
    types=(
        _type("ground coffee", "a bag of ground coffee", "Beverages > Ground Coffee",
              "Ground Coffee|Roast Coffee|Coffee Beans",
              "medium roast|dark roast|single origin colombian|fair trade certified|whole bean|low acid|"
              "organic arabica|decaf swiss water|12 oz bag|french roast",
              (8, 30), "morning coffee|cold brew|the office pot|espresso drinks", "coffee to try", axis="Flavor",
              values="Original|Hazelnut|Vanilla|Breakfast Blend|Caramel|Mocha|Cinnamon|Espresso"),
        _type("coffee pods", "a box of coffee pods", "Beverages > Single-Serve Capsules & Pods",
              "Coffee Pods|K-Cup Pods|Single Serve Cups",
              "keurig compatible|recyclable pods|variety pack|72 count|bold roast|light roast|compostable|"
              "flavored blend|extra caffeine|nespresso compatible",
              (15, 55), "busy mornings|the office|guests|afternoon pick-me-ups", "coffee to try", axis="Flavor",
              values="Original|Hazelnut|Vanilla|Breakfast Blend|Caramel|Mocha|Donut Shop|Colombian"),
        _type("tea bags", "a box of tea bags", "Beverages > Tea",
              "Tea Bags|Green Tea|Herbal Tea",
              "organic green tea|caffeine free herbal|100 count|individually wrapped|matcha blend|chamomile|loose leaf|"
              "cold brew friendly|antioxidant rich|sampler box",
              (5, 25), "quiet evenings|iced tea|the office|winter colds", "tea to try", axis="Flavor",
              values="Jasmine|Peppermint|Lemon Ginger|Earl Grey|Hibiscus|Honey|Peach|Original", then="honey"),
        _type("protein bars", "a box of protein bars", "Snack Foods > Protein Bars",
              "Protein Bars|Snack Bars|Keto Bars",
              "20g protein|low sugar|gluten free|keto friendly|plant based|12 count box|chewy texture|high fiber|"
              "no artificial sweeteners|chocolate coated",
              (12, 40), "post-workout snacks|hiking|busy mornings|lunch boxes", "snack", axis="Flavor",
              values="Chocolate Chip|Peanut Butter|Cookies and Cream|Birthday Cake|Salted Caramel|Almond|Blueberry|"
                     "Mint Chocolate"),
        _type("mixed nuts", "a container of mixed nuts", "Snack Foods > Nuts & Seeds",
              "Mixed Nuts|Roasted Almonds|Trail Mix",
              "lightly salted|unsalted|dry roasted|resealable bag|2 lb bulk|individual snack packs|honey roasted|raw|"
              "non-gmo|deluxe cashews",
              (8, 35), "road trips|the office snack drawer|hiking|movie nights", "snack", axis="Flavor",
              values="Sea Salt|Honey|Smoked|Original|Chili Lime|Plain|Rosemary|Cinnamon"),
        _type("dark chocolate", "a pack of dark chocolate", "Candy & Chocolate > Chocolate Bars",
              "Dark Chocolate Bars|Chocolate Squares|Cocoa Bars",
              "72 percent cacao|fair trade cocoa|sea salt almond|sugar free|individually wrapped|vegan|12 bar pack|"
              "single origin|orange zest|gift box",
              (5, 35), "dessert|gifts|baking|late night cravings", "sweet treat", axis="Flavor",
              values="Classic|Sea Salt|Mint|Raspberry|Caramel|Espresso|Orange|Almond"),
        _type("olive oil", "a bottle of olive oil", "Pantry Staples > Cooking Oils",
              "Extra Virgin Olive Oil|Olive Oil|Cold Pressed Oil",
              "cold pressed|first harvest|1 liter bottle|single estate|dark glass bottle|robust peppery|spray mister|"
              "organic certified|early harvest|tin can",
              (9, 45), "salad dressings|roasting vegetables|dipping bread|everyday cooking", "pantry staple",
              axis="Flavor",
              values="Classic|Robust|Mild|Garlic Infused|Lemon Infused|Basil Infused|Truffle|Chili Infused",
              then="pasta"),
        _type("hot sauce", "a bottle of hot sauce", "Pantry Staples > Condiments",
              "Hot Sauce|Chili Sauce|Pepper Sauce",
              "habanero|smoky chipotle|extra hot|variety pack|fermented|garlic forward|low sodium|ghost pepper|"
              "sweet heat|5 oz bottle",
              (5, 30), "tacos|eggs|wings|game day", "sauce to try", axis="Flavor",
              values="Original|Garlic|Lime|Mango|Smoky|Green|Verde|Pineapple"),
        _type("pasta", "a pack of pasta", "Pantry Staples > Pasta & Noodles",
              "Pasta|Penne Pasta|Spaghetti",
              "bronze cut|whole wheat|gluten free|chickpea protein|imported from italy|6 pack|organic durum wheat|"
              "quick cooking|high fiber|family size",
              (4, 25), "weeknight dinners|meal prep|family dinners|pasta salad", "pantry staple", axis="Flavor",
              values="Plain|Spinach|Tomato|Whole Grain|Lentil|Egg", then="olive oil"),
        _type("granola", "a bag of granola", "Breakfast Foods > Granola",
              "Granola|Cereal Clusters|Muesli",
              "maple almond clusters|high protein|low sugar|gluten free oats|ancient grains|family size bag|"
              "coconut crunch|no added sugar|keto nut granola|organic",
              (5, 25), "yogurt bowls|breakfast on the go|snacking|smoothie toppings", "breakfast option",
              axis="Flavor",
              values="Maple Pecan|Vanilla|Honey Oat|Cranberry|Chocolate|Peanut Butter|Blueberry|Cinnamon"),
        _type("beef jerky", "a bag of beef jerky", "Snack Foods > Jerky & Dried Meats",
              "Beef Jerky|Meat Sticks|Jerky Strips",
              "grass fed beef|high protein snack|teriyaki marinade|zero sugar|peppered|resealable bag|bulk 16 oz|"
              "tender cut|hickory smoked|individually wrapped",
              (8, 40), "hiking|road trips|the gym bag|fishing trips", "snack", axis="Flavor",
              values="Original|Teriyaki|Peppered|Sweet and Spicy|Smoked|Chili|Garlic|Honey BBQ"),
        _type("sparkling water", "a case of sparkling water", "Beverages > Sparkling Water",
              "Sparkling Water|Flavored Seltzer|Mineral Water",
              "zero calories|naturally flavored|24 pack cans|no sweeteners|glass bottles|extra bubbly|caffeinated|"
              "electrolytes added|variety case|slim cans",
              (10, 35), "the fridge|parties|work lunches|cutting back on soda", "drink to try", axis="Flavor",
              values="Lime|Grapefruit|Black Cherry|Lemon|Watermelon|Mango|Berry|Cucumber Mint"),
        _type("honey", "a jar of honey", "Pantry Staples > Honey",
              "Raw Honey|Manuka Honey|Wildflower Honey",
              "raw unfiltered|squeeze bottle|local wildflower|creamed honey|comb included|glass jar|umf certified|"
              "organic|honey sticks|2 lb jar",
              (8, 60), "tea|baking|sore throats|morning toast", "pantry staple", axis="Flavor",
              values="Wildflower|Clover|Orange Blossom|Buckwheat|Manuka|Acacia", then="tea bags"),
    ),
)

FASHION = Category(
    main="AMAZON FASHION",
    top="Clothing, Shoes & Jewelry",
    interest="Clothing, shoes and accessories",
    areas=_split("wardrobe|closet|everyday outfits|weekend looks"),
    suffixes=_split("Apparel|Wear|Studio|Outfitters|Co."),
    extra_features=_split(
        "Runs true to size; check the size chart in the images for the best fit|"
        "Machine wash cold with like colors and tumble dry low|"
        "Designed by the {store} studio and quality checked piece by piece|"
        "Free exchanges on sizing so you can find the fit that feels right"
    ),
    details=(("Size", _split("XS|Small|Medium|Large|X-Large|One Size")),
             ("Fabric Type", _split("Cotton|Polyester Blend|Nylon|Leather|Spandex Blend|Rayon"))),
    types=(
        _type("running shoes", "a pair of running shoes", "Shoes > Running Shoes",
              "Running Shoes|Walking Sneakers|Athletic Trainers",
              "breathable mesh|memory foam insole|arch support|slip on knit|wide toe box|lightweight cushioning|"
              "non-slip rubber sole|trail grip|reflective details|wide width available",
              (25, 150), "morning runs|long walks|gym sessions|all-day shifts on my feet", "pair of shoes",
              values="Black|White|Gray|Navy|Pink|Olive|Teal|Coral", then="ankle socks"),
        _type("leggings", "a pair of leggings", "Clothing > Leggings",
              "Leggings|Yoga Pants|Workout Tights",
              "high waisted|squat proof|side pockets|buttery soft|tummy control|7/8 length|fleece lined|"
              "moisture wicking|seamless knit|flare leg",
              (12, 80), "yoga|running errands|the gym|lounging at home", "activewear piece",
              values="Black|Charcoal|Navy|Olive|Burgundy|Dusty Rose|Heather Gray|Brown"),
        _type("t-shirt", "a t-shirt", "Clothing > Tops & Tees",
              "T-Shirt|Crew Neck Tee|V-Neck Tee",
              "100 percent cotton|relaxed fit|athletic cut|moisture wicking|pack of 3|tagless|slub knit|pocket tee|"
              "long sleeve|tie dye",
              (8, 40), "layering|casual weekends|workouts|lounging", "wardrobe basic",
              values="White|Black|Heather Gray|Navy|Olive|Mauve|Mustard|Sky Blue"),
        _type("hoodie", "a hoodie", "Clothing > Hoodies & Sweatshirts",
              "Hoodie|Pullover Sweatshirt|Zip Up Hoodie",
              "fleece lined|oversized fit|kangaroo pocket|full zip|cropped|heavyweight cotton|drawstring hood|"
              "thumb holes|sherpa lined|quarter zip",
              (18, 90), "chilly mornings|campus|lounging at home|travel days", "wardrobe basic",
              values="Black|Heather Gray|Navy|Forest Green|Cream|Maroon|Dusty Blue|Oatmeal"),
        _type("ankle socks", "a pack of socks", "Clothing > Socks & Hosiery",
              "Ankle Socks|Crew Socks|Athletic Socks",
              "cushioned sole|6 pairs|moisture wicking|no show|compression fit|merino wool|arch compression|"
              "seamless toe|heel tab|low cut",
              (8, 30), "running|hiking|everyday wear|long shifts", "wardrobe basic",
              values="White|Black|Gray|Multicolor|Navy|Pastel|Striped|Neon"),
        _type("crossbody bag", "a crossbody bag", "Handbags & Wallets > Crossbody Bags",
              "Crossbody Bag|Shoulder Purse|Sling Bag",
              "vegan leather|adjustable strap|multiple pockets|rfid blocking|water resistant nylon|chain strap|"
              "belt bag|zip closure|quilted|small and lightweight",
              (15, 120), "travel|date nights|festivals|everyday errands", "accessory",
              values="Black|Tan|Cream|Olive|Burgundy|Cognac|Blush|Navy", then="wallet"),
        _type("sunglasses", "a pair of sunglasses", "Accessories > Sunglasses",
              "Sunglasses|Polarized Sunglasses|Aviator Sunglasses",
              "polarized lenses|uv400 protection|oversized frame|cat eye|lightweight metal frame|round retro|"
              "mirrored lenses|spring hinges|sports wraparound|case included",
              (10, 150), "driving|beach days|fishing|summer vacations", "accessory",
              values="Black|Tortoise|Gold|Silver|Clear|Brown Gradient|Blue Mirror|Rose"),
        _type("baseball cap", "a baseball cap", "Accessories > Baseball Caps",
              "Baseball Cap|Dad Hat|Trucker Hat",
              "adjustable strap|washed cotton|mesh back|embroidered logo|low profile|quick dry|ponytail opening|"
              "sun protection|curved brim|unstructured",
              (8, 40), "golf|running|bad hair days|ballgames", "accessory",
              values="Black|Khaki|Navy|White|Olive|Pink|Denim|Red"),
        _type("sandals", "a pair of sandals", "Shoes > Sandals",
              "Sandals|Slide Sandals|Flip Flops",
              "arch support footbed|cloud cushion|adjustable straps|waterproof eva|cork footbed|non-slip sole|platform|"
              "braided leather|quick drying|wide fit",
              (12, 90), "the beach|summer errands|the pool|vacation", "pair of shoes",
              values="Black|Tan|White|Brown|Gold|Navy|Blush|Olive"),
        _type("jeans", "a pair of jeans", "Clothing > Jeans",
              "Jeans|Skinny Jeans|Straight Leg Jeans",
              "high rise|stretch denim|distressed|bootcut|slim fit|button fly|classic five pocket|ankle length|"
              "dark wash|relaxed straight",
              (20, 110), "work|weekends|date nights|everyday wear", "wardrobe basic",
              values="Light Wash|Medium Wash|Dark Wash|Black|White|Indigo|Gray|Vintage Blue"),
        _type("rain jacket", "a rain jacket", "Clothing > Coats, Jackets & Vests",
              "Rain Jacket|Waterproof Windbreaker|Lightweight Raincoat",
              "waterproof shell|packable|adjustable hood|breathable lining|zippered pockets|reflective trim|windproof|"
              "long length|fleece lining|taped seams",
              (30, 160), "rainy commutes|hiking|dog walks|travel", "outerwear piece",
              values="Black|Yellow|Navy|Olive|Red|Teal|Khaki|Gray"),
        _type("earrings", "a pair of earrings", "Jewelry > Earrings",
              "Stud Earrings|Hoop Earrings|Drop Earrings",
              "hypoallergenic|14k gold plated|sterling silver posts|cubic zirconia|small huggie hoops|faux pearl drops|"
              "set of 6 pairs|nickel free|gift box|screw back",
              (8, 90), "gifts|everyday wear|weddings|the office", "jewelry piece",
              values="Gold|Silver|Rose Gold|White Gold|Champagne|Black|Two Tone|Crystal"),
        _type("wallet", "a wallet", "Handbags & Wallets > Wallets",
              "Wallet|Card Holder|Bifold Wallet",
              "genuine leather|rfid protection|slim minimalist|coin pocket|zipper closure|id window|money clip|"
              "trifold|gift packaging|wristlet strap",
              (10, 80), "everyday carry|travel|front pocket carry|gifts", "accessory",
              values="Black|Brown|Tan|Navy|Burgundy|Gray|Green|Pink"),
    ),
)

HEALTH = Category(
    main="Health & Personal Care",
    top="Health & Household",
    interest="Health and personal care",
    areas=_split("bathroom cabinet|wellness routine|self-care routine|medicine cabinet"),
    suffixes=_split("Health|Wellness|Care|Naturals|Nutrition"),
    extra_features=_split(
        "Made in a GMP-certified facility and checked by an independent lab for purity|"
        "Talk with your doctor before use if you are pregnant, nursing or taking medication|"
        "Free from parabens, phthalates and artificial dyes|"
        "Backed by the {store} satisfaction guarantee for 90 days"
    ),
    details=(("Age Range", _split("Adult|Adult and Teen|All Ages")),
             ("Item Form", _split("Softgel|Gummy|Powder|Cream|Lotion|Liquid|Device|Stick"))),
    types=(
        _type("vitamin D3 supplement", "a vitamin D3 supplement", "Vitamins, Minerals & Supplements > Vitamin D",
              "Vitamin D3 Softgels|Vitamin D3 Supplement|D3 K2 Capsules",
              "5000 iu|with vitamin k2|olive oil softgels|third party tested|one a day|gluten free|vegan lichen source|"
              "easy to swallow|immune support|bone health",
              (8, 35), "the winter months|immune support|daily wellness|the whole family", "supplement",
              axis="Unit Count", values="60 Count|90 Count|120 Count|180 Count|240 Count|360 Count"),
        _type("multivitamin gummies", "a bottle of multivitamin gummies",
              "Vitamins, Minerals & Supplements > Multivitamins",
              "Multivitamin Gummies|Daily Multivitamin|Gummy Vitamins",
              "for women|for men|sugar free|with biotin|vegetarian|natural fruit flavors|two a day|"
              "no artificial colors|"
              "kids formula|with probiotics",
              (10, 40), "daily wellness|picky eaters|busy schedules|travel", "supplement",
              axis="Unit Count", values="60 Count|90 Count|120 Count|150 Count|200 Count|300 Count"),
        _type("electric toothbrush", "an electric toothbrush", "Oral Care > Power Toothbrushes",
              "Electric Toothbrush|Sonic Toothbrush|Rechargeable Toothbrush",
              "40000 vpm sonic|5 cleaning modes|2 minute smart timer|travel case|8 brush heads|pressure sensor|"
              "wireless charging|30 day battery|whitening mode|soft bristles",
              (20, 150), "sensitive gums|travel|braces|the whole family", "oral care item",
              values="White|Black|Pink|Blue|Mint|Purple|Rose Gold|Gray"),
        _type("facial moisturizer", "a facial moisturizer", "Skin Care > Face Moisturizers",
              "Face Moisturizer|Hydrating Cream|Daily Face Lotion",
              "hyaluronic acid|spf 30|fragrance free|oil free|ceramides|for sensitive skin|night cream|"
              "vitamin c brightening|non-comedogenic|lightweight gel",
              (10, 70), "dry winter skin|a morning routine|wearing under makeup|nighttime", "skincare product",
              axis="Size", values="1 oz|1.7 oz|2.5 oz|3.4 oz|4 oz|2 Pack", then="sunscreen"),
        _type("shampoo", "a shampoo", "Hair Care > Shampoos",
              "Shampoo|Clarifying Shampoo|Shampoo and Conditioner Set",
              "sulfate free|argan oil|for curly hair|volumizing|tea tree scalp care|color safe|biotin thickening|"
              "paraben free|moisturizing|32 oz bottle",
              (6, 40), "daily washing|colored hair|an itchy scalp|fine hair", "hair care product", axis="Scent",
              values="Coconut|Lavender|Tea Tree|Citrus|Unscented|Rosemary Mint|Vanilla|Eucalyptus"),
        _type("collagen powder", "a tub of collagen powder", "Vitamins, Minerals & Supplements > Collagen",
              "Collagen Peptides|Collagen Powder|Hydrolyzed Collagen",
              "grass fed|unflavored|types i and iii|mixes easily|keto friendly|with hyaluronic acid|20g per serving|"
              "marine sourced|30 servings|non-gmo",
              (15, 55), "morning coffee|smoothies|joint support|skin and hair", "supplement", axis="Flavor",
              values="Unflavored|Chocolate|Vanilla|Berry|Lemon|Coffee"),
        _type("probiotic", "a probiotic", "Digestive Health > Probiotics",
              "Probiotic Capsules|Daily Probiotic|Digestive Probiotic",
              "50 billion cfu|shelf stable|delayed release capsules|for women|10 strains|prebiotic blend|dairy free|"
              "refrigerated|once daily|digestive support",
              (12, 50), "gut health|travel|after antibiotics|bloating", "supplement",
              axis="Unit Count", values="30 Count|60 Count|90 Count|120 Count"),
        _type("sunscreen", "a sunscreen", "Skin Care > Sunscreens",
              "Sunscreen Lotion|Mineral Sunscreen|Sunscreen Stick",
              "spf 50|water resistant 80 minutes|reef friendly|zinc oxide|tinted|non-greasy|for face|sport formula|"
              "baby safe|broad spectrum",
              (8, 40), "beach days|daily wear|outdoor sports|the kids", "skincare product",
              axis="Size", values="1.7 oz|3 oz|5 oz|8 oz|2 Pack|Travel Size", then="lip balm"),
        _type("lip balm", "a pack of lip balm", "Skin Care > Lip Care",
              "Lip Balm|Lip Treatment|Lip Mask",
              "beeswax|spf 15|tinted|overnight repair|6 pack|shea butter|unscented|peppermint tingle|vegan|"
              "travel size",
              (4, 20), "chapped winter lips|the purse|ski trips|overnight care", "skincare product", axis="Flavor",
              values="Vanilla|Mint|Strawberry|Coconut|Honey|Unflavored|Cherry|Lemon"),
        _type("heating pad", "a heating pad", "Health Care > Heating Pads",
              "Heating Pad|Electric Heat Wrap|Microwavable Heat Pack",
              "auto shut off|extra large|moist heat option|6 heat settings|neck and shoulder wrap|"
              "machine washable cover|fast heating|cordless|flannel soft|lumbar support",
              (15, 60), "back pain|sore muscles|cramps|cold nights", "wellness gadget",
              values="Gray|Blue|Pink|Beige|Navy|Purple"),
        _type("digital thermometer", "a thermometer", "Health Care > Thermometers",
              "Digital Thermometer|Forehead Thermometer|Ear Thermometer",
              "no touch infrared|1 second reading|fever alarm|memory recall|backlit display|for adults and kids|"
              "silent mode|waterproof tip|flexible tip|batteries included",
              (8, 50), "sick days|the nursery|the first aid kit|travel", "wellness gadget",
              values="White|Blue|Gray|Pink"),
        _type("massage gun", "a massage gun", "Health Care > Massagers",
              "Massage Gun|Percussion Massager|Deep Tissue Massager",
              "6 attachment heads|quiet motor|20 speed levels|long battery life|portable case|lcd touch screen|"
              "lightweight|usb-c charging|deep tissue|mini travel size",
              (30, 200), "post-workout recovery|sore shoulders|tight calves|desk posture", "wellness gadget",
              values="Black|Gray|Blue|White|Green|Red"),
    ),
)

CATEGORIES: tuple[Category, ...] = (ELECTRONICS, HOME, GROCERY, FASHION, HEALTH)

# ---------------------------------------------------------------- product text
# Fields: {Desc} {desc} {noun} {noun_lower} {use} {store}
DESCRIPTOR_FEATURES = _split(
    "{Desc}: makes this {noun_lower} a dependable pick for {use}|"
    "{DESC} — one less thing to think about during {use}|"
    "{Desc} for real life: from {use} to everything in between, this {noun_lower} keeps up|"
    "Why {desc}? Because a good {noun_lower} should work as hard as you do|"
    "{Desc}, tested by our team for months before it ever reached your door|"
    "{Desc} you will notice from day one, especially during {use}|"
    "Customers asked for {desc}, so every {store} {noun_lower} now comes with it|"
    "{DESC}: designed with {use} in mind and checked twice before it ships"
)
# Fields: {store} {noun} {noun_lower} {use} {use2} {d1} {d2} {d3} {value}
DESCRIPTIONS_FIRST = _split(
    "The {store} {noun_lower} is made for {use}, pairing {d1} with {d2}|"
    "Meet the {noun} from {store}: {d1}, {d2} and a finish in {value} that fits right in|"
    "Whether it is {use} or {use2}, this {noun_lower} brings {d1} and {d2} to your routine|"
    "{store} set out to build a {noun_lower} with {d1} that still feels right for {use}|"
    "Designed around {d1} and {d2}, this {noun_lower} takes the guesswork out of {use}"
)
DESCRIPTIONS_SECOND = _split(
    "Every order is backed by the {store} support team|"
    "It is our answer for people who want {d3} without paying for extras they never use|"
    "Thousands of customers already keep one at home for {use2}|"
    "Choose the {value} finish or pick your favorite from the full {store} range|"
    "A small detail like {d3} is what keeps people coming back to {store}"
)

# ---------------------------------------------------------------- stores
STORE_ONSETS = _split("B|Br|C|Cl|D|Dr|F|Fl|G|Gr|H|J|K|Kr|L|M|N|P|Pr|Qu|R|S|Sk|St|T|Tr|V|W|Z|Ch|Sh|Y")
STORE_VOWELS = _split("a|e|i|o|u|ai|ea|io|y|au|oo")
STORE_CODAS = _split("n|r|x|l|m|s|t|k|v|nd|rt|lo|ra|na|ex|ix|on|vo|za|lia|ro")

# ---------------------------------------------------------------- people
OCCUPATIONS = _split(
    "Teacher|Nurse|Software Engineer|Marketing Manager|Student|Accountant|Graphic Designer|Writer|"
    "Self-employed|Retail Associate|Project Manager|Homemaker|Sales Representative|Engineer|"
    "Healthcare Worker|Small Business Owner|Administrative Assistant|Researcher|Chef|Retired|Other"
)
AGE_BUCKETS = ("18-24", "25-34", "35-44", "45-54", "55-64")
AGE_WEIGHTS = (0.08, 0.38, 0.34, 0.13, 0.07)

ITEM_REFERENCE_BRANDS = _split(
    "Specific products and brands mentioned in reviews|"
    "Frequently names the brand and compares it with earlier purchases|"
    "Mentions brands and product names explicitly"
)
ITEM_REFERENCE_TYPES = _split(
    "Refers to items by product type and how they are used|"
    "Describes products by their features rather than brand names|"
    "General product descriptions with occasional comparisons"
)

FOCUS_ASPECTS = _split(
    "Quality|Price|Value|Durability|Comfort|Functionality|Design|Ease of use|Brand reputation|Packaging|Performance|"
    "Size and fit"
)
# Per aspect: positive | neutral | negative sentence. Fields: {name}
ASPECT_SENTENCES: dict[str, tuple[str, str, str]] = {
    "Quality": ("The quality is genuinely impressive for the money.",
                "Quality is decent, nothing more and nothing less.",
                "The quality feels cheaper than the photos suggest."),
    "Price": ("At this price it is an easy yes.",
              "The price is fair, though I have seen it cheaper.",
              "For what you get, the price is hard to justify."),
    "Value": ("Honestly one of the best values I have found in a while.",
              "Reasonable value if you catch it on sale.",
              "Not good value at all once you factor in the problems."),
    "Durability": ("It has held up to daily use without a scratch so far.",
                   "Time will tell how well it lasts, but it seems sturdy enough.",
                   "It started showing wear after only a couple of weeks."),
    "Comfort": ("It is comfortable enough to forget it is there.",
                "Comfort is okay for short stretches.",
                "It gets uncomfortable quickly, which was a dealbreaker for me."),
    "Functionality": ("Everything works exactly the way it should.",
                      "It does the basic job, but some functions feel like an afterthought.",
                      "Half of the functions did not work the way they were described."),
    "Design": ("The design is clean and looks great in person.",
               "The design is plain but inoffensive.",
               "The design looks nothing like the listing photos."),
    "Ease of use": ("It was ready to go in minutes with zero fuss.",
                    "There is a small learning curve, but nothing too bad.",
                    "Setting it up was a frustrating mess."),
    "Brand reputation": ("This brand keeps earning my trust.",
                         "The brand has a good name, and this one is about what I expected from them.",
                         "I expected a lot more from a brand with this reputation."),
    "Packaging": ("It arrived well packed and ready to gift.",
                  "Packaging was basic but everything arrived intact.",
                  "The packaging was damaged and it showed on the product."),
    "Performance": ("Performance is excellent, better than I hoped.",
                    "Performance is fine for everyday needs.",
                    "Performance was weak from the very first use."),
    "Size and fit": ("The size is spot on, just as the chart promised.",
                     "The size runs a little off, so check the chart twice.",
                     "The sizing is way off, so it had to go back in the box."),
}

# Feature remarks in reviews. Fields: {desc} {use} {name}
FEATURE_REMARKS = {
    "pos": _split(
        "{Desc}? Exactly as advertised.|"
        "I really noticed the {desc} during {use}.|"
        "I picked it for the {desc}, and it delivers.|"
        "What sold me was the {desc}, and it pays off for {use}."
    ),
    "mid": _split(
        "{Desc}? Fine, but not as special as the listing suggests.|"
        "I picked it for the {desc}, which turned out just okay for {use}.|"
        "The {desc} part works, but only just."
    ),
    "neg": _split(
        "The promised {desc} was nowhere to be found.|"
        "I picked it for the {desc}, and that is exactly what failed during {use}.|"
        "Whatever the {desc} was supposed to do, I stopped noticing it after a few days."
    ),
}

# Brand remarks for users who name brands. Fields: {store}
BRAND_REMARKS = {
    "pos": _split("{store} has not let me down yet.|Another solid buy from {store}.|"
                  "I keep going back to {store} for a reason."),
    "mid": _split("Not the best thing I have bought from {store}, but not the worst.|"
                  "{store} usually does a bit better than this."),
    "neg": _split("I am surprised this came from {store}.|This one made me rethink buying from {store}."),
}


@dataclass(frozen=True)
class Tone:
    """A reviewing voice: how a user opens and closes reviews in each mood."""

    labels: tuple[str, ...]
    openers: dict[str, tuple[str, ...]]
    closers: dict[str, tuple[str, ...]]
    length: tuple[int, int]


def _tone(labels: str, pos: str, mid: str, neg: str, close_pos: str, close_mid: str, close_neg: str,
          length: tuple[int, int]) -> Tone:
    return Tone(labels=_split(labels), openers={"pos": _split(pos), "mid": _split(mid), "neg": _split(neg)},
                closers={"pos": _split(close_pos), "mid": _split(close_mid), "neg": _split(close_neg)},
                length=length)


# Opener and closer fields: {name}
TONES: tuple[Tone, ...] = (
    _tone("Enthusiastic, upbeat, expressive|Enthusiastic, supportive, practical|Excited, positive, energetic",
          "Absolutely love this {name}!|Wow, this {name} blew me away!|I am obsessed with this {name}!",
          "Pretty happy with this {name} overall!|What a nice surprise this {name} turned out to be, mostly!",
          "I really wanted to love this {name}, but no.|Oh no, this {name} was a letdown!",
          "Go get one, you will not regret it!|Highly, highly recommend!",
          "Still worth a try if you are curious!|Not perfect, but still fun!",
          "Sadly sending it back!|Hoping the next one is better!", (3, 5)),
    _tone("Concise, practical, to the point|Brief, matter-of-fact, practical",
          "Does what it says.|Solid {name}.|Works as expected.",
          "It is fine.|Average {name}.",
          "Would not buy again.|Disappointing {name}.",
          "Recommended.|Good buy.", "It will do.|Okay for the price.", "Skip it.|Returned.", (2, 3)),
    _tone("Detailed, analytical, methodical|Detailed, informative, thorough|Analytical, balanced, precise",
          "After about three weeks of daily use, here is my take on this {name}.|"
          "I compared several options before settling on this {name}, and I am glad I did.",
          "I have used this {name} for a while now, so here are the pros and cons.|"
          "This {name} gets some things right and others not quite.",
          "I gave this {name} a fair trial before writing this.|"
          "I tested this {name} carefully, and the results were not good.",
          "All things considered, it earns its place.|Overall, the strengths clearly outweigh the weaknesses.",
          "On balance, it is an acceptable middle-of-the-road option.|Weigh the trade-offs before buying.",
          "On balance, I cannot recommend it.|There are better options at this price point.", (4, 5)),
    _tone("Friendly, conversational, warm|Friendly, informative, enthusiastic|Warm, chatty, relatable",
          "So I finally got around to trying this {name}, and I love it.|"
          "Okay, friends, this {name} is a keeper.",
          "So here is the thing about this {name}: it is fine, just fine.|"
          "I have mixed feelings about this {name}, to be honest.",
          "I hate writing bad reviews, but this {name} earned one.|"
          "So, this {name} and I did not get along.",
          "Hope this helps someone decide!|Happy shopping, everyone!",
          "Hope this helps!|Your mileage may vary, of course.",
          "Hope this saves someone the hassle!|Learn from my mistake, friends.", (3, 5)),
    _tone("Critical, honest, discerning|Honest, direct, critical|Skeptical, careful, direct",
          "I am hard to please, but this {name} won me over.|"
          "I do not hand out praise easily, yet this {name} earns it.",
          "This {name} is serviceable, nothing more.|Mediocre {name}, as I half expected.",
          "This {name} does not live up to the hype.|Frankly, this {name} is overpriced for what it is.",
          "Well deserved praise.|A rare product that meets its claims.",
          "Adequate, but I will keep looking.|It meets the bare minimum.",
          "Save your money.|Not recommended.", (3, 4)),
    _tone("Casual, humorous, lighthearted|Playful, casual, witty|Humorous, relaxed, honest",
          "This {name} and I are now best friends.|Ten out of ten for this {name}, my new favorite child.",
          "This {name} is the human equivalent of a shrug.|Not bad, not great, very medium.",
          "This {name} and I are officially broken up.|If disappointment were a {name}, this would be it.",
          "My only regret is not buying it sooner, ha.|Would high-five the designer.",
          "It is fine, I guess, in a very beige way.|Meh, but a likable meh.",
          "Back in the box it goes, bye.|Lesson learned, the hard way.", (3, 4)),
    _tone("Formal, informative, balanced|Professional, measured, informative",
          "This {name} performs very well and meets every stated specification.|"
          "I am pleased to report that this {name} exceeded my expectations.",
          "This {name} is satisfactory, with a few reservations.|"
          "This {name} meets most, though not all, of its stated claims.",
          "Regrettably, this {name} did not meet my expectations.|"
          "I must report that this {name} fell short in several respects.",
          "I would recommend it without hesitation.|It is a sound purchase.",
          "It is suitable for modest requirements.|It may suit buyers with simpler needs.",
          "I would advise prospective buyers to consider alternatives.|I cannot endorse this product.", (3, 5)),
    _tone("Warm, supportive, family-focused|Positive, caring, practical|Supportive, kind, family-oriented",
          "My whole family loves this {name}.|This {name} made our busy mornings so much easier.",
          "The kids think this {name} is okay, and so do I.|This {name} works for our family, mostly.",
          "Unfortunately this {name} did not work for our household.|We were let down by this {name}.",
          "A win for our family!|I have already recommended it to my sister.",
          "Good enough for a busy household.|Fine for families who are not too picky.",
          "We will be trying something else.|Not a fit for our home, sadly.", (3, 5)),
)

SIGNATURES = _split(
    "No regrets at all.|Would buy again in a heartbeat.|Keeping this one in the rotation.|"
    "My wallet and I both approve.|Exactly what it says on the tin.|Five stars from this picky shopper.|"
    "Consider my expectations met.|Already thinking about a second one.|This one stays in the cart for good.|"
    "Worth every penny, truly.|Big thumbs up from me.|Chalk this up as another win.|"
    "It earned a permanent spot in my house.|That is all you need to know.|Trust me on this one.|"
    "I have zero complaints.|A small thing that makes life easier.|Just buy it already.|"
    "Another happy box on my doorstep.|Simple, honest and reliable.|Cannot ask for more than that.|"
    "Good stuff, plain and simple.|My go-to from now on.|This is now on my reorder list.|"
    "Definitely a keeper in my book.|Happy camper over here.|It made my week, honestly.|"
    "Lesson learned: read the fine print.|Buyer beware, as always.|As always, your experience may differ.|"
    "Take that for what it is worth.|End of story.|Just my two cents.|Onward to the next purchase.|"
    "Hats off to whoever designed this.|Count me as a repeat customer.|I will be watching for the next version.|"
    "Pleasantly surprised, all things said.|Cheers to small upgrades.|Bottom line: it works.|"
    "Thanks for reading my little review.|Hope my notes help a fellow shopper.|Adding it to my gift list.|"
    "I checked it twice to be sure.|The real test is daily life, and it passed.|Quality speaks for itself.|"
    "Fair is fair.|Not a bad day at all.|Glad I took the chance.|Still smiling about this one."
)

REVIEW_TITLES = {
    "pos": _split(
        "Love it|Exactly what I needed|Great {name}|Five stars|Highly recommend|Better than expected|"
        "Worth it|My new favorite {name}|So glad I bought this|Perfect for me|Works beautifully|A real keeper"
    ),
    "mid": _split("It is okay|Decent {name}|Average at best|Does the job|Mixed feelings|Fine, not great"),
    "neg": _split(
        "Disappointed|Not worth it|Returned it|Poor quality {name}|Would not recommend|Broke quickly|"
        "Not as described|Save your money"
    ),
}

# ---------------------------------------------------------------- instructions
SEARCH_OPENERS = _split(
    "I'm looking for|Can you find me|Help me find|I need|Please search for|I want to buy|Show me|"
    "Could you look up|I'd like to get|Find me|I'm shopping for|Track down"
)
# Fields: {d1} {d2}
ATTRIBUTE_CLAUSES_ONE = _split(
    "— {d1}|({d1})|, must have {d1}|, ideally {d1}|that lists {d1}|with {d1} in the specs"
)
ATTRIBUTE_CLAUSES_TWO = _split(
    "— {d1} and {d2}|({d1}, {d2})|, must have {d1} and {d2}|that lists {d1} and {d2}|"
    "with {d1} and {d2} in the specs|, ideally {d1} plus {d2}"
)
VALUE_CLAUSES = _split("in {value}|, ideally {value}|— {value} if possible|in a {value} option")
IMPLICIT_BRAND = _split(
    "from a brand I usually trust|like the ones I normally get|from the store I keep going back to|"
    "ideally from one of my go-to brands|from the brand I stuck with before|by a maker I already know|"
    "from a shop I have ordered from before|from one of the brands I rely on|"
    "the kind I tend to buy|preferably from a familiar brand"
)
EXPLICIT_BRAND = _split("from {store}|made by {store}|— {store} if possible|by {store}|from the {store} store")
PRICE_HINTS = _split(
    "within my usual budget|at a price I'd normally pay|not far from what I usually spend|"
    "priced like my usual picks|in my normal price range"
)
CONTEXT_SENTENCES = _split(
    "I'll mostly use it for {use}.|It's for {use}.|Mainly for {use}.|I need it for {use}.|"
    "It would be for {use}."
)
CLOSERS = _split(
    "Thanks!|Thank you.|Appreciate it.|Thanks in advance.|Quick help would be great.|Nothing fancy.|"
    "I'm in no rush.|Let me know what you find.|Surprise me a little.|Keep it simple.|It's a gift for me.|"
    "I need it soon.|Happy to compare a few.|The sooner the better.|Please and thank you."
)

RECOMMEND_TEMPLATES = _split(
    "Recommend {obj} {rel}.|Can you suggest {obj} {rel}?|What should I buy next? I'd like {obj} {rel}.|"
    "I'm ready for another purchase — show me {obj} {rel}.|Any ideas for {obj} {rel}?|"
    "Pick out {obj} for me {rel}.|Based on what I've bought before, find me {obj}.|"
    "What should I get next? Maybe {obj} {rel}.|I'm in the mood for {obj} {rel}.|"
    "Could you recommend {obj} {rel}?"
)
RECOMMEND_OBJECTS_GENERIC = _split("something new|something I'd like|a new find|something fresh")
# Fields: {area} / {loose}
RECOMMEND_OBJECTS_AREA = _split("something new for my {area}|something for my {area}|a new addition to my {area}")
RECOMMEND_OBJECTS_LOOSE = _split("a new {loose}|another {loose}|a good {loose}|one more {loose}")
RECOMMEND_RELATIVES = _split(
    "that fits my taste|that matches what I usually buy|in line with my recent orders|that suits my style|"
    "that I'd actually use|that goes with my previous purchases|similar to things I've liked|"
    "that feels like me|based on my shopping history|that works with what I already have|"
    "that matches my habits|that I'd probably pick myself"
)
RECOMMEND_EXTRAS = _split(
    "You know what I like.|Keep it close to my usual price.|Surprise me, but stay in my lane.|"
    "Nothing too far from my usual stuff.|I trust your judgment.|I like sticking with what works.|"
    "No wild experiments, please.|Something I'd reorder would be ideal.|Keep my favorite brands in mind."
)

REVIEW_TEMPLATES = _split(
    "Write a review for the {item} I bought.|Help me post a review of my {item}.|"
    "I'd like to leave feedback on the {item} I ordered.|Please add a review for the {item}.|"
    "Can you write up my review of the {item}?|Draft a review of the {item} I purchased.|"
    "Leave a review for the {item} for me.|Time to review the {item} I got."
)
REVIEW_FEELINGS = {
    "pos": _split("I'm really happy with it.|It turned out great.|I loved it.|It exceeded my hopes."),
    "mid": _split("It was just okay.|I have mixed feelings.|It was fine, nothing special."),
    "neg": _split("It let me down.|I was not impressed.|It did not work out for me."),
}
