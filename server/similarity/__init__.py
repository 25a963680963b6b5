"""Similarity runs of a homework: the table, the job the worker runs, and opening an
integrity review from a pair or cluster. The comparison itself is ``coursework.similarity``;
the instructor's pages are ``server.dashboard.similarity``."""
