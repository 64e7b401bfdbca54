"""Tiny CPU reference models: a Megatron-style torch GPT and a MindFormers-style MindSpore Llama.

They implement the same math (:data:`workbench.reference.config.MATH`) with each framework's
real parameter names, layouts, training conventions and log formats, and are the project's
test bed and the engine of the demo. torch and mindspore are imported only by the modules
that need them (``torch_*``, ``ms_*``).
"""
