"""The LR-schedule figure, drawn with the shared figure helpers (both schedules over each other,
their absolute and relative difference, the tolerance as a line)."""
from __future__ import annotations

import numpy as np


def schedules_figure(comparison, megatron_name: str = "Megatron", mindformers_name: str = "MindFormers"):
    """Figure of a :class:`workbench.audit.lr_schedule.ScheduleComparison`; sides named by file."""
    from ..report.figures import series_with_difference

    x = np.asarray(comparison.steps)
    title = f"Learning-rate schedules: max relative difference {comparison.max_relative_difference:.3g}"
    if comparison.first_differing_update:
        title += f", first beyond rtol {comparison.rtol:g} at update {comparison.first_differing_update}"
    if len(x) != comparison.updates:
        title += f"\n({len(x)} sampled updates of {comparison.updates}, every breakpoint included)"
    series = {f"Megatron ({megatron_name})": comparison.megatron,
              f"MindFormers ({mindformers_name})": comparison.mindformers}
    return series_with_difference(x, series, title=title, ylabel="learning rate", xlabel="optimizer update",
                                  threshold=comparison.rtol, logy=False)
