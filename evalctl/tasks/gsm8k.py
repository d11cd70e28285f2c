"""GSM8K, lm-eval's own task YAML with a pinned packaged copy of its data (evalctl/datasets/gsm8k).

Its filters keep the names evalctl's records have always used (`strict`, `flexible`), so older run folders read the same.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from evalctl.tasks.spec import TaskSpec


def final_answer(target: str) -> str:
    """GSM8K's reference solution ends `#### N`: N is the answer scored."""
    return target.split("####")[-1].strip()


GSM8K = TaskSpec(  # listed in tasks.registry.TASKS
    name="gsm8k",
    yaml_dir=Path(find_spec("lm_eval").origin).parent / "tasks" / "gsm8k",  # found, not imported: that takes seconds
    metric_names={"strict-match": "strict", "flexible-extract": "flexible"},
    target=final_answer,
    packaged_data=True,
)
