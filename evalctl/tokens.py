"""Token counts as the server counts them (`/tokenize`), or an estimate when it cannot say."""

from __future__ import annotations

import httpx

# Fallback when a server has no /tokenize: English prose runs ~3-4 characters per token.
CHARS_PER_TOKEN = 4.0


class TokenCounter:
    """Counts tokens through the server's own tokenizer; `exact` says whether it could."""

    def __init__(self, http: httpx.Client, model: str | None = None):
        self.http = http
        self.model = model
        self.exact: bool | None = None  # unknown until the first call

    def count(self, text: str) -> int:
        if self.exact is not False:
            n = self._tokenize(text)
            self.exact = n is not None
            if n is not None:
                return n
        return max(1, round(len(text) / CHARS_PER_TOKEN)) if text else 0

    def _tokenize(self, text: str) -> int | None:
        # llama.cpp reads `content`; vLLM and SGLang read `prompt` (+ `model`).
        body = {"content": text, "prompt": text, **({"model": self.model} if self.model else {})}
        try:
            response = self.http.post("/tokenize", json=body)
            if response.status_code != 200:
                return None
            data = response.json()
        except (httpx.HTTPError, ValueError):
            return None
        if isinstance(data, dict) and isinstance(data.get("count"), int):
            return data["count"]
        tokens = data.get("tokens") if isinstance(data, dict) else None
        return len(tokens) if isinstance(tokens, list) else None
