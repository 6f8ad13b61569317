"""Ascend's profiler output: the text export (ASCEND_PROFILER_OUTPUT) and the SQLite .db."""
