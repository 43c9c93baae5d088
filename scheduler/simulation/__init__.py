"""Offline simulator: replays traces through place() and the baselines."""
