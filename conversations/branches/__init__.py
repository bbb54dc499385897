"""Branches: the tree of runs, editing and regenerating, switching versions."""
