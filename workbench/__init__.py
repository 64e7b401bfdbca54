"""workbench: accuracy alignment from Megatron-LM / MindSpeed-LLM to MindSpore / MindFormers."""

__version__ = "0.1.0"
