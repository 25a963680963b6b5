"""Similarity between students' submissions of one homework.

Pure functions, no Flask, no student code run: ``extract`` turns an uploaded file into the text
that is compared (Python code, a notebook's code cells, a config's annotations), ``fingerprint``
turns that text into normalised tokens and winnowed k-gram fingerprints, ``compare`` finds the
pairs and clusters that share fingerprints beyond the boilerplate (the starter, the reference
solution and whatever most of the class writes) and the regions to highlight side by side.
"""
from coursework.similarity.compare import Doc, Settings, compare  # noqa: F401
from coursework.similarity.regions import largest_region, pair_segments  # noqa: F401
from coursework.similarity.extract import extract  # noqa: F401
from coursework.similarity.spec import Spec, corpus_docs, corpus_text, excluded, load_spec  # noqa: F401
