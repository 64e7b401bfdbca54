"""Lazy checkpoint readers and streaming writers behind one interface (see :mod:`.base`).

``open.open_source(path)`` / ``open.open_sink(path, metas)`` pick the format; nothing here
imports torch or mindspore at module level.
"""
