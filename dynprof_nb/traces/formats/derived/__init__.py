"""Frames derived from other frames (ops from events, steps, device tasks)."""
