"""Summarise the program's output into a small report."""
import sys

source, target = sys.argv[1], sys.argv[2]
fields = dict(part.split("=") for part in open(source).read().split())
with open(target, "w") as out:
    out.write("# stats report\n")
    for key in sorted(fields):
        out.write(f"{key:>5}: {fields[key]}\n")
