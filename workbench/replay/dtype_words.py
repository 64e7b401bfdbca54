"""The dtype words of the ``datasets/`` layouts (``dtype: floating``) and the numpy kinds each allows.

Shared by the capture layouts (:mod:`workbench.replay.layout`) and the step-store kinds
(:mod:`workbench.replay.step_kinds`); a module of its own so that telling whether a folder is a step
store does not import the capture layouts.
"""

KINDS = {"integer": "iu", "floating": "f", "bool": "b"}
