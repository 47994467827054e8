"""The program's output as a small Markdown report. Runs in the world `stats`: FIELDS was
read once by the world's setup (Farmfile.example), not by this script."""
import sys

target = sys.argv[1]
with open(target, "w") as out:
    out.write("# stats report\n")
    for key in sorted(FIELDS):  # noqa: F821 - a global of the world
        out.write(f"{key:>5}: {FIELDS[key]}\n")  # noqa: F821
