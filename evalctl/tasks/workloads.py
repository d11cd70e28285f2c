"""The workload registry: how a task's questions become the requests a sweep sends (`workload:`, `--workload NAME`).

A workload (`tasks.spec.Workload`) turns the task's prompts at one shot count into a cell's requests; with none a
cell sends the questions alone. A plug-in names its `Workload` in an `evalctl.workloads` entry point.
"""

from __future__ import annotations

from evalctl.registry import Registry
from evalctl.tasks.spec import Workload

__all__ = ["WORKLOADS", "Workload"]  # a plug-in imports Workload from here


WORKLOADS: Registry[Workload] = Registry(
    "workload", ("evalctl.tasks.conversation:WORKLOAD", "evalctl.tasks.hunt:WORKLOAD"), key=lambda workload: workload.name
)
