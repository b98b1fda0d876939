"""bench/job_engines.py reads what the jobs wrote: its counts of lost and doubled jobs and of same-key overlaps."""

from __future__ import annotations

from bench.job_engines import Record, executions, handoffs_ms, overlaps, tally


def runs(*lines: str) -> list[Record]:
    records = []
    for line in lines:
        kind, n, key, pid, at = line.split()
        records.append(Record(kind, int(n), key, int(pid), float(at)))
    return records


def test_two_jobs_of_a_key_under_way_at_once_overlap_and_free_jobs_never_do():
    seen = executions(
        runs(
            "S 1 key_0 10 1.0",
            "S 2 key_0 11 1.5",
            "E 1 key_0 10 2.0",
            "E 2 key_0 11 2.5",
            "S 3 key_1 10 3.0",
            "E 3 key_1 10 4.0",
            "S 4 key_1 11 4.0",
            "E 4 key_1 11 5.0",
            "S 5 free 10 1.0",
            "S 6 free 11 1.1",
            "E 5 free 10 2.0",
            "E 6 free 11 2.0",
        )
    )
    assert overlaps(seen) == 1  # 1 and 2 of key_0; 3 then 4 of key_1 only touch


def test_a_run_cut_by_a_kill_ends_at_the_kill_and_its_rerun_is_no_double():
    records = runs(
        "S 1 key_0 10 1.0",
        "E 2 key_0 10 1.2",  # 2 ended on the killed worker before the kill
        "S 1 key_0 11 7.0",
        "E 1 key_0 11 8.0",
        "S 2 key_0 10 0.5",
    )
    seen = executions(records)
    assert overlaps(seen, killed={10: 2.0}) == 1  # 2 (0.5-1.2) and 1 (1.0-…) of key_0 ran at once
    assert overlaps(executions(records[:4]), killed={10: 2.0}) == 0
    assert tally(seen, {1, 2, 3}, {10: 2.0}) == {"lost": 1, "doubled": 0, "same_key_overlaps": 1}


def test_a_job_whose_body_ended_twice_is_doubled():
    seen = executions(runs("S 1 key_0 10 1.0", "E 1 key_0 10 1.1", "S 1 key_0 11 6.5", "E 1 key_0 11 6.6"))
    assert tally(seen, {1}) == {"lost": 0, "doubled": 1, "same_key_overlaps": 0}


def test_a_handoff_is_the_wait_of_a_keys_next_job_after_the_one_before_it_ended():
    seen = executions(
        runs(
            "S 1 key_0 10 1.0",
            "E 1 key_0 10 2.0",
            "S 2 key_0 11 2.25",
            "E 2 key_0 11 3.0",
            "S 3 key_1 10 1.0",
            "E 3 key_1 10 1.5",
            "S 4 free 10 9.0",
            "E 4 free 10 9.5",
        )
    )
    assert handoffs_ms(seen, {1, 2, 3, 4}) == [250.0]
