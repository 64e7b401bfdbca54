"""Per-operator dumps of both frameworks as one tidy table, and their comparison (issue 11).

:mod:`.schema` fixes the table every reader returns; readers, matching and verdicts build on it.
"""
