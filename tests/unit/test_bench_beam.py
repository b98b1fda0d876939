"""bench/beam.py: a BEAM chat converted to the LoCoMo format bench/locomo.py reads (batches as sessions, messages as
turns with their ids, probing questions with their evidence messages, abstention left out), read from a checkout or
a git directory, and the TF-IDF reference beside BM25."""

from __future__ import annotations

import json
import subprocess

import pytest

from bench.beam import chat_numbers, convert, convert_chat, load, tfidf_ranking, turns_of, write
from bench.locomo import sessions

CHAT = [  # chat.json: batches of turns, each turn a list of messages
    {
        "batch_number": 1,
        "time_anchor": None,
        "turns": [
            [
                {
                    "role": "user",
                    "id": 0,
                    "time_anchor": "March-15-2024",
                    "question_type": "main_question",
                    "content": "I met my partner at ArtSpace Gallery on June 12, 2020 ->-> 1,2",
                },
                {"role": "assistant", "id": 1, "content": "That is a lovely story. " * 40},
            ],
            [
                {"role": "user", "id": 2, "content": "Which camera should I buy for the trip?"},
                {"role": "assistant", "id": 3, "content": "A light mirrorless camera suits travel."},
            ],
        ],
    },
    {
        "batch_number": 2,
        "time_anchor": "April-02-2024",
        "turns": [
            [
                {"role": "user", "id": 4, "content": "We moved the webinar to March 27 ->-> 3"},
                {"role": "assistant", "id": 5, "content": "Noted: the webinar is on March 27."},
            ],
        ],
    },
]
PROBING = {
    "abstention": [{"question": "What did the bias audit find?", "ideal_response": "No information."}],
    "information_extraction": [
        {"question": "Where did I meet my partner?", "answer": "ArtSpace Gallery", "source_chat_ids": [0]}
    ],
    "knowledge_update": [
        {
            "question": "When is the webinar?",
            "answer": "March 27",
            "source_chat_ids": {"original_info": [0], "updated_info": [4, 99]},
        }
    ],
    "summarization": [
        {"question": "Summarise our talks.", "ideal_summary": "…", "source_chat_ids": "[]"},
        {"question": "Summarise the trip.", "ideal_summary": "Cameras.", "source_chat_ids": [2, 3]},
    ],
}


def test_a_chat_becomes_sessions_of_turns_and_questions_with_their_evidence():
    sample = convert_chat(CHAT, PROBING, "beam-100K-7")
    conversation = sample["conversation"]
    found = sessions(conversation)  # as bench/locomo.py reads it
    assert [(n, when.date().isoformat(), [t["dia_id"] for t in turns]) for n, when, turns in found] == [
        (1, "2024-03-15", ["0", "1", "2", "3"]),
        (2, "2024-04-02", ["4", "5"]),
    ]
    first = found[0][2][0]
    assert first == {"speaker": "user", "dia_id": "0", "text": "I met my partner at ArtSpace Gallery on June 12, 2020"}
    assert found[0][2][1]["speaker"] == "assistant" and found[0][2][1]["text"] == CHAT[0]["turns"][0][1]["content"]
    questions = {q["question"]: q for q in sample["qa"]}
    assert "What did the bias audit find?" not in questions  # abstention: no evidence to find
    assert "Summarise our talks." not in questions  # no evidence message named
    assert questions["Where did I meet my partner?"]["evidence"] == ["0"]
    assert questions["When is the webinar?"]["evidence"] == ["0", "4"]  # both statements; 99 is no message
    assert questions["Summarise the trip."]["evidence"] == ["2", "3"]
    assert {q["question"]: (q["category"], q["beam_type"]) for q in sample["qa"]} == {
        "Where did I meet my partner?": (4, "information_extraction"),
        "When is the webinar?": (3, "knowledge_update"),
        "Summarise the trip.": (1, "summarization"),
    }
    assert questions["Where did I meet my partner?"]["answer"] == "ArtSpace Gallery"
    assert all(q["asker"] == "user" for q in sample["qa"])


def test_chats_are_read_from_a_checkout_or_a_git_directory_and_round_trip_compressed(tmp_path):
    checkout = tmp_path / "BEAM"
    for number in (3, 4):
        folder = checkout / "chats" / "100K" / str(number)
        (folder / "probing_questions").mkdir(parents=True)
        (folder / "chat.json").write_text(json.dumps(CHAT))
        (folder / "probing_questions" / "probing_questions.json").write_text(json.dumps(PROBING))
    from_checkout = convert(checkout, "100K", [4, 3])
    assert [s["sample_id"] for s in from_checkout] == ["beam-100K-4", "beam-100K-3"]
    git = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t", "-C", str(checkout)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "chats"], check=True)
    bare = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(checkout), str(bare)], check=True)
    assert convert(bare, "100K", [4, 3]) == from_checkout  # a git directory without a work tree, as `fetch` gives
    with pytest.raises(FileNotFoundError, match="chats/100K/5/chat.json"):
        convert(bare, "100K", [5])
    stored = tmp_path / "dev.json.gz"
    write(from_checkout, stored)
    assert stored.read_bytes()[:2] == b"\x1f\x8b" and load(stored) == from_checkout


def test_chat_numbers_and_the_tfidf_reference():
    assert chat_numbers("11-13,2, 12") == [11, 12, 13, 2]
    with pytest.raises(ValueError):
        chat_numbers("1-x")
    turns = turns_of(convert_chat(CHAT, PROBING, "beam-100K-7"))
    assert tfidf_ranking(turns, "Where did I meet my partner, at which gallery?")[0] == "0"
    assert sorted(tfidf_ranking(turns, "webinar date")[:2]) == ["4", "5"]  # the two that name it
    assert sorted(tfidf_ranking(turns, "nothing matches zebra")) == sorted(t["ref"] for t in turns)
