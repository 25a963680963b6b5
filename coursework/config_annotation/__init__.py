"""Homework 2's side that the web app needs too: reading a config and the upload-time format check.

The grading itself (catalogue, annotations, nbgrader) is in ``graders.config_annotation``.
"""
