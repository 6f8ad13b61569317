"""PyTorch's key_averages() table saved as text (the worked example of a format)."""
