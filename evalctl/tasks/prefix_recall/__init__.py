"""prefix-recall: lm-eval task config (prefix-recall.yaml) and its seeded document generator (generate.py)."""
