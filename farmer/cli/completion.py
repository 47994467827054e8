"""Shell completion of targets (docs/cli.md "Shell completion"): the task names and the
declared outputs of the project the command line names so far. click completes commands and
options itself; this runs only when a shell asks, never in a build."""

from __future__ import annotations

MAX_ITEMS = 500  # a shell lists this many at most; a 10k project's outputs would drown it


def targets(ctx, param, incomplete: str) -> list:
    """click's shell_complete for TARGET arguments. A project that cannot be read completes
    nothing: a completion must never print an error into the user's command line."""
    from click.shell_completion import CompletionItem

    from farmer.build import command

    params = ctx.params
    ninja = bool(params.get("ninja"))
    try:
        spec, graph = command.load_project(params.get("directory"), params.get("farmfile") or "Farmfile",
                                           False, ninja, params.get("farmfile") not in (None, "Farmfile"))
    except Exception:  # noqa: BLE001 - whatever is wrong is the build's to say, not the shell's
        return []
    names = sorted(t for t in graph.by_task if t.startswith(incomplete))
    items = [CompletionItem(t, help="task") for t in names]
    for path in sorted(p for p in graph.producer if p.startswith(incomplete)):
        if len(items) >= MAX_ITEMS:
            break
        items.append(CompletionItem(path, help="output"))
    return items[:MAX_ITEMS]
