"""Tasks through lm-eval: offline data, few-shot modes, and the served-model LM."""

import os

# lm-eval's tqdm bars would tear Rich's progress display; tqdm reads this at import.
os.environ.setdefault("TQDM_DISABLE", "1")
