"""read_capped: the request body, capped in size and in time, on a real event loop.

The timer is armed only when the body is not there at the first receive(); these tests
drive both paths, including a receive() that waits, is cancelled, or never answers.
"""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.api.errors import status_of
from app.api.observe import ClientGone, read_capped
from app.errors import FieldError

Message = dict[str, Any]


def part(body: bytes, more: bool = False) -> Message:
    return {"type": "http.request", "body": body, "more_body": more}


def queue_receive(queue: asyncio.Queue[Message]):
    async def receive() -> Message:
        return await queue.get()
    return receive


def ready_receive(*messages: Message):
    """A receive() that has every message already, as uvicorn has a body that arrived with
    its headers: it answers without waiting."""
    pending = list(messages)

    async def receive() -> Message:
        return pending.pop(0)
    return receive


def run(coro):
    return asyncio.run(coro)


def test_a_body_that_is_there_is_read_whole():
    assert run(read_capped(ready_receive(part(b"abc")), 10, 1.0)) == b"abc"
    assert run(read_capped(ready_receive(part(b"ab", True), part(b"c")), 10, 1.0)) == b"abc"


def test_a_body_in_one_message_is_that_message_s_bytes():
    body = b"x" * 10
    assert run(read_capped(ready_receive(part(body)), 10, 1.0)) is body


def test_a_body_that_arrives_later_is_read_under_the_timer():
    async def scenario() -> bytearray:
        queue: asyncio.Queue[Message] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, queue.put_nowait, part(b"12", True))
        loop.call_later(0.02, queue.put_nowait, part(b"34"))
        return await read_capped(queue_receive(queue), 10, 1.0)
    assert run(scenario()) == b"1234"


def test_a_body_that_stops_coming_is_a_408():
    async def scenario() -> None:
        queue: asyncio.Queue[Message] = asyncio.Queue()
        queue.put_nowait(part(b"12", True))  # the first part is there, the rest never comes
        await read_capped(queue_receive(queue), 10, 0.05)
    with pytest.raises(FieldError) as caught:
        run(scenario())
    assert (status_of(caught.value), caught.value.field) == (408, "body")
    assert "0.05 s" in caught.value.problem


def test_a_body_that_never_starts_is_a_408():
    async def scenario() -> None:
        await read_capped(queue_receive(asyncio.Queue()), 10, 0.05)
    with pytest.raises(FieldError) as caught:
        run(scenario())
    assert status_of(caught.value) == 408


@pytest.mark.parametrize("messages", [
    [part(b"x" * 11)],                      # over the cap in the first message
    [part(b"x" * 6, True), part(b"x" * 6)],  # over it only in the second
])
def test_a_body_over_the_limit_is_a_413(messages):
    with pytest.raises(FieldError) as caught:
        run(read_capped(ready_receive(*messages), 10, 1.0))
    assert (status_of(caught.value), caught.value.field) == (413, "body")


def test_a_client_that_leaves_is_gone():
    with pytest.raises(ClientGone):
        run(read_capped(ready_receive({"type": "http.disconnect"}), 10, 1.0))

    async def later() -> None:
        queue: asyncio.Queue[Message] = asyncio.Queue()
        asyncio.get_running_loop().call_later(0.01, queue.put_nowait,
                                              {"type": "http.disconnect"})
        await read_capped(queue_receive(queue), 10, 1.0)
    with pytest.raises(ClientGone):
        run(later())


def test_cancelling_a_waiting_read_reaches_the_receive_it_waits_in():
    seen: list[str] = []

    async def receive() -> Message:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return part(b"")

    async def scenario() -> None:
        task = asyncio.create_task(read_capped(receive, 10, 5.0))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    run(scenario())
    assert seen == ["cancelled"]


def test_a_receive_that_returns_a_future_is_awaited_too():
    async def scenario() -> bytearray:
        loop = asyncio.get_running_loop()

        def receive() -> asyncio.Future[Message]:
            future: asyncio.Future[Message] = loop.create_future()
            loop.call_later(0.01, future.set_result, part(b"ok"))
            return future
        return await read_capped(receive, 10, 1.0)
    assert run(scenario()) == b"ok"
