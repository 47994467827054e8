"""The command line: argv in, exit status out."""
