"""Conversion plans executed one tensor at a time, verification, and checkpoint diff."""
