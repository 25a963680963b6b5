"""``python -m server.worker`` stays the worker's command line on purpose: the Docker image's CMD
and operators' service files on other hosts name it. The worker itself is ``server.grading.worker``."""
from server.grading.worker import main

if __name__ == "__main__":
    main()
