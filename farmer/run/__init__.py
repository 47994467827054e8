"""How computations run: the scheduler, executors and worlds. Nothing here knows traces."""
