"""Token counts as the server counts them (`/tokenize`), or an estimate when it cannot say."""

from __future__ import annotations

import httpx

# Fallback when a server has no /tokenize: English prose runs ~3-4 characters per token.
CHARS_PER_TOKEN = 4.0
# Statuses that mean the server has no tokenize endpoint (rather than a passing failure).
NO_ENDPOINT = (404, 405, 501)


class TokenCounter:
    """Counts tokens through the server's own tokenizer; `exact` says whether it could."""

    def __init__(self, http: httpx.Client, model: str | None = None):
        self.http = http
        self.model = model
        self.exact: bool | None = None  # unknown until the first call

    def count(self, text: str) -> int:
        if self.exact is not False:
            n = self._tokenize(text)
            if n is not None:
                self.exact = True
                return n
        return max(1, round(len(text) / CHARS_PER_TOKEN)) if text else 0

    def _tokenize(self, text: str) -> int | None:
        """The server's count; None (and `exact` False for good) when it has no usable /tokenize.

        A failed connection is retried once and then estimated for this text only: servers close a
        kept-alive connection after a streamed answer, and one such miss must not turn every later
        count into an estimate.
        """
        # llama.cpp reads `content`; vLLM and SGLang read `prompt` (+ `model`).
        body = {"content": text, "prompt": text, **({"model": self.model} if self.model else {})}
        for attempt in range(2):
            try:
                response = self.http.post("/tokenize", json=body)
                break
            except httpx.TransportError:
                if attempt:
                    return None
        if response.status_code != 200:
            if response.status_code in NO_ENDPOINT:
                self.exact = False
            return None
        try:
            data = response.json()
        except ValueError:
            data = None
        data = data if isinstance(data, dict) else {}
        if isinstance(data.get("count"), int):
            return data["count"]
        if isinstance(data.get("tokens"), list):
            return len(data["tokens"])
        self.exact = False  # answers, but not in a shape we can count
        return None
