"""prefix-recall: lm-eval task config (prefix-recall.yaml) and its seeded document generator (generate.py).

The shots axis counts the prefix's records, so a prompt needs at least one record to ask about.
"""

from pathlib import Path

from evalctl.tasks.spec import TaskSpec

PREFIX_RECALL = TaskSpec(  # listed in tasks.registry.TASKS
    name="prefix-recall",
    yaml_dir=Path(__file__).resolve().parent,
    metric_names={"strict-match": "strict", "flexible-extract": "flexible"},
    generated=True,
    min_shots=1,
)
