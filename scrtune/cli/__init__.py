"""The `scrtune` command line: a thin layer over library calls."""
