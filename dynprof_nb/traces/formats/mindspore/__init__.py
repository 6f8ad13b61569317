"""MindSpore's FRAMEWORK/ files and the MindSpore backend's step records."""
