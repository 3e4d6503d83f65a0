"""The suspect rules on hand-built facts: each rule's threshold, and their order of strength."""

from __future__ import annotations

import dataclasses

import pytest

from denpex_ml.hang.phase import Phase
from denpex_ml.hang.suspects import MAX_SUSPECTS, HangFacts, rank_suspects, ranks_text

RANKS = tuple(range(16))
TRAINING = {k: Phase.TRAINING for k in RANKS}


def _every_rule_fires() -> HangFacts:
    """Facts on which every rule names a rank of its own: rule i names rank i (the mismatch check 12)."""
    return HangFacts(
        ranks=RANKS,
        phases={**TRAINING, 1: Phase.END},
        mismatch_ranks={10: ("ALLREDUCE", "4"), 11: ("ALLREDUCE", "4"), 12: ("BROADCAST", "4")},
        flight_recorder_blamed=(2,),
        flight_recorder_evidence=("pg 0: rank 2 never joined ALLREDUCE #7",),
        desync_ranks=(3, 3),
        never_entered=(4,),
        waited_for=(5,),
        ready=frozenset(RANKS) - {6},
        world=16,
        collective_states={7: "behind"},
        collective_ranks=16,
        parked_at={**{k: "all_reduce" for k in RANKS}, 8: ""},
        silent=(9,),
        dump_firsts=(13,),
    )


#: (what removes the rule's evidence, the ranks it names, the start of its reason), strongest first
LADDER: list[tuple[dict[str, object], tuple[int, ...], str]] = [
    ({"mismatch_ranks": {}}, (12,), "named by the collective mismatch check"),
    ({"phases": TRAINING}, (1,), "its loop ended while the others still wait in a training step"),
    ({"flight_recorder_blamed": ()}, (2,), "blamed by the Flight Recorder dumps (pg 0: rank 2 never joined"),
    ({"desync_ranks": ()}, (3,), "named by the desync report as lagging"),
    ({"never_entered": ()}, (4,), "last enqueued work equals last completed"),
    ({"waited_for": ()}, (5,), "the others wait in the store for the NCCL id"),
    ({"ready": frozenset()}, (6,), "every other rank is ready for the collective; it is not"),
    ({"collective_states": {}}, (7,), "its collective is behind the others' (SeqNum/op/size)"),
    ({"parked_at": {}}, (8,), "its stack dump is not where the others wait (all_reduce)"),
    ({"silent": ()}, (9,), "printed no timeout while the others timed out"),
]


def test_rules_decide_in_order_of_strength() -> None:
    """With the evidence of every stronger rule removed, each rule in turn decides alone."""
    facts = _every_rule_fires()
    for clear, ranks, reason in LADDER:
        found = rank_suspects(facts)
        assert found.ranks == ranks, reason
        assert len(found.reasons) == 1 and found.reasons[0].startswith(reason)
        facts = dataclasses.replace(facts, **clear)  # type: ignore[arg-type]
    # no rule names a rank: the one rank whose own watchdog fired first is said, not suspected
    found = rank_suspects(facts)
    assert found.ranks == ()
    assert found.reasons == ("rank 13's own watchdog fired first",)


def test_a_mismatch_report_beats_an_ended_loop() -> None:
    facts = HangFacts(
        ranks=(0, 1, 2, 3),
        phases={0: Phase.TRAINING, 1: Phase.TRAINING, 2: Phase.TRAINING, 3: Phase.END},
        mismatch_ranks={0: ("ALLREDUCE", "8"), 1: ("ALLREDUCE", "8"), 2: ("ALLREDUCE", "16")},
    )
    found = rank_suspects(facts)
    assert found.ranks == (2,)
    assert found.reasons == ("named by the collective mismatch check",)
    without = rank_suspects(dataclasses.replace(facts, mismatch_ranks={}))
    assert without.ranks == (3,)
    assert without.reasons == ("its loop ended while the others still wait in a training step",)


def test_mismatch_names_the_odd_signature_else_every_rank_it_names() -> None:
    odd = HangFacts(mismatch_ranks={3: ("ALLREDUCE", "8"), 1: ("ALLREDUCE", "8"), 0: ("BROADCAST", "8")})
    assert rank_suspects(odd).ranks == (0,)
    # no signature is the odd one out (two ranks, two signatures each once, or all alike): all named
    pair = HangFacts(mismatch_ranks={5: ("ALLREDUCE", "8"), 2: ("BROADCAST", "8")})
    assert rank_suspects(pair).ranks == (2, 5)
    alike = HangFacts(mismatch_ranks={4: ("ALLREDUCE", "8"), 1: ("ALLREDUCE", "8")})
    assert rank_suspects(alike).ranks == (1, 4)


def test_mismatch_of_one_parameter_gather_op_adds_its_signal() -> None:
    gather = HangFacts(
        mismatch_ranks={
            0: ("_ALLGATHER_BASE", "1048576"),
            1: ("_ALLGATHER_BASE", "1048576"),
            2: ("_ALLGATHER_BASE", "2097152"),
        }
    )
    assert rank_suspects(gather).signals == frozenset({"mismatch-param-gather"})
    # the same sizes: no divergence of the sharded model
    same = HangFacts(mismatch_ranks={0: ("_ALLGATHER_BASE", "1048576"), 1: ("_ALLGATHER_BASE", "1048576")})
    assert rank_suspects(same).signals == frozenset()
    # two different ops: a mismatch of collectives, not of gathered parameters
    ops = HangFacts(mismatch_ranks={0: ("_ALLGATHER_BASE", "1048576"), 1: ("ALLREDUCE", "1048576")})
    assert rank_suspects(ops).signals == frozenset()
    # only the mismatch rule adds a signal
    assert rank_suspects(dataclasses.replace(_every_rule_fires(), mismatch_ranks={})).signals == frozenset()


def test_an_ended_loop_needs_fewer_than_half_ended_a_training_step_and_no_timeout() -> None:
    phases = {0: Phase.TRAINING, 1: Phase.TRAINING, 2: Phase.TRAINING, 3: Phase.END}
    facts = HangFacts(ranks=(0, 1, 2, 3), phases=phases)
    assert rank_suspects(facts).ranks == (3,)
    assert rank_suspects(dataclasses.replace(facts, timed_out=frozenset({3}))).ranks == ()
    half = {**phases, 2: Phase.END}
    assert rank_suspects(dataclasses.replace(facts, phases=half)).ranks == ()
    no_step = {**phases, 0: Phase.CHECKPOINT, 1: Phase.CHECKPOINT, 2: Phase.CHECKPOINT}
    assert rank_suspects(dataclasses.replace(facts, phases=no_step)).ranks == ()


def test_flight_recorder_reason_carries_its_first_evidence_when_there_is_one() -> None:
    facts = HangFacts(flight_recorder_blamed=(3, 1), flight_recorder_evidence=("first", "second"))
    found = rank_suspects(facts)
    assert found.ranks == (1, 3)
    assert found.reasons == ("blamed by the Flight Recorder dumps (first)",)
    bare = rank_suspects(dataclasses.replace(facts, flight_recorder_evidence=()))
    assert bare.reasons == ("blamed by the Flight Recorder dumps",)


def test_never_entered_names_the_rank() -> None:
    found = rank_suspects(HangFacts(ranks=(0, 1, 2), never_entered=(1,), silent=(2,)))
    assert found.ranks == (1,)
    assert found.reasons == ("last enqueued work equals last completed: never entered the stuck collective",)


def test_store_wait_names_each_rank_once() -> None:
    assert rank_suspects(HangFacts(waited_for=(3, 0, 3))).ranks == (0, 3)


def test_not_ready_ranks_only_when_at_most_half_are_missing() -> None:
    # the world reaches past the highest ready rank: the ranks above it are missing too
    assert rank_suspects(HangFacts(ready=frozenset({0, 1, 2}), world=4)).ranks == (3,)
    assert rank_suspects(HangFacts(ready=frozenset({0, 2, 3}))).ranks == (1,)
    assert rank_suspects(HangFacts(ready=frozenset({0}), world=4)).ranks == ()
    assert rank_suspects(HangFacts(ready=frozenset({0, 1, 2, 3}), world=4)).ranks == ()


def test_odd_collective_only_when_at_most_half_are_odd() -> None:
    facts = HangFacts(collective_states={2: "ahead", 5: "mismatched"}, collective_ranks=4)
    found = rank_suspects(facts)
    assert found.ranks == (2, 5)
    assert found.reasons == ("its collective is ahead/mismatched the others' (SeqNum/op/size)",)
    assert rank_suspects(dataclasses.replace(facts, collective_ranks=3)).ranks == ()


def test_stack_dump_names_the_ranks_not_where_most_wait() -> None:
    facts = HangFacts(parked_at={0: "all_reduce", 1: "all_reduce", 2: "all_reduce", 3: "", 4: "broadcast"})
    found = rank_suspects(facts)
    assert found.ranks == (3, 4)
    assert found.reasons == ("its stack dump is not where the others wait (all_reduce)",)
    # most ranks are busy outside any collective: that is no call the others wait in
    busy = HangFacts(parked_at={0: "", 1: "", 2: "all_reduce"})
    assert rank_suspects(busy).ranks == ()
    # every rank in the same call: no odd one
    assert rank_suspects(HangFacts(parked_at={0: "barrier", 1: "barrier"})).ranks == ()


def test_stack_dump_needs_a_majority_in_one_call() -> None:
    # the most common call holds no more ranks than the odd ones out: nobody is named
    assert rank_suspects(HangFacts(parked_at={0: "all_reduce", 1: "all_reduce", 2: "", 3: "broadcast"})).ranks == ()
    assert rank_suspects(HangFacts(parked_at={0: "all_reduce", 1: "broadcast"})).ranks == ()


def test_silent_ranks_only_when_at_most_half() -> None:
    assert rank_suspects(HangFacts(ranks=(0, 1, 2, 3), silent=(2, 3))).ranks == (2, 3)
    assert rank_suspects(HangFacts(ranks=(0, 1, 2, 3), silent=(1, 2, 3))).ranks == ()
    # a lone silent rank is named even in a job of two
    assert rank_suspects(HangFacts(ranks=(0, 1), silent=(1,))).ranks == (1,)


def test_own_watchdog_first_is_said_only_of_one_rank_among_several() -> None:
    assert rank_suspects(HangFacts(ranks=(0, 1), dump_firsts=(0,))).reasons == ("rank 0's own watchdog fired first",)
    assert rank_suspects(HangFacts(ranks=(0,), dump_firsts=(0,))).reasons == ()
    assert rank_suspects(HangFacts(ranks=(0, 1), dump_firsts=(0, 1))).reasons == ()
    # a rule that names a rank leaves it unsaid
    named = rank_suspects(HangFacts(ranks=(0, 1, 2), dump_firsts=(0,), waited_for=(2,)))
    assert named.reasons == ("the others wait in the store for the NCCL id it never published (busy or gone)",)


def test_at_most_max_suspects_are_named() -> None:
    found = rank_suspects(HangFacts(desync_ranks=tuple(range(20, 0, -1))))
    assert found.ranks == tuple(range(1, MAX_SUSPECTS + 1))


def test_facts_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        HangFacts().world = 4  # type: ignore[misc]


def test_the_rank_that_entered_its_collective_from_another_line_is_the_suspect() -> None:
    # rank 1 ran an extra forward: its all-gather was called from line 281, the others' from 282
    facts = HangFacts(
        ranks=(0, 1, 2, 3),
        call_sites={1: "train.py:281", 2: "train.py:282", 3: "train.py:282"},
    )
    found = rank_suspects(facts)
    assert found.ranks == (1,) and "train.py:281" in found.reasons[0]
    # two against two, or only two ranks with stacks, names nobody
    assert rank_suspects(HangFacts(ranks=(0, 1), call_sites={0: "a.py:1", 1: "a.py:2"})).ranks == ()
    even = HangFacts(ranks=(0, 1, 2, 3), call_sites={0: "a.py:1", 1: "a.py:1", 2: "a.py:2", 3: "a.py:2"})
    assert rank_suspects(even).ranks == ()


def test_ranks_without_a_dump_are_weaker_than_where_the_program_diverged() -> None:
    facts = HangFacts(
        ranks=(0, 1, 2, 3),
        flight_recorder_blamed=(0, 2),
        flight_recorder_kind="missing-dump",
        call_sites={1: "train.py:281", 2: "train.py:282", 3: "train.py:282"},
    )
    assert rank_suspects(facts).ranks == (1,)
    # what the dumps' entries show still comes first
    entries = HangFacts(
        ranks=(0, 1, 2, 3),
        flight_recorder_blamed=(3,),
        flight_recorder_kind="missing-rank",
        call_sites={1: "train.py:281", 2: "train.py:282", 3: "train.py:282"},
    )
    assert rank_suspects(entries).ranks == (3,)
    # with nothing else, the missing dumps still name their ranks
    alone = HangFacts(ranks=(0, 1, 2, 3), flight_recorder_blamed=(0, 2), flight_recorder_kind="missing-dump")
    assert rank_suspects(alone).ranks == (0, 2)


def test_the_rank_that_printed_another_value_than_all_the_others_is_a_suspect_below_the_call_site() -> None:
    odd = {1: "'rank 1: building model with hidden=24' (24 where the others print 16)"}
    s = rank_suspects(HangFacts(ranks=(0, 1, 2, 3), odd_values=odd))
    assert s.ranks == (1,) and "hidden=24" in s.reasons[0]
    # where the program entered its collective is stronger evidence than what it printed
    sites = {0: "train.py:10", 1: "train.py:10", 2: "train.py:10", 3: "train.py:12"}
    assert rank_suspects(HangFacts(ranks=(0, 1, 2, 3), odd_values=odd, call_sites=sites)).ranks == (3,)
    # ... and it is stronger than ranks that only wrote no Flight Recorder dump
    missing = HangFacts(
        ranks=(0, 1, 2, 3), odd_values=odd, flight_recorder_blamed=(0, 2), flight_recorder_kind="missing-dump"
    )
    assert rank_suspects(missing).ranks == (1,)


def test_ranks_are_named_one_way_in_evidence_advice_and_the_report() -> None:
    # the one formatter the hang analysis, its advice and the Flight Recorder reading share
    assert ranks_text([2]) == "rank 2"
    assert ranks_text([1, 0, 1]) == "ranks 0, 1"  # sorted, each rank once; a pair is no range
    assert ranks_text([*range(512), *range(513, 1024)]) == "ranks 0-511, 513-1023"
    assert ranks_text([3, 4, 5, 7], noun=False) == "3-5, 7"
    assert ranks_text(range(0, 40, 2), max_runs=3) == "ranks 0, 2, 4, … (20 ranks)"
    assert ranks_text([]) == "no rank"
