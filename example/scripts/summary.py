"""The program's output as JSON, numbers as numbers. Runs in the world `stats`, like
report.py: both are forked from one interpreter that imported json and read the data once."""
import sys

target = sys.argv[1]
with open(target, "w") as out:
    json.dump({key: float(value) for key, value in FIELDS.items()}, out, indent=1, sort_keys=True)  # noqa: F821
    out.write("\n")
