"""The local output cache (SPEC §5): computations restored from a content-addressed store
instead of run, when the up-to-date rule (§2) would call a stored trace up to date here.

Along the data's path: `settings` (whether the cache is on, where it is, its limit), `key`
(the action description a computation is keyed by), `store` (the directory: its entries,
`entry`; its blobs, `blobs`; ac.db opened, `database`; `eviction`; `errors`), `restore`
(outputs written back from blobs, verified; links as links), `leftovers` (the temporary
files of killed restores, removed), `use` (what a build does with it: look up before a run,
store after one). Nothing here is imported by a no-op build
(`farmer clean` imports `leftovers` alone).
"""
