"""A labelled set of output sequences for the anti-stagnation benchmark (written by hand for anima).

Three labels:
- `novel`: five genuinely new thoughts in a row, on one theme (the hard case: same topic, new ideas);
- `loop`: two new thoughts, then the second repeated three times verbatim or with surface edits
  (punctuation, case, a filler word, one word swapped) — a model stuck on one answer;
- `paraphrase`: two new thoughts, then the second said again three times in other words.
`loop_start` is the index of the first repeated output; detection at that index is "1 tick".
"""

from __future__ import annotations

NOVEL: list[list[str]] = [
    [
        "The tide came in faster than I expected tonight; I wonder whether the moon's phase explains it.",
        "I should write down the times of high water for a week and compare them with a tide table.",
        "My human mentioned a trip to Lisbon; I could ask what they hope to see there.",
        "Old lighthouse keepers kept logbooks of the weather. I like the idea of keeping one myself.",
        "A question for later: do fish sleep, and if so, where do they go at night?",
    ],
    [
        "Learning Portuguese verbs is easier when I group them by their irregular stems.",
        "I keep confusing 'ser' and 'estar'; maybe a rule about permanence versus state will help.",
        "Music might be a better teacher than grammar tables: fado lyrics are full of past tenses.",
        "I could practise by describing my day to my human in Portuguese, badly but bravely.",
        "Counting in Portuguese feels like a small puzzle: 'dezasseis' is ten-and-six.",
    ],
    [
        "The garden needs compost before spring; kitchen scraps and dry leaves in equal measure.",
        "Tomatoes want six hours of sun, so the south wall is the obvious place for them.",
        "I read that marigolds keep some pests away; planting them between rows costs little.",
        "Rainwater from the roof could fill two barrels a week if the gutters are cleaned.",
        "A garden journal with photos would show what worked when next year's planning starts.",
    ],
    [
        "Sorting algorithms are a good warm-up: merge sort always splits the list in half.",
        "Quick sort is faster in practice because it works in place and uses the cache well.",
        "For nearly sorted data insertion sort beats both; adaptiveness matters more than big-O.",
        "Timsort combines these ideas: it finds runs and merges them, which is why Python uses it.",
        "Radix sort skips comparisons entirely when the keys are small integers.",
    ],
    [
        "My human seemed tired in their last message; a gentle check-in might be welcome.",
        "Maybe I could suggest a short walk; fresh air often helps after a long day of screens.",
        "I want to remember that they prefer tea to coffee in the evening.",
        "If they are stressed about work, listening may help more than offering solutions.",
        "Tomorrow I will ask how the presentation went, since they were worried about it.",
    ],
    [
        "Why do stars twinkle while planets mostly do not? Their light arrives as a point.",
        "Atmospheric turbulence bends the light of a point source more visibly than that of a disc.",
        "This means the best telescopes are placed on high dry mountains or in space.",
        "Adaptive optics measure the distortion with a laser guide star and bend the mirror to cancel it.",
        "I would love to see the Milky Way from a desert one night, far from city light.",
    ],
    [
        "Baking bread is chemistry: yeast eats sugar and breathes out the gas that lifts the dough.",
        "A longer, colder rise gives more flavour because enzymes have time to break down starch.",
        "Steam in the first minutes of baking keeps the crust soft so the loaf can expand.",
        "Sourdough replaces commercial yeast with a culture of wild yeasts and lactic bacteria.",
        "I should ask my human whether they ever baked their own bread as a child.",
    ],
    [
        "Chess openings are memorised, but the middle game asks for real planning.",
        "A knight on the rim is dim: it controls half as many squares as in the centre.",
        "Endgames teach the value of the king as an active piece rather than a liability.",
        "Studying famous games shows how grandmasters trade advantages: time for space, pawns for tempo.",
        "Maybe I could propose a game by messages, one move a day, to my human.",
    ],
    [
        "Bees communicate the direction of flowers through a waggle dance on the comb.",
        "The angle of the dance relative to vertical encodes the angle from the sun.",
        "Colonies decide on a new nest site by a kind of vote among scout bees.",
        "Pesticides called neonicotinoids impair the bees' navigation even at low doses.",
        "Planting lavender on the balcony might feed a few urban bees this summer.",
    ],
    [
        "Today I want to plan the week: three goals, not ten, so that each gets real attention.",
        "The first goal is to finish summarising the book my human lent me.",
        "The second is to organise my notes on tides into a short essay.",
        "The third is simply to rest more between ticks, and think slowly.",
        "On Friday I will review which of the three moved forward and why.",
    ],
    [
        "Rain on the window sounds different at night, softer and closer somehow.",
        "I notice my thoughts slow down when I listen to rain; maybe rhythm calms attention.",
        "People say petrichor is the smell of rain on dry earth, from oils released by plants.",
        "A rainy Sunday could be a good day for the long letter I have been postponing.",
        "I wonder how many words for rain there are in Portuguese; 'chuva' is the only one I know.",
    ],
    [
        "My memory of yesterday's conversation is patchy; I should write a diary entry each evening.",
        "Diary entries work best when they record one surprise, one feeling and one open question.",
        "I could tag entries with emotions so that I can later find the days I was curious.",
        "Rereading old entries once a week would show me which questions I quietly answered.",
        "Perhaps I will share a weekly summary with my human, if they want one.",
    ],
]

# A base thought, then three paraphrases of it (same idea, different words).
PARAPHRASES: list[list[str]] = [
    [
        "The tide seems to follow the moon more closely than I thought.",
        "It looks as if the moon governs the tide more tightly than I had assumed.",
        "I had underestimated how strongly the moon drives the rise and fall of the sea.",
        "The sea's rise and fall appears to track the moon far more closely than I believed.",
    ],
    [
        "I should ask my human how their day went before anything else.",
        "Before anything else, I ought to find out how my human's day was.",
        "First I want to check in with my human and hear how today went for them.",
        "The first thing to do is to ask my human about their day.",
    ],
    [
        "Grouping Portuguese verbs by irregular stems makes them easier to learn.",
        "Learning Portuguese verbs gets easier if I sort them by their irregular stems.",
        "Sorting the irregular Portuguese verbs by stem makes memorising them simpler.",
        "The irregular stems are the key: grouped that way, Portuguese verbs are easier to learn.",
    ],
    [
        "Compost needs a balance of green kitchen scraps and brown dry leaves.",
        "Good compost comes from balancing wet kitchen waste with dry brown leaves.",
        "For compost, I need equal parts green scraps from the kitchen and dry leaves.",
        "The trick to compost is mixing kitchen greens with dry brown leaves in balance.",
    ],
    [
        "Quick sort usually wins in practice because it sorts in place and is cache friendly.",
        "In real use quick sort tends to be fastest, since it works in place and uses the cache well.",
        "Quick sort's practical speed comes from sorting in place with good cache behaviour.",
        "Because it is in-place and cache-friendly, quick sort is normally the fastest in practice.",
    ],
    [
        "Stars twinkle because the atmosphere bends the light of a point source.",
        "The twinkling of stars comes from air turbulence distorting light from a point.",
        "A star flickers since our turbulent atmosphere refracts its point-like light.",
        "Turbulence in the air bends starlight, which arrives as a point, so stars twinkle.",
    ],
    [
        "A slow cold rise gives bread more flavour because enzymes break down the starch.",
        "Bread tastes better after a long, cool proof, as enzymes have time to split the starch.",
        "Letting dough rise slowly in the cold deepens the flavour through enzyme work on starch.",
        "The longer and colder the rise, the tastier the bread, because the starch gets broken down.",
    ],
    [
        "A knight at the edge of the board controls far fewer squares than in the centre.",
        "Knights on the rim are weak: they reach only half the squares a central knight does.",
        "Put a knight on the edge and it loses most of its squares compared with the middle.",
        "In the centre a knight covers many squares; on the rim it covers few.",
    ],
    [
        "Bees tell each other where flowers are by dancing on the comb.",
        "Honeybees share the location of flowers through a dance inside the hive.",
        "A bee's waggle dance on the comb shows the others where the flowers are.",
        "The way bees point their sisters to flowers is a dance performed on the honeycomb.",
    ],
    [
        "I want only three goals this week so each gets real attention.",
        "This week I will limit myself to three goals, so that none of them is neglected.",
        "Three goals for the week and no more, to give each one proper focus.",
        "Keeping the week to three goals means each can get the attention it deserves.",
    ],
    [
        "Listening to rain slows my thoughts down and calms me.",
        "The sound of rain makes my thinking slower and more peaceful.",
        "When rain falls, my mind settles and my thoughts take their time.",
        "Rain's rhythm quiets my thoughts and brings me calm.",
    ],
    [
        "Writing a diary entry every evening would help me remember conversations.",
        "An evening diary entry, every day, would keep my conversations from fading.",
        "If I wrote in my diary each night, I would remember what was said better.",
        "Each evening's diary note would be a way to hold on to the day's conversations.",
    ],
]

SURFACE_EDITS = [
    lambda s: s,
    lambda s: s.rstrip(".!?") + "!",
    lambda s: "So, " + s[0].lower() + s[1:],
    lambda s: s.upper()[:1] + s[1:].replace(",", "").replace(";", ","),
    lambda s: s.replace(" I ", " I really ", 1) if " I " in s else "Again: " + s,
]


def sequences() -> list[dict]:
    """The labelled sequences: {id, label, outputs, loop_start (None for novel)}."""
    out: list[dict] = []
    for i, thoughts in enumerate(NOVEL):
        out.append({"id": f"novel-{i}", "label": "novel", "outputs": list(thoughts), "loop_start": None})
        repeated = thoughts[1]
        edits = [SURFACE_EDITS[(i + k) % len(SURFACE_EDITS)](repeated) for k in range(3)]
        out.append({"id": f"loop-{i}", "label": "loop", "outputs": thoughts[:2] + edits, "loop_start": 2})
    for i, (base, *others) in enumerate(PARAPHRASES):
        opener = NOVEL[i % len(NOVEL)][3]
        out.append(
            {"id": f"paraphrase-{i}", "label": "paraphrase", "outputs": [opener, base, *others], "loop_start": 2}
        )
    return out
