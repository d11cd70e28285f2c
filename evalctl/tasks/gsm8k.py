"""GSM8K, lm-eval's own task YAML with a pinned packaged copy of its data (evalctl/datasets/gsm8k).

Its filters keep the names evalctl's records have always used (`strict`, `flexible`), so older run folders read the same.
"""

from __future__ import annotations

from pathlib import Path

from evalctl.tasks.spec import TaskSpec


def final_answer(target: str) -> str:
    """GSM8K's reference solution ends `#### N`: N is the answer scored."""
    return target.split("####")[-1].strip()


def _lm_eval_folder() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("lm_eval")
    root = Path(spec.origin).parent if spec and spec.origin else Path("lm_eval")
    return root / "tasks" / "gsm8k"


GSM8K = TaskSpec(  # listed in tasks.registry.TASKS
    name="gsm8k",
    yaml_dir=_lm_eval_folder(),
    metric_names={"strict-match": "strict", "flexible-extract": "flexible"},
    target=final_answer,
    packaged_data=True,
)
