"""The event model, readers for every DFTracer generation, the wire codec, the parse pool."""
