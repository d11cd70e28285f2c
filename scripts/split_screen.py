"""Does computing one prompt in another split move its answer on a healthy build? (batch numerics, not a cache bug)

A warm request that recomputes most of its prompt from an early checkpoint (llama.cpp 2026.7.10068 on
Gemma-3 keeps only its first checkpoint, 18 tokens, at its default 8192-token spacing, and restores it on
every return) prefills in other micro-batches than its cold twin. This regenerates a run's request
(`--doc`, from the run's recorded config: its workload and seed), then asks a fresh server of the given
release for it three ways, greedy, with logprobs: cold as one prompt; after caching only its first line
(the task's instruction: the rest recomputed, as such a return does); after caching its first
`--cut` characters. If a healthy release's answer moves between them, a warm-vs-cold move of that
request is the split's, not a restored state's.

    python scripts/split_screen.py RUN --doc 17 --python VENV/bin/python --model MODEL.gguf
"""

from __future__ import annotations

import argparse
import json
import tempfile
import urllib.request
from pathlib import Path

from slot_reuse_screen import Server

from evalctl import plan
from evalctl.config import config_from_dict


def ask(server: Server, prompt: str, cache: bool) -> str:
    body = {"prompt": prompt, "n_predict": 5, "temperature": 0, "cache_prompt": cache, "n_probs": 1}
    request = urllib.request.Request(f"http://127.0.0.1:{server.port}/completion", json.dumps(body).encode())
    reply = json.load(urllib.request.urlopen(request, timeout=600))
    tokens = " ".join(f"{p['token']!r} {p['logprob']:.3f}" for p in reply.get("completion_probabilities", []))
    return f"{reply['content']!r} ({tokens})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run folder: its manifest's config regenerates the request")
    parser.add_argument("--doc", type=int, required=True, help="the request's doc_id")
    parser.add_argument("--python", required=True, help="the interpreter of a venv holding the xllamacpp release")
    parser.add_argument("--model", required=True)
    parser.add_argument("--cut", type=int, default=800, help="characters cached before the prompt, the third way")
    args = parser.parse_args()
    config = config_from_dict(json.loads((args.run / "manifest.json").read_text())["config"], None, str(args.run))
    built = plan.build(config)
    text = next(p.text for p in next(iter(built.cells.values())).prompts if p.doc_id == args.doc)
    args.param = ["cache_ram_mib=0"]
    logs = Path(tempfile.mkdtemp(prefix="split-screen-"))
    ways = [
        ("cold, one prompt", None),
        ("after its first line", text[: text.index("\n") + 1]),
        (f"after {args.cut} chars", text[: args.cut]),
    ]
    for name, cached in ways:
        server = Server(args, logs / f"{len(cached or '')}.log", "off" if cached is None else "on", 1)
        try:
            if cached is not None:
                ask(server, cached, True)
            print(f"{name:22} {ask(server, text, cached is not None)}")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
