"""Merge (placeholder until written)."""


def main(paths, output, say):
    raise NotImplementedError
