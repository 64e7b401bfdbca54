"""Batch capture, the step store, and replay of Megatron's exact per-step data.

``capture`` (Megatron side, no torch import), ``layout`` (``datasets/*.yaml`` capture layouts),
``store`` (lazy, verified ``CaptureStore``), ``verify`` / ``show`` / ``diff_data`` (the
``workbench data`` tools). Importing this package imports nothing heavy.
"""
