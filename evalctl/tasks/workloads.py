"""The workload registry: how a task's questions become the requests a sweep sends.

A workload (`tasks.spec.Workload`) turns the task's prompts at one shot count into the requests of a cell, each
a `Prompt` (its last question scored). With none a cell sends the questions alone. evalctl's own are
listed in `WORKLOADS` (`conversation`: the `conversation:` block's histories; `hunt`: histories
generated from the server's and model's shape); a plug-in names its `Workload` in an
`evalctl.workloads` entry point (`evalctl.registry`). A sweep names one with `workload:` or
`--workload NAME`.
"""

from __future__ import annotations

from evalctl.registry import Registry
from evalctl.tasks.spec import Workload

__all__ = ["WORKLOADS", "Workload"]  # a plug-in imports Workload from here


WORKLOADS: Registry[Workload] = Registry(
    "workload", ("evalctl.tasks.conversation:WORKLOAD", "evalctl.tasks.hunt:WORKLOAD"), key=lambda workload: workload.name
)
