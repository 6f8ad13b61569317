"""dynprof_nb: profile a running training job from a notebook."""

__version__ = "0.1.0"
