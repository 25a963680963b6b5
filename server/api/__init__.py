"""JSON endpoints for the pages' scripts (same login and the same per-course access as the pages)."""
