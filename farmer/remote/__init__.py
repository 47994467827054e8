"""A REAPI v2 client (Bazel's Remote Execution API): remote cache and remote execution.

Nothing here is imported on farmer's ordinary path: `config` is plain Python, and the modules that
need grpc and protobuf (the `remote` extra: `pip install 'farmer-build[remote]'`) are imported
only when a computation is about to consult a remote. Data path: config (where) -> client (the calls) -> merkle (input roots) ->
worker (the bot that runs actions for BuildGrid).
"""
