"""The ranker of the memory index (memory/retrieval/index.py): candidates from both engines, the fused score, the
episode's neighbours, and MMR (the formula is in index.py's module doc).

It reads what it ranks through the caches (memory/retrieval/caches.py), the dense candidates from the vector store
and the write journal's queue, and the query's reading (named authors, periods, "when …?") from
memory/retrieval/query.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np

from memory.db import Database
from memory.models import MemoryItem
from memory.repositories import Repos
from memory.retrieval import query as reading
from memory.retrieval.caches import Ranked, RetrievalCaches, timestamp
from memory.retrieval.emotion_focus import emotions_match
from memory.retrieval.journal import WriteJournal
from memory.retrieval.lexical import CorpusSample, Shape, idf, selective_terms
from memory.retrieval.lexical import scores as bm25_scores
from memory.retrieval.settings import RetrievalSettings
from memory.retrieval.vector_store import VectorStore
from memory.text import tokenize

DENSE_SAMPLE = 512  # of the sample, the items whose vectors estimate the dense scores' spread (a restarted
# process reads them from the database before its first answer)
DF_EXACT_UP_TO = 1000  # PostgreSQL counts a term's documents up to this; past it the sample estimates
DEEPER = 4  # a search the near-copy guard left short of k distinct hits asks the engines for 4× the candidates …
DEEPEST = 16  # … up to 16× the configured pool (Ranker.rank)


@dataclass
class Query:
    text: str
    k: int = 5
    tiers: list[str] | None = None
    tags: list[str] | None = None
    tags_mode: str = "or"  # or | and
    emotions: list[str] | None = None
    since: datetime | None = None  # record time (when it was stored)
    until: datetime | None = None
    happened_since: datetime | None = None  # event time (when it happened: memory/event_time.py; else record time)
    happened_until: datetime | None = None
    mode: str = "standard"  # standard | concentration | meditation
    include_archived: bool = False
    exclude: set[int] = field(default_factory=set)
    mmr_lambda: float | None = None  # overrides the configured λ (the memory manager's diversity_boost)
    distinct: bool = True  # pass over a near-copy of a hit already chosen (off: every near-copy, e.g. updates.py)
    # who asks (an author of memories: the human whose note recall searches for): a query in the first person
    # ("what did I say about…") is about that author's own words, as if it named them
    asker: str | None = None
    addressee: str | None = None  # whom it asks (the persona): "what did you recommend?" is about their words


@dataclass
class Hit:
    item: MemoryItem
    score: float
    parts: dict[str, float]


@dataclass
class QueryReading:
    """What the ranker reads of a query once, however many candidates it ranks (Ranker._read)."""

    asked: set[str]  # the authors it asks about (their items get the author boost)
    rewrites: dict[str, str]  # a named author → the query in that author's first person
    dense_text: str  # the dense query of anyone else's items
    dense_texts: list[str]  # every dense query, in the order of `query_vectors`
    now: datetime
    periods: list[tuple[float, float, float]]  # (start, end, weight) of the periods it names
    asks_when: bool
    held: dict[str, int]  # its terms' document counts
    weights: dict[str, float]  # its terms' BM25 weights
    query_vectors: np.ndarray


@dataclass
class Fused:
    """One pass of candidates and their fused scores (Ranker._fuse)."""

    ranked: list[int]  # what the query may return, best first
    final: dict[int, float]
    parts: dict[int, dict[str, float]]
    vectors: dict[int, np.ndarray]
    truncated: bool  # an engine gave as many candidates as it was asked for: it may have more


@lru_cache(maxsize=1)
def _expected_best_table(size: int = 4096) -> np.ndarray:
    from statistics import NormalDist

    normal = NormalDist()
    return np.array([0.0, 0.0] + [normal.inv_cdf((n - 0.375) / (n + 0.25)) for n in range(2, size)])


def expected_best(counts: np.ndarray) -> np.ndarray:
    """What the best of n independent standard normal draws reaches on average (Blom's approximation), per n: the
    chance level of an item's best vector among its n."""
    table = _expected_best_table()
    return np.asarray(table[np.minimum(counts, len(table) - 1)], dtype=np.float64)


def balance(question: int, reply: int) -> float:
    """The share of its question's relevance a reply inherits, by their lengths: all of it when the reply is no
    longer than the question, else the question's length over the reply's. A short reply leans on its question ("A
    sunrise!" after "What did you paint?"); a reply of 3,000 characters to a one-line question says what it is about
    itself, and is found by that. (Lowering a short reply after a long question as well — the lengths' plain ratio
    — gained BEAM dev 0.7 points of recall@5 and cost LoCoMo dev 0.13: docs/memory.md.)"""
    return min(1.0, question / max(reply, 1))


VOTE_RANK_OFFSET = 6  # reciprocal-rank fusion's constant (k + 1, ranks from 0): the first place's vote 1/6


def _places(items: list[int], score: Callable[[int], float]) -> dict[int, int]:
    """Each item's place by `score`, highest first, ties sharing the better place (competition ranking: 0, 1, 1, 3):
    two items an engine cannot tell apart get the same vote from it."""
    values = sorted((score(i) for i in items), reverse=True)
    first_at: dict[float, int] = {}
    for place, value in enumerate(values):
        first_at.setdefault(value, place)
    return {i: first_at[score(i)] for i in items}


def engine_votes(
    ranked: list[int],
    final: dict[int, float],
    parts: dict[int, dict[str, float]],
    weight: float,
    head: int,
    pool: int,
) -> list[int]:
    """The ranking with its first `head` ordered again by their fused score plus each engine's vote (settings'
    `engine_votes`): `weight` × the reciprocal of the item's rank by its BM25 part and by its dense part among the
    first `pool`. The head's scores only rise, so it stays ahead of the rest; its members are the fused score's.
    `final` and `parts` take the votes (parts' "votes")."""
    among = ranked[:pool]
    by_words = _places(among, lambda i: parts[i]["bm25"])
    by_meaning = _places(among, lambda i: parts[i]["dense"])
    first = ranked[:head]
    for i in first:
        vote = weight * (1 / (VOTE_RANK_OFFSET + by_words[i]) + 1 / (VOTE_RANK_OFFSET + by_meaning[i]))
        parts[i]["votes"] = vote
        final[i] += vote
    return sorted(first, key=lambda i: -final[i]) + ranked[head:]


def z_score(value: float, mean: float, std: float) -> float:
    return (value - mean) / std if std > 1e-9 else value - mean


def allowed(meta: Ranked | None, q: Query) -> bool:
    """Whether the query may return this item (status, tiers, time window)."""
    if meta is None or meta.status == "deleted" or (meta.status == "archived" and not q.include_archived):
        return False
    if q.tiers and meta.tier not in q.tiers:
        return False
    if q.since and meta.created < timestamp(q.since):
        return False
    if q.until and meta.created > timestamp(q.until):
        return False
    if q.happened_since and meta.happened < timestamp(q.happened_since):
        return False
    if q.happened_until and meta.happened > timestamp(q.happened_until):
        return False
    return True


def matches_focus(meta: Ranked, q: Query) -> bool:
    """Concentration: tags and/or emotions with thresholds (`anxiety:≥2`; `tags_mode` and|or)."""
    checks = []
    if q.tags:
        wanted = {t.lower() for t in q.tags}
        checks.append(wanted <= meta.tags if q.tags_mode == "and" else bool(wanted & meta.tags))
    if q.emotions:
        checks.append(emotions_match(q.emotions, meta.raw_emotions, q.tags_mode))
    if not checks:
        return True
    return all(checks) if q.tags_mode == "and" else any(checks)


def stack(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Items' vectors as one float32 matrix, with the row where each item starts."""
    starts = np.r_[0, np.cumsum([len(r) for r in rows])[:-1]].astype(np.int64)
    return np.vstack(rows).astype(np.float32), starts


def mmr(
    pool: list[int],
    score: dict[int, float],
    vectors: dict[int, np.ndarray],
    k: int,
    lam: float,
    duplicate: float = 1.0,
    given: Sequence[int] = (),
) -> list[int]:
    """Maximal marginal relevance over min-max-scaled scores and whole-item cosine similarity; a candidate whose
    similarity to one already chosen is at least `duplicate` (a near-copy) is passed over whatever λ is. `given`:
    items chosen before (from an earlier page of the ranking): the up to `k` picked here are measured against them
    too, and only the new picks are returned."""
    if not given and (len(pool) <= 1 or (lam >= 1 and duplicate > 1)):
        return pool[:k]
    if not pool:
        return []
    items = [*given, *pool]
    values = np.array([score[i] for i in pool])
    relevance = np.r_[np.zeros(len(given)), (values - values.min()) / (values.max() - values.min() + 1e-9)]
    dim = next(iter(vectors.values())).shape[1] if vectors else 1
    matrix = np.vstack(
        [vectors[i][0].astype(np.float32) if i in vectors else np.zeros(dim, dtype=np.float32) for i in items]
    )
    similarity = matrix @ matrix.T
    chosen: list[int] = list(range(len(given)))
    left = list(range(len(given), len(items)))
    while left and len(chosen) - len(given) < k:
        if chosen:
            redundancy = similarity[np.ix_(left, chosen)].max(axis=1)
            left = [n for n, r in zip(left, redundancy) if r < duplicate]
            redundancy = redundancy[redundancy < duplicate]
            if not left:
                break
        else:
            redundancy = np.zeros(len(left))
        best = left[int(np.argmax(lam * relevance[left] - (1 - lam) * redundancy))]
        chosen.append(best)
        left.remove(best)
    return [items[i] for i in chosen[len(given) :]]


def pick(
    ranked: list[int],
    score: dict[int, float],
    vectors: dict[int, np.ndarray],
    k: int,
    lam: float,
    duplicate: float,
    page: int,
) -> list[int]:
    """MMR with the near-copy guard over the ranking's first `page` items; when the guard passes over so many that
    fewer than `k` are left, on through the next pages (each against everything chosen before), never a copy."""
    chosen = mmr(ranked[:page], score, vectors, k, lam, duplicate)
    for start in range(page, len(ranked), page):
        if len(chosen) >= k:
            break
        chosen += mmr(ranked[start : start + page], score, vectors, k - len(chosen), lam, duplicate, given=chosen)
    return chosen


def farthest_first(matrix: np.ndarray, k: int) -> list[int]:
    """The rows of `k` mutually most different unit vectors (greedy farthest-first from the last row), in order."""
    chosen = [len(matrix) - 1]  # start from the newest
    closest = matrix @ matrix[chosen[0]]
    while len(chosen) < k:
        closest[chosen] = np.inf
        pick = int(np.argmin(closest))
        chosen.append(pick)
        closest = np.maximum(closest, matrix @ matrix[pick])
    return sorted(chosen)


class Ranker:
    """Hybrid ranking of one query over the index's caches, vector store and write queue."""

    def __init__(
        self,
        db: Database,
        config: RetrievalSettings,
        clock: Callable[[], datetime],
        *,
        caches: RetrievalCaches,
        store: VectorStore,
        journal: WriteJournal,
    ):
        self.db, self.config, self.clock = db, config, clock
        self.caches, self.store, self.journal = caches, store, journal
        self._blas: Any = None  # threadpoolctl's controller (`small_math`)
        self.deeper_rounds = 0  # searches' extra rounds for more candidates since start (bench/retrieval_scale.py)

    def small_math(self) -> AbstractContextManager[Any]:
        """One BLAS thread while ranking: its matrices are small, and two threads on a busy 2-core machine wait for
        each other (measured: a 60×60 product 0.02 ms on one thread, 5 ms on two under load)."""
        if self._blas is None:
            from threadpoolctl import ThreadpoolController

            self._blas = ThreadpoolController()
        limited: AbstractContextManager[Any] = self._blas.limit(limits=1, user_api="blas")
        return limited

    def dense_scores(
        self,
        stacked: tuple[np.ndarray, np.ndarray],
        qv: np.ndarray,
        chance: tuple[float, float, float, float] | None = None,
    ) -> np.ndarray:
        """Per item: w · its best vector's similarity + (1 − w) · its whole-item vector's similarity. With `chance`
        (the mean and spread of every vector's and of whole items' similarities to this query, over the corpus
        sample: `part_chance`), both in standard deviations above chance, the best one's less what the best of that
        many vectors reaches by chance (`expected_best`): an item of many parts is not ahead for having tried more."""
        matrix, starts = stacked
        sims = matrix @ qv
        w = self.config.best_vector_weight
        best, whole = np.maximum.reduceat(sims, starts), sims[starts]
        if chance is not None:
            part_mean, part_std, whole_mean, whole_std = chance
            counts = np.diff(np.r_[starts, len(sims)])
            best = (best - part_mean) / max(part_std, 1e-6) - expected_best(counts)
            whole = (whole - whole_mean) / max(whole_std, 1e-6)
        scores: np.ndarray = w * best + (1 - w) * whole
        return scores

    def _sample_dense(
        self, qv: np.ndarray, repos: Repos
    ) -> tuple[float, float, tuple[float, float, float, float] | None]:
        """Mean and std of the sample's dense scores for this query (z-normalisation of dense scores), and with
        `part_chance` the chance levels `dense_scores` measures against."""
        caches = self.caches
        if caches.sample_matrix is None:
            everyone = caches.corpus.ids if caches.corpus else []
            ids = everyone[:: max(1, len(everyone) // DENSE_SAMPLE)][:DENSE_SAMPLE]  # spread over the (sorted) sample
            vectors = caches.vectors_of(repos, ids)
            if not vectors:
                return 0.0, 0.0, None
            caches.sample_matrix = stack(list(vectors.values()))
        chance = None
        if self.config.part_chance:
            matrix, starts = caches.sample_matrix
            sims = matrix @ qv
            chance = (float(sims.mean()), float(sims.std()), float(sims[starts].mean()), float(sims[starts].std()))
        values = self.dense_scores(caches.sample_matrix, qv, chance)
        return float(values.mean()), float(values.std()), chance

    def rank(self, q: Query, repos: Repos, embed: Callable[[list[str]], Callable[[], np.ndarray]]) -> list[Hit]:
        """The query's `k` hits, best first; `embed` starts making the query's vectors and returns how to wait for
        them (the embedding cache's `start_texts`): they are made while the terms' counts and the lexical
        candidates are read.

        When the near-copy guard leaves fewer than `k` among the candidates (a corpus holding many near-copies of
        the best matches) and an engine had more to give, both engines are asked again for DEEPER times as many, up
        to DEEPEST times the configured pool: at most two more rounds, each one fused ranking over at most
        2 × 16 × `candidates` items (their rows and vectors mostly already in the caches)."""
        cfg, caches = self.config, self.caches
        if not q.text.strip():
            return []
        corpus = caches.corpus_sample(
            repos, cfg.sample_size, Shape(cfg.context_cap, cfg.passage_tokens, cfg.context_floor)
        )
        if not caches.documents:
            return []
        pool = widest = cfg.candidates * (3 if q.mode == "meditation" else 1)
        lexical: list[int] | None
        read, lexical = self._read(q, repos, embed, corpus, pool)
        lam = (
            q.mmr_lambda
            if q.mmr_lambda is not None
            else cfg.meditation_lambda
            if q.mode == "meditation"
            else cfg.mmr_lambda
        )
        duplicate = cfg.duplicate_similarity if q.distinct else 1.01
        widest *= DEEPEST
        while True:
            fused = self._fuse(q, repos, read, corpus, pool, lexical)
            lexical = None  # a deeper round asks the engine for more
            chosen = pick(fused.ranked, fused.final, fused.vectors, q.k, lam, duplicate, max(q.k * 6, 30))
            if len(chosen) >= q.k or not fused.truncated or pool >= widest:
                break
            pool *= DEEPER
            self.deeper_rounds += 1
        rows = repos.items.many(chosen)  # expire_on_commit=False: the rows stay readable after the unit
        return [
            Hit(rows[i], round(fused.final[i], 4), {k: round(v, 4) for k, v in fused.parts[i].items()})
            for i in chosen
            if i in rows
        ]

    def _read(
        self,
        q: Query,
        repos: Repos,
        embed: Callable[[list[str]], Callable[[], np.ndarray]],
        corpus: CorpusSample,
        pool: int,
    ) -> tuple[QueryReading, list[int]]:
        """What the query says, read once however many candidates are ranked: authors, periods, BM25 weights and
        the dense queries' vectors; and the first `pool` lexical candidates, read while the vectors are made."""
        caches = self.caches
        documents = caches.documents
        if caches.authors is None:
            caches.authors = repos.items.authors()
        authors = caches.authors
        if self.config.each_author_query:
            named = reading.named_authors(q.text, authors)
        else:
            named = [one] if (one := reading.about_author(q.text, authors)) else []
        if self.config.asker_query and len([a for a in authors if a]) > 1:
            # after the ones it names: "what did Caroline tell me?" is about Caroline
            for who, speaks in ((q.asker, reading.speaks_of_self), (q.addressee, reading.speaks_to_addressee)):
                if who and who in authors and who not in named and speaks(q.text):
                    named.append(who)
        asked = set(reading.subjects(q.text, named))
        # the dense query of each named author's items, in that author's first person; anyone else's: the first
        # asked-about author's (or the query as it is)
        rewrites = {a: reading.first_person(q.text, a) for a in named}
        dense_text = rewrites[reading.subjects(q.text, named)[0]] if named else q.text
        dense_texts = list(dict.fromkeys([dense_text, *rewrites.values()]))
        query_vectors = embed(dense_texts)  # started now, waited for below: made while SQL runs
        now = self.clock()
        periods = [(timestamp(r.start), timestamp(r.end), r.weight) for r in reading.time_ranges(q.text, now)]

        # words: BM25 weights from the corpus's document counts
        terms = list(dict.fromkeys(tokenize(q.text)))
        cap = DF_EXACT_UP_TO
        held = caches.document_frequencies(repos, terms, cap)
        for term, count in held.items():  # PostgreSQL counts only up to the cap: estimate past it from the sample
            if count >= cap and len(corpus):
                held[term] = max(count, round(corpus.holding(term) / len(corpus) * documents))
        weights = {t: idf(max(documents, 1), min(c, documents)) for t, c in held.items() if c}
        lexical = repos.items.lexical.candidates(selective_terms(held, self.config.lexical_postings), pool)
        return QueryReading(
            asked,
            rewrites,
            dense_text,
            dense_texts,
            now,
            periods,
            reading.asks_when(q.text),
            held,
            weights,
            query_vectors(),
        ), lexical

    def _fuse(
        self,
        q: Query,
        repos: Repos,
        read: QueryReading,
        corpus: CorpusSample,
        pool: int,
        lexical: list[int] | None = None,
    ) -> Fused:
        """Up to `pool` candidates from each engine (the lexical ones read already, or else now), their
        neighbours, and the fused ranking of what the query may return."""
        cfg, caches = self.config, self.caches
        if lexical is None:
            lexical = repos.items.lexical.candidates(selective_terms(read.held, cfg.lexical_postings), pool)
        truncated = len(lexical) >= pool
        if self.store.loading:  # a restart's first search: read what ranking needs of the lexical side meanwhile
            self._read_ahead(q, repos, read, lexical)

        # meaning: Chroma's nearest vectors (and those still queued for it)
        where: list[dict[str, Any]] = []  # status is checked below: archived items are few, a filter costs time
        if q.tiers:
            where.append({"tier": {"$in": list(q.tiers)}})
        if q.since:
            where.append({"created": {"$gte": timestamp(q.since)}})
        if q.until:
            where.append({"created": {"$lte": timestamp(q.until)}})
        if q.happened_since:
            where.append({"happened": {"$gte": timestamp(q.happened_since)}})
        if q.happened_until:
            where.append({"happened": {"$lte": timestamp(q.happened_until)}})
        # Chroma answers with what it has when it holds fewer records (its count() costs a scan: ~170 ms at 45k)
        got = self.store.nearest(
            list(read.query_vectors), pool, (where[0] if len(where) == 1 else {"$and": where}) if where else None
        )  # ids = item ids
        truncated = truncated or any(len(records) >= pool for records in got["ids"])
        dense_items = list(
            dict.fromkeys([int(record) for records in got["ids"] for record in records] + self.journal.queued())
        )

        focus = bool(q.tags or q.emotions)
        meta = caches.ranking_meta(repos, list(dict.fromkeys(lexical + dense_items)), focus)
        lexical = [i for i in lexical if allowed(meta.get(i), q)]
        dense_items = [i for i in dense_items if allowed(meta.get(i), q)]
        candidates = list(dict.fromkeys(lexical + dense_items))
        positions = {
            (m.episode, m.seq + step)
            for i in candidates
            if (m := meta[i]).episode is not None and m.seq is not None
            for step in (-1, 1)
        }
        at = caches.items_at(repos, positions)
        meta.update(caches.ranking_meta(repos, [i for i in dict.fromkeys(at.values()) if i not in meta], focus))
        # (an item outside an episode has no neighbours: `before.get` and `after.get` find none for it)
        before = {
            i: at.get((m.episode, m.seq - 1))
            for i in candidates
            if (m := meta[i]).episode is not None and m.seq is not None
        }
        after = {
            i: at.get((m.episode, m.seq + 1))
            for i in candidates
            if (m := meta[i]).episode is not None and m.seq is not None
        }
        neighbours = {
            i: [n for n in (before.get(i), after.get(i)) if n is not None and allowed(meta.get(n), q)]
            for i in candidates
        }
        scored = set(candidates) | {n for ns in neighbours.values() for n in ns}

        bm25 = bm25_scores(caches.documents_for(repos, scored), read.weights, corpus.average_length, corpus.shape)
        b_mean, b_std = corpus.mean_std(read.weights, corpus.average_length)
        vectors = caches.vectors_of(repos, scored)
        zdense: dict[int, float] = {}  # each item against its author's rewrite of the query, or the first one
        for n, text in enumerate(read.dense_texts):
            mine = [i for i in vectors if read.rewrites.get(meta[i].author, read.dense_text) == text]
            if mine:
                d_mean, d_std, chance = self._sample_dense(read.query_vectors[n], repos)
                zdense.update(
                    (i, z_score(v, d_mean, d_std))
                    for i, v in zip(
                        mine,
                        self.dense_scores(stack([vectors[i] for i in mine]), read.query_vectors[n], chance).tolist(),
                    )
                )

        now_ts = timestamp(read.now)
        base: dict[int, float] = {}
        parts: dict[int, dict[str, float]] = {}
        asks: dict[int, bool] = {}
        dense_weight, half_life = cfg.dense_weight, cfg.recency_half_life_days
        when = read.asks_when and cfg.when_boost
        for item_id in scored:
            m = meta[item_id]
            zb = z_score(bm25.get(item_id, 0.0), b_mean, b_std)
            zd = zdense.get(item_id, 0.0)
            age_days = max(0.0, (now_ts - m.created) / 86400)
            asking = m.asking_share()
            asks[item_id] = asking > 0  # (a text that ends with a question has a share above 0)
            author = cfg.author_boost if m.author in read.asked else 0.0
            recency = cfg.recency_weight * math.pow(0.5, age_days / half_life)
            importance = cfg.importance_weight * (m.importance - 0.5) * 2
            says_when = cfg.when_boost if when and m.says_when() else 0.0
            period = cfg.period_boost * max(
                (w for start, end, w in read.periods if start <= m.created < end or start <= m.happened < end),
                default=0.0,
            )
            asking_part = -cfg.question_penalty * asking if asking else 0.0
            superseded = -cfg.superseded_penalty if m.status == "superseded" else 0.0
            base[item_id] = (
                (1 - dense_weight) * zb
                + dense_weight * zd
                + (author + recency + importance + says_when + period + asking_part + superseded)
            )
            parts[item_id] = {
                "bm25": zb,
                "dense": zd,
                "author": author,
                "recency": recency,
                "importance": importance,
                "when": says_when,
                "period": period,
                "asks": asking_part,
                "superseded": superseded,
            }
        final: dict[int, float] = {}
        for item_id in candidates:
            around = [base[n] for n in neighbours[item_id] if n in base]
            bonus = cfg.neighbour_weight * sum(around) / 2 if around else 0.0
            question = before.get(item_id)
            answers = cfg.answer_weight * base[question] if question in base and asks.get(question) else 0.0
            if answers and cfg.answer_balance and question is not None:
                answers *= balance(len(meta[question].text), len(meta[item_id].text))
            parts[item_id]["neighbours"], parts[item_id]["answers"] = bonus, answers
            final[item_id] = base[item_id] + bonus + answers
        ranked = [
            i
            for i in sorted(final, key=final.__getitem__, reverse=True)
            if i not in q.exclude
            and (q.mode != "concentration" or matches_focus(meta[i], q))
            and (q.mode == "concentration" or not (q.tags or q.emotions) or matches_focus(meta[i], q))
        ]
        if cfg.engine_votes:
            ranked = engine_votes(ranked, final, parts, cfg.engine_votes, cfg.votes_head, cfg.votes_pool)
        return Fused(ranked, final, parts, vectors, truncated)

    def _read_ahead(self, q: Query, repos: Repos, read: QueryReading, lexical: list[int]) -> None:
        """Into the caches, while the vector store reads its index in: the lexical candidates' rows, documents and
        vectors, and the sample's dense statistics (what `_fuse` would read from the database after Chroma's
        answer)."""
        self.caches.ranking_meta(repos, lexical, bool(q.tags or q.emotions))
        self.caches.documents_for(repos, lexical)
        self.caches.vectors_of(repos, lexical)
        for vector in read.query_vectors:
            self._sample_dense(vector, repos)

    def closest_older(
        self, item_ids: Sequence[int], n_results: int, per_item: int
    ) -> dict[int, list[tuple[float, int]]]:
        """For each item: up to `per_item` older (smaller id) active items closest to its whole-item vector, as
        (cosine similarity of their whole-item vectors, their id), best first (the comparison runs in Chroma)."""
        with self.db.unit() as repos:
            vectors = self.caches.vectors_of(repos, item_ids)
        ids = [i for i in item_ids if i in vectors]
        found: dict[int, list[tuple[float, int]]] = {}
        n = max(1, min(n_results, self.store.record_count()))
        for start in range(0, len(ids), 100):
            batch = ids[start : start + 100]
            got = self.store.nearest([vectors[i][0].astype(np.float32) for i in batch], n)
            others = {int(r) for records in got["ids"] for r in records}
            with self.db.reading() as repos:
                status = {i: row.status for i, row in repos.items.ranking_rows(others).items()}
            for item_id, records, distances in zip(batch, got["ids"], got["distances"] or []):
                older = [
                    (float(1 - distance), int(record))
                    for record, distance in zip(records, distances)
                    if int(record) < item_id and status.get(int(record)) == "active"
                ]
                found[item_id] = sorted(older, reverse=True)[:per_item]
        return found

    def diverse(self, refs: list[str], k: int, tier: str) -> list[str]:
        """The `k` most mutually different of these items (greedy farthest-first from the newest)."""
        with self.db.reading() as repos:
            ids = repos.items.id_map(tier, refs)
            vectors = self.caches.vectors_of(repos, ids.values())
        known = [ref for ref in refs if ids.get(ref) in vectors]
        if len(known) <= k:
            return known
        matrix = np.vstack([vectors[ids[ref]][0].astype(np.float32) for ref in known])
        return [known[i] for i in farthest_first(matrix, k)]
