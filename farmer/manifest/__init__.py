"""Reading a project: Farmfile and build.ninja bytes into a `Spec`."""
