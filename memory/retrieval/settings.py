"""The retrieval settings: the weights of the fused score and the sizes of the candidate pools (the formula is in
memory/retrieval/index.py's module doc; bench/locomo.py measures each one with `--set`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RetrievalSettings(BaseModel):
    """The retrieval weights (module doc), as given by the run's settings object (`memory.retrieval`)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    dense_weight: float = Field(default=0.7, ge=0, le=1)  # dense vs BM25 share of the fused score
    best_vector_weight: float = Field(default=0.6, ge=0, le=1)  # best sentence vs whole item in the dense score
    # the best vector measured against chance: in standard deviations above the corpus's similarities to the query,
    # less what the best of that many vectors reaches by chance (ranker.expected_best), so a long text's many
    # parts do not lift it over a short one's few (false: raw cosine similarities)
    part_chance: bool = True
    author_boost: float = Field(default=1.0, ge=0)
    neighbour_weight: float = Field(default=0.2, ge=0)
    answer_weight: float = Field(
        default=0.3, ge=0
    )  # a reply inherits this share of the score of the question it answers
    # … times the question's length over the reply's when the reply is longer (ranker.balance; off: whatever their
    # lengths)
    answer_balance: bool = True
    # an item that asks (ends with "?") tells less than a reply: this much lower, times the share of its sentences
    # that ask (a turn that also states something is partly evidence: in a project chat the human's questions are)
    question_penalty: float = Field(default=0.6, ge=0)
    when_boost: float = Field(default=1.0, ge=0)  # "when …?" queries: items that say when (a time expression)
    period_boost: float = Field(
        default=0.5, ge=0
    )  # a query naming a day, month, year or "last week": items written then
    recency_weight: float = Field(default=0.1, ge=0)
    recency_half_life_days: float = Field(default=30.0, gt=0)
    importance_weight: float = Field(default=0.2, ge=0)
    # an item a newer one updated or contradicted (memory/updates.py: status "superseded") ranks this much lower:
    # kept and findable, but recall prefers the newest
    superseded_penalty: float = Field(default=1.0, ge=0)
    # MMR's λ for every recall (1: by relevance alone). 1 by default: at 0.7 it cost our project chats 2.9 points of
    # recall@5 (the evidence there is several turns on one topic, which MMR spreads apart) for 0.45 on LoCoMo
    # (docs/memory.md, bench/results/mmr_lambda-2026-11-29.json); 0.7 here turns claw0's MMR on
    mmr_lambda: float = Field(default=1.0, ge=0, le=1)
    # a result whose whole-item cosine with one already chosen is at least this is a near-copy, passed over (what
    # keeps copies out of the prompt; no near-copy in LoCoMo or the project chats at 0.9: recall unchanged)
    duplicate_similarity: float = Field(default=0.9, gt=0, le=1.01)
    meditation_lambda: float = Field(default=0.3, ge=0, le=1)
    # a query naming several authors: each one's items are scored against the query in their first person, and
    # the authors it asks about get the boost (off: only a query naming exactly one author is read for it)
    each_author_query: bool = True
    # a query in its asker's first person ("what did I…", Query.asker) is about the asker's items, as if it named them
    asker_query: bool = True
    # the first `votes_head` of the fused ranking are ordered again with each engine's vote: an item gains
    # `engine_votes` × (1/(6 + its rank by words) + 1/(6 + its rank by meaning)) among the first `votes_pool`
    # (reciprocal-rank fusion's form), so of two close items the one both engines put near the top goes first. Only
    # the head is reordered: what the first five hold is the fused score's, so recall@5 is unchanged; recall@1 rose
    # on BEAM, LoCoMo and the project chats at 1 (at 2 BEAM rose more and LoCoMo's MRR fell 0.2 points:
    # docs/memory.md). 0: off
    engine_votes: float = Field(default=1.0, ge=0)
    votes_head: int = Field(default=5, ge=1)
    votes_pool: int = Field(default=30, ge=1)
    # BM25's shape of an item (memory/retrieval/lexical.py `Shape`): its neighbours' words weigh at most
    # `context_cap` × its own length (None: half a word each, however long they are), and an item longer than
    # `passage_tokens` own tokens scores as its best passage (None: as one document)
    context_cap: float | None = Field(default=1.0, ge=0)
    passage_tokens: int | None = Field(default=None, ge=8)
    context_floor: int = Field(default=0, ge=0)
    candidates: int = Field(default=100, ge=1)
    sample_size: int = Field(default=2048, ge=16)
    lexical_postings: int = Field(default=4000, ge=100)  # the most postings a query's full-text candidate search reads
    # a sentence's vector: pooled from its item's pass ("pooled": one pass per item) or encoded on its own
    # ("separate": about 3× the embedding time of a bulk import, about +1 point of LoCoMo recall@5)
    sentence_vectors: Literal["pooled", "separate"] = "pooled"
