"""Token counting through a server's /tokenize: a dropped connection is not a missing endpoint."""

from __future__ import annotations

import httpx

from evalctl.tokens import TokenCounter


def counter_over(answers: list) -> tuple[TokenCounter, list]:
    """A counter whose server gives `answers` in turn: an exception to raise, or (status, json)."""
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        status, body = answer
        return httpx.Response(status, json=body)

    return TokenCounter(httpx.Client(base_url="http://server", transport=httpx.MockTransport(handler))), seen


def test_a_connection_the_server_closed_is_retried_and_later_counts_stay_exact():
    dropped = httpx.RemoteProtocolError("Server disconnected without sending a response.")
    counter, seen = counter_over([(200, {"tokens": [1, 2, 3]}), dropped, (200, {"tokens": [1] * 245}), (200, {"tokens": [1, 2]})])
    assert counter.count("abc") == 3
    assert counter.count("x" * 380) == 245  # not the 95 a chars/4 estimate would give
    assert counter.count("ab") == 2 and counter.exact is True
    assert len(seen) == 4


def test_twice_dropped_estimates_that_text_only():
    dropped = httpx.ConnectError("refused")
    counter, _ = counter_over([dropped, dropped, (200, {"tokens": [1] * 7})])
    assert counter.count("x" * 40) == 10  # estimated
    assert counter.count("y") == 7 and counter.exact is True


def test_no_tokenize_endpoint_means_estimates_from_then_on():
    counter, seen = counter_over([(404, {"error": "not found"})])
    assert counter.count("x" * 40) == 10 and counter.exact is False
    assert counter.count("x" * 8) == 2
    assert len(seen) == 1  # not asked again
