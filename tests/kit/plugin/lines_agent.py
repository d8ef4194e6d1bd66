"""The agent for the x-lines test binding: answers each line in capitals, then END."""

import sys

for line in sys.stdin:
    print("TEXT " + line.strip().upper(), flush=True)
    print("END", flush=True)
