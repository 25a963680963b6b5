"""A submission that does not parse: the student forgot a closing parenthesis."""
import torch


def main(:
    print("never runs", torch.__version__)


if __name__ == "__main__":
    main()
