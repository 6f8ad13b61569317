"""Chrome trace JSON (Kineto, the built-in backend's trace.json): the "kineto" source."""
