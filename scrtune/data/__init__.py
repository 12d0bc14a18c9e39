"""Data shipped inside scrtune: the example trace and the example system profile."""
