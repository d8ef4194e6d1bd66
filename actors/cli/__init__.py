"""The ``cap`` command line: thin layers over the same actors the embedding API uses."""
