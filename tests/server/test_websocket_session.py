"""The sans-IO WebSocket session (server/websocket/session.py) on its own: frames in, actions out, no sockets.

The transport's reports (started / refused / finished) are played by hand, in every order that matters: lanes,
queues and limits, forks and eviction, prewarm, turn state, steering (accepted / pending / failed, successors),
inject and the silent ``response.processed``. A randomized interleaving test checks the lane invariants."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import pytest

from respstream.server.http_errors import HTTPError
from respstream.server.store.byte_budget import ByteBudget
from respstream.server.websocket.actions import Action, Evict, Outcome, Send, SessionLimits, Start, Stop
from respstream.server.websocket.session import Session


def new_session(**limits: Any) -> Session:
    counter = itertools.count(1)
    return Session(SessionLimits(**limits), mint=lambda: f"{next(counter):04d}")


def create(**body: Any) -> str:
    return json.dumps({"type": "response.create", "model": "m", "input": "hi", **body})


def sent(actions: list[Action]) -> list[dict[str, Any]]:
    return [json.loads(a.text) for a in actions if isinstance(a, Send)]


def starts(actions: list[Action]) -> list[Start]:
    return [a for a in actions if isinstance(a, Start)]


def one_start(actions: list[Action]) -> Start:
    found = starts(actions)
    assert len(found) == 1, actions
    return found[0]


def run(session: Session, raw: str, rid: str) -> Start:
    """Send a create that starts at once and report its response id."""
    start = one_start(session.receive(raw))
    assert session.started(start.ticket, rid) == []
    return start


# -- lanes ----------------------------------------------------------------------------------------------------------
def test_one_lane_is_fifo_and_never_overlaps() -> None:
    s = new_session()
    first = one_start(s.receive(create(metadata={"n": "1"})))
    assert s.receive(create(metadata={"n": "2"})) == []
    assert s.receive(create(metadata={"n": "3"})) == []
    assert s.waiting == 2 and s.in_flight == 1
    s.started(first.ticket, "resp_1")
    second = one_start(s.finished(first.ticket, Outcome("completed")))
    assert second.body["metadata"] == {"n": "2"} and second.lane is None
    third = one_start(s.refused(second.ticket, HTTPError(400, "x", "bad")) )
    assert third.body["metadata"] == {"n": "3"}


def test_lanes_run_concurrently_and_the_default_lane_is_one_of_them() -> None:
    s = new_session()
    a = one_start(s.receive(create(stream_id="a")))
    b = one_start(s.receive(create(stream_id="b")))
    d = one_start(s.receive(create()))
    assert (a.lane, b.lane, d.lane) == ("a", "b", None) and s.in_flight == 3
    assert "stream_id" not in a.body  # routing only: never passed on as a create field


def test_sixteen_in_flight_then_creates_wait_in_arrival_order() -> None:
    s = new_session()
    tickets = [one_start(s.receive(create(stream_id=f"l{i}"))).ticket for i in range(16)]
    assert s.receive(create(stream_id="l16")) == [] and s.receive(create(stream_id="l17")) == []
    assert s.in_flight == 16 and s.waiting == 2
    s.started(tickets[5], "resp_5")
    nxt = one_start(s.finished(tickets[5], Outcome("completed")))
    assert nxt.lane == "l16"
    assert one_start(s.refused(tickets[0], HTTPError(400, "x", "y"))).lane == "l17"


def test_thirty_two_distinct_names_then_the_documented_error() -> None:
    s = new_session()
    for i in range(32):
        assert sent(s.receive(create(stream_id=f"agent_{i + 1}"))) == []  # started or queued: no error
    assert sent(s.receive(create())) == []  # the default lane does not count
    assert s.in_flight == 16 and s.waiting == 17
    (error,) = sent(s.receive(create(stream_id="agent_33")))
    assert error == {"type": "error", "status": 400, "stream_id": "agent_33", "error": {
        "type": "invalid_request_error", "code": "websocket_stream_limit_reached",
        "message": "This WebSocket connection has reached its maximum number of distinct stream IDs (32). Reuse "
                   "an existing stream_id or open a new WebSocket connection.", "param": "stream_id"}}
    assert not [e for e in sent(s.receive(create(stream_id="agent_7"))) if e["type"] == "error"]  # reuse is fine


@pytest.mark.parametrize("bad", ["", "a b", "x" * 257, "ü", 5, ["a"], "a/b"])
def test_invalid_stream_id_has_no_stream_id_in_its_error(bad: Any) -> None:
    (error,) = sent(new_session().receive(create(stream_id=bad)))
    assert error["type"] == "error" and error["status"] == 400 and "stream_id" not in error
    assert error["error"]["code"] == "invalid_stream_id" and error["error"]["param"] == "stream_id"


def test_longest_valid_stream_id_is_taken() -> None:
    assert one_start(new_session().receive(create(stream_id="A-z_0." * 42 + "abcd"))).lane == "A-z_0." * 42 + "abcd"


def test_errors_on_a_lane_carry_its_stream_id_and_the_documented_shape() -> None:
    s = new_session()
    start = one_start(s.receive(create(stream_id="main", previous_response_id="resp_abc")))
    exc = HTTPError(400, "previous_response_not_found", "Previous response with id 'resp_abc' not found.",
                    param="previous_response_id")
    actions = s.refused(start.ticket, exc)
    assert sent(actions) == [{"type": "error", "status": 400, "stream_id": "main", "error": {
        "type": "invalid_request_error", "code": "previous_response_not_found",
        "message": "Previous response with id 'resp_abc' not found.", "param": "previous_response_id"}}]
    assert Evict("resp_abc") in actions
    default = one_start(s.receive(create(previous_response_id="resp_x")))
    (plain,) = sent(s.refused(default.ticket, exc))
    assert "stream_id" not in plain  # the default lane's events never carry one
    (bad,) = sent(s.receive(create(stream_id="main", generate="no")))
    assert bad["stream_id"] == "main" and bad["error"]["param"] == "generate"


def test_a_failed_same_lane_continuation_evicts_but_a_failed_fork_keeps_the_parent() -> None:
    s = new_session()
    parent = run(s, create(stream_id="a"), "resp_p")
    s.finished(parent.ticket, Outcome("completed"))
    fork = run(s, create(stream_id="b", previous_response_id="resp_p"), "resp_f")
    assert not [a for a in s.finished(fork.ticket, Outcome("failed")) if isinstance(a, Evict)]
    same = run(s, create(stream_id="a", previous_response_id="resp_p"), "resp_s")
    assert Evict("resp_p") in s.finished(same.ticket, Outcome("failed"))


def test_one_lanes_failure_does_not_stall_another() -> None:
    s = new_session()
    a1 = one_start(s.receive(create(stream_id="a")))
    assert s.receive(create(stream_id="a", metadata={"n": "a2"})) == []
    b1 = one_start(s.receive(create(stream_id="b")))
    a2 = one_start(s.refused(a1.ticket, HTTPError(500, "internal_error", "boom")))
    assert a2.body["metadata"] == {"n": "a2"}
    s.started(b1.ticket, "resp_b")
    assert s.finished(b1.ticket, Outcome("cancelled")) == []
    assert s.in_flight == 1


def test_queued_bytes_are_charged_until_the_create_starts_and_bounded_per_lane() -> None:
    budget = ByteBudget(total=10_000, per_holder=10_000)
    s = Session(SessionLimits(max_lane_queued_bytes=250), budget=budget, holder="conn")

    def receive(raw: str) -> list[Action]:
        assert budget.take("conn", 100) is None  # what the transport charges as the message arrives
        return s.receive(raw, 100)

    first = one_start(receive(create(stream_id="a")))
    assert budget.held("conn") == 0  # started at once: given back
    receive(create(stream_id="a"))
    receive(create(stream_id="a"))
    assert budget.held("conn") == 200
    (error,) = sent(receive(create(stream_id="a")))
    assert error["error"]["code"] == "websocket_stream_queue_full" and error["stream_id"] == "a"
    assert budget.held("conn") == 200
    one_start(receive(create(stream_id="b")))  # another lane is not affected
    sent(receive("not json"))
    sent(receive(json.dumps({"type": "response.processed", "response_id": "r"})))
    assert budget.held("conn") == 200
    one_start(s.refused(first.ticket, HTTPError(400, "x", "y")))
    assert budget.held("conn") == 100


# -- frames ---------------------------------------------------------------------------------------------------------
def test_processed_is_taken_silently_and_unknown_types_get_a_400() -> None:
    s = new_session()
    assert s.receive(json.dumps({"type": "response.processed", "response_id": "resp_1"})) == []
    (error,) = sent(s.receive(json.dumps({"type": "response.cancel"})))
    assert error["status"] == 400 and error["error"]["code"] == "invalid_value" and error["error"]["param"] == "type"
    (error,) = sent(s.receive(json.dumps({"input": "x"})))
    assert error["error"]["code"] == "missing_required_parameter"
    (error,) = sent(s.receive("[1]"))
    assert error["error"]["code"] == "invalid_json"


# -- prewarm --------------------------------------------------------------------------------------------------------
def test_prewarm_starts_without_generation_and_its_continuation_inherits_the_context() -> None:
    s = new_session()
    tools = [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]
    warm = one_start(s.receive(create(generate=False, instructions="be brief", tools=tools)))
    assert warm.generate is False and "generate" not in warm.body
    s.started(warm.ticket, "resp_warm")
    s.finished(warm.ticket, Outcome("completed"))
    turn = one_start(s.receive(create(previous_response_id="resp_warm", input="go")))
    assert turn.generate is True and turn.body["instructions"] == "be brief" and turn.body["tools"] == tools
    own = one_start(s.finished(turn.ticket, Outcome("completed")) or s.receive(
        create(previous_response_id="resp_warm", instructions="mine")))
    assert own.body["instructions"] == "mine"
    assert one_start(s.receive(create(stream_id="x", generate=True))).generate is True


# -- turn state -----------------------------------------------------------------------------------------------------
def test_turn_state_is_the_clients_or_minted_per_turn() -> None:
    s = new_session()

    def metadata(client_metadata: dict[str, str] | None, lane: str | None = None) -> dict[str, Any] | None:
        body: dict[str, Any] = {"stream_id": lane} if lane else {}
        if client_metadata is not None:
            body["client_metadata"] = client_metadata
        start = starts(s.receive(create(**body)))[0]
        s.refused(start.ticket, HTTPError(400, "x", "y"))  # free the lane for the next
        return json.loads(start.metadata) if start.metadata else None

    assert metadata(None) is None
    echoed = metadata({"x-codex-turn-state": "ts-1", "turn_id": "t1"})
    assert echoed == {"type": "response.metadata", "headers": {"x-codex-turn-state": "ts-1"},
                      "metadata": {"x-codex-turn-state": "ts-1", "turn_id": "t1"}}
    minted = metadata({"x-codex-turn-state": "", "turn_id": "t2"})
    assert minted is not None and minted["headers"]["x-codex-turn-state"].startswith("ts_")
    again = metadata({"x-codex-turn-state": "", "turn_id": "t2"}, lane="side")
    assert again is not None and again["headers"] == minted["headers"] and again["stream_id"] == "side"
    other = metadata({"turn_id": "t3"})
    assert other is not None and other["headers"] != minted["headers"]


# -- steering -------------------------------------------------------------------------------------------------------
def steer(s: Session, target: Any, steer_input: Any = "go left", **extra: Any) -> list[Action]:
    return s.receive(json.dumps({"type": "response.steer", "previous_response_id": target, "input": steer_input,
                                 **extra}))


def test_steer_a_running_response_stops_it_and_starts_the_successor_first() -> None:
    s = new_session()
    orig = run(s, create(stream_id="main", instructions="ins", temperature=0.5, input="start"), "resp_1")
    assert s.receive(create(stream_id="main", metadata={"n": "later"})) == []
    actions = steer(s, "resp_1", "go left")
    (accepted,) = sent(actions)
    assert accepted == {"type": "response.steer.accepted", "sequence_number": 0, "stream_id": "main",
                        "steer": {"id": "steer_0001", "previous_response_id": "resp_1"}}
    assert Stop("resp_1") in actions
    second = steer(s, "resp_1", [{"role": "user", "content": "and fast"}])
    assert sent(second)[0]["type"] == "response.steer.accepted" and not [a for a in second if isinstance(a, Stop)]
    successor = one_start(s.finished(orig.ticket, Outcome("incomplete", "steered")))
    assert successor.lane == "main" and successor.body["previous_response_id"] == "resp_1"
    assert successor.body["instructions"] == "ins" and successor.body["temperature"] == 0.5
    assert successor.body["input"] == [{"type": "message", "role": "user", "content": "go left"},
                                       {"role": "user", "content": "and fast"}]
    s.started(successor.ticket, "resp_2")
    later = one_start(s.finished(successor.ticket, Outcome("completed")))
    assert later.body["metadata"] == {"n": "later"}  # the lane's queue goes on after the successor


def test_a_response_that_completed_before_the_stop_still_gets_its_successor() -> None:
    s = new_session()
    orig = run(s, create(), "resp_1")
    steer(s, "resp_1")
    assert one_start(s.finished(orig.ticket, Outcome("completed"))).body["previous_response_id"] == "resp_1"


def test_steering_a_finished_or_unknown_response_fails_with_the_input_returned() -> None:
    s = new_session()
    done = run(s, create(stream_id="a"), "resp_done")
    s.finished(done.ticket, Outcome("completed"))
    (failed,) = sent(steer(s, "resp_done", "x"))
    assert failed == {"type": "response.steer.failed", "sequence_number": 0, "stream_id": "a",
                      "steer": {"previous_response_id": "resp_done", "input": "x"},
                      "error": {"code": "response_already_completed", "message": "Response 'resp_done' has "
                                "already completed."}}
    broken = run(s, create(), "resp_bad")
    s.finished(broken.ticket, Outcome("failed"))
    assert sent(steer(s, "resp_bad"))[0]["error"]["code"] == "response_not_active"
    message = [{"role": "user", "content": "x"}]
    (unknown,) = sent(steer(s, "resp_nope", message))
    assert unknown["error"]["code"] == "response_not_found" and unknown["steer"]["input"] == message
    assert "id" not in unknown["steer"] and "stream_id" not in unknown


@pytest.mark.parametrize(("frame", "why"), [
    ({"previous_response_id": "resp_1", "input": ""}, "empty"),
    ({"previous_response_id": "resp_1", "input": []}, "non-empty"),
    ({"previous_response_id": "resp_1", "input": [{"role": "assistant", "content": "x"}]}, "input[0]"),
    ({"previous_response_id": "resp_1", "input": 5}, "non-empty"),
    ({"input": "x"}, "previous_response_id"),
    ({"previous_response_id": "resp_1", "input": "x", "stream_id": "a"}, "'stream_id'"),
])
def test_bad_steers_fail_with_invalid_input(frame: dict[str, Any], why: str) -> None:
    s = new_session()
    run(s, create(), "resp_1")
    (failed,) = sent(s.receive(json.dumps({"type": "response.steer", **frame})))
    assert failed["type"] == "response.steer.failed" and failed["error"]["code"] == "invalid_input"
    assert why in failed["error"]["message"] and failed["steer"]["input"] == frame.get("input")


def test_steer_limits_and_unsupported_responses() -> None:
    s = new_session(max_pending_steers=2)
    run(s, create(), "resp_1")
    steer(s, "resp_1")
    steer(s, "resp_1")
    assert sent(steer(s, "resp_1"))[0]["error"]["code"] == "too_many_pending_steers"
    run(s, create(stream_id="c", conversation="conv_1"), "resp_c")
    assert sent(steer(s, "resp_c"))[0]["error"]["code"] == "steering_not_supported"
    compacting = {"context_management": [{"type": "compaction", "compact_threshold": 2000}]}
    run(s, create(stream_id="d", **compacting), "resp_d")
    (refused,) = sent(steer(s, "resp_d"))
    assert refused["error"]["code"] == "steering_not_supported" and "context_management" in refused["error"]["message"]


def test_steering_a_response_that_waits_on_client_tools_is_pending_then_prepended() -> None:
    s = new_session()
    orig = run(s, create(stream_id="w"), "resp_1")
    steer(s, "resp_1", "first")
    call = {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{}"}
    actions = s.finished(orig.ticket, Outcome("completed", None, (call,)))
    assert not starts(actions)
    (pending,) = sent(actions)
    assert pending == {"type": "response.steer.pending", "sequence_number": 1, "stream_id": "w",
                       "steer": {"id": "steer_0001", "previous_response_id": "resp_1"},
                       "reason": "waiting_for_required_input",
                       "required_input": [{"type": "function_call_output", "call_id": "call_1", "name": "shell"}]}
    late = sent(steer(s, "resp_1", "second"))
    assert [e["type"] for e in late] == ["response.steer.accepted", "response.steer.pending"]
    output = {"type": "function_call_output", "call_id": "call_1", "output": "ok"}
    answer = one_start(s.receive(create(stream_id="w", previous_response_id="resp_1", input=[output])))
    assert answer.body["input"] == [{"type": "message", "role": "user", "content": "first"},
                                    {"type": "message", "role": "user", "content": "second"}, output]
    assert sent(steer(s, "resp_1"))[0]["error"]["code"] == "response_already_completed"  # answered: no more


def test_a_successor_that_cannot_start_fails_its_steers() -> None:
    s = new_session()
    orig = run(s, create(), "resp_1")
    steer(s, "resp_1")
    successor = one_start(s.finished(orig.ticket, Outcome("incomplete", "steered")))
    events = sent(s.refused(successor.ticket, HTTPError(429, "rate_limited", "slow down")))
    assert [e["type"] for e in events] == ["error", "response.steer.failed"]
    assert events[1]["error"]["code"] == "successor_creation_failed" and events[1]["steer"]["id"] == "steer_0001"


def test_a_steered_response_that_failed_fails_its_steers() -> None:
    s = new_session()
    orig = run(s, create(), "resp_1")
    steer(s, "resp_1", "x")
    (failed,) = sent(s.finished(orig.ticket, Outcome("failed")))
    assert failed["error"]["code"] == "response_not_active" and failed["steer"] == {
        "id": "steer_0001", "previous_response_id": "resp_1", "input": "x"}


# -- inject ---------------------------------------------------------------------------------------------------------
def test_inject_failure_paths() -> None:
    s = new_session()
    items = [{"type": "function_call_output", "call_id": "c", "output": "1"}]

    def inject(rid: Any, inject_input: Any = items) -> list[dict[str, Any]]:
        return sent(s.receive(json.dumps({"type": "response.inject", "response_id": rid, "input": inject_input})))

    (unknown,) = inject("resp_x")
    assert unknown == {"type": "response.inject.failed", "response_id": "resp_x", "input": items,
                       "error": {"code": "response_not_found",
                                 "message": "No response with id 'resp_x' on this connection."},
                       "sequence_number": 0}
    running = run(s, create(stream_id="a"), "resp_1")
    (busy,) = inject("resp_1")
    assert busy["error"]["code"] == "response_not_waiting" and busy["stream_id"] == "a"
    s.finished(running.ticket, Outcome("completed"))
    (done,) = inject("resp_1")
    assert done["error"]["code"] == "response_already_completed" and done["input"] == items
    assert inject(None)[0]["error"]["code"] == "missing_required_parameter"
    assert inject("resp_1", "x")[0]["error"]["param"] == "input"


# -- interleavings --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(25))
def test_random_interleavings_keep_the_lane_invariants(seed: int) -> None:
    """Creates on random lanes, finishes/refusals/steers in random order: one response per lane at a time, at most
    ``max_in_flight`` together, each lane's creates start in the order sent, and everything sent starts."""
    rng = random.Random(seed)
    s = new_session(max_in_flight=4)
    lanes = ["a", "b", "c", None, "d", "e"]
    sent_order: dict[Any, list[str]] = {lane: [] for lane in lanes}
    started_order: dict[Any, list[str]] = {lane: [] for lane in lanes}
    running: dict[int, Start] = {}
    rid_of: dict[int, str] = {}
    counter = itertools.count()

    def take(actions: list[Action]) -> None:
        for start in starts(actions):
            assert start.lane not in {r.lane for r in running.values()}, "two responses on one lane"
            running[start.ticket] = start
            tag = start.body.get("metadata", {}).get("tag")
            if start.body["input"] == "hi":  # a steering successor carries the original's metadata too
                started_order[start.lane].append(tag)
            rid_of[start.ticket] = f"resp_{next(counter)}"
            assert s.started(start.ticket, rid_of[start.ticket]) == []
        assert len(running) <= 4

    for _ in range(300):
        roll = rng.random()
        if roll < 0.45 or not running:
            lane = rng.choice(lanes)
            tag = f"t{next(counter)}"
            sent_order[lane].append(tag)
            take(s.receive(create(metadata={"tag": tag}, **({"stream_id": lane} if lane else {}))))
        elif roll < 0.55:
            ticket = rng.choice(list(running))
            steer(s, rid_of[ticket])
        else:
            ticket = rng.choice(list(running))
            running.pop(ticket)
            if rng.random() < 0.2:
                take(s.refused(ticket, HTTPError(400, "x", "y")))
            else:
                take(s.finished(ticket, Outcome(rng.choice(["completed", "incomplete", "failed", "cancelled"]))))
    while running:
        ticket = next(iter(running))
        running.pop(ticket)
        take(s.finished(ticket, Outcome("completed")))
    assert started_order == sent_order and s.waiting == 0 and s.in_flight == 0


@pytest.mark.parametrize("seed", range(10))
def test_arbitrary_frames_get_an_answer_never_an_exception(seed: int) -> None:
    """Frames of every type with fields of the wrong types, in random order, against a session with responses
    running and finished: ``receive`` always returns actions (an error or a failure event), never raises."""
    rng = random.Random(seed)
    s = new_session(max_in_flight=2)
    values: list[Any] = [None, 0, -1, 1.5, True, "", "x", "resp_1", "resp_2", [], [1], ["a"], {}, {"a": 1},
                         [{"role": "user", "content": "x"}], "a" * 300, "ü", {"role": "user"}]
    fields = ["type", "stream_id", "generate", "previous_response_id", "input", "response_id", "client_metadata",
              "stream", "extra"]
    types = ["response.create", "response.steer", "response.inject", "response.processed", "response.cancel", 7,
             None]
    running = run(s, create(stream_id="a"), "resp_1")
    done = run(s, create(stream_id="b"), "resp_2")
    s.finished(done.ticket, Outcome("completed"))
    for _ in range(300):
        frame: dict[str, Any] = {"type": rng.choice(types)}
        for name in rng.sample(fields, rng.randint(0, 4)):
            frame[name] = rng.choice(values)
        actions = s.receive(json.dumps(frame))
        for action in actions:
            if isinstance(action, Send):
                event = json.loads(action.text)
                assert event["type"] in ("error", "response.steer.accepted", "response.steer.failed",
                                         "response.steer.pending", "response.inject.failed"), event
        for start in starts(actions):
            s.refused(start.ticket, HTTPError(400, "x", "y"))  # keep the lanes moving
    (bad,) = sent(s.receive(b"\xff\xfe not utf-8"))
    assert bad["error"]["code"] == "invalid_json" and "byte 0" in bad["error"]["message"]  # where it broke
    pending = starts(s.finished(running.ticket, Outcome("cancelled")))
    while pending:  # a steering successor, then whatever waited: all refused
        pending = [a for start in pending for a in starts(s.refused(start.ticket, HTTPError(400, "x", "y")))]
    assert s.in_flight == 0 and s.waiting == 0


@pytest.mark.parametrize("module", ["session", "frames", "events", "actions", "turn_state"])
def test_the_session_modules_do_no_io(module: str) -> None:
    """The session and what it is built from import no event loop, socket, clock or transport."""
    import ast
    from pathlib import Path

    import respstream.server.websocket as package

    tree = ast.parse((Path(package.__file__).parent / f"{module}.py").read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    inner = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
             and node.module.startswith("respstream.")}
    assert not imported & {"asyncio", "anyio", "socket", "time", "starlette", "uvicorn", "websockets", "httpx"}
    assert not {m for m in inner if m.startswith(("respstream.server.websocket.transport",
                                                  "respstream.server.websocket.sender",
                                                  "respstream.server.websocket.frame_writer"))}
