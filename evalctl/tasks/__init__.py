"""Tasks through lm-eval: offline data, few-shot modes, and the served-model LM."""
