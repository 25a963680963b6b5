"""Student pages: homework list, assignment spec and upload, submission status and report."""
