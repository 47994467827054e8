"""The REAPI, ByteStream and Bots methods farmer calls, bound by method path.

Only message classes are generated (farmer/remote/protos); binding by path needs no *_pb2_grpc.py,
so the stubs do not pin a grpcio version.
"""

from __future__ import annotations

from google.protobuf import empty_pb2 as empty

from farmer.remote.protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re
from farmer.remote.protos.google.bytestream import bytestream_pb2 as bs
from farmer.remote.protos.google.devtools.remoteworkers.v1test2 import bots_pb2 as bots
from farmer.remote.protos.google.longrunning import operations_pb2 as ops

_RE = "/build.bazel.remote.execution.v2."
_BOTS = "/google.devtools.remoteworkers.v1test2.Bots/"

# name -> (path, kind, request class, response class); kind is grpc's channel method name
METHODS = {
    "GetCapabilities": (_RE + "Capabilities/GetCapabilities", "unary_unary",
                        re.GetCapabilitiesRequest, re.ServerCapabilities),
    # the same method, asked of the executor when it is another server (client.py's channels)
    "GetCapabilitiesExec": (_RE + "Capabilities/GetCapabilities", "unary_unary",
                            re.GetCapabilitiesRequest, re.ServerCapabilities),
    "FindMissingBlobs": (_RE + "ContentAddressableStorage/FindMissingBlobs", "unary_unary",
                         re.FindMissingBlobsRequest, re.FindMissingBlobsResponse),
    "BatchUpdateBlobs": (_RE + "ContentAddressableStorage/BatchUpdateBlobs", "unary_unary",
                         re.BatchUpdateBlobsRequest, re.BatchUpdateBlobsResponse),
    "BatchReadBlobs": (_RE + "ContentAddressableStorage/BatchReadBlobs", "unary_unary",
                       re.BatchReadBlobsRequest, re.BatchReadBlobsResponse),
    "GetActionResult": (_RE + "ActionCache/GetActionResult", "unary_unary",
                        re.GetActionResultRequest, re.ActionResult),
    "UpdateActionResult": (_RE + "ActionCache/UpdateActionResult", "unary_unary",
                           re.UpdateActionResultRequest, re.ActionResult),
    "Execute": (_RE + "Execution/Execute", "unary_stream", re.ExecuteRequest, ops.Operation),
    "WaitExecution": (_RE + "Execution/WaitExecution", "unary_stream",
                      re.WaitExecutionRequest, ops.Operation),
    "CancelOperation": ("/google.longrunning.Operations/CancelOperation", "unary_unary",
                        ops.CancelOperationRequest, empty.Empty),
    "Read": ("/google.bytestream.ByteStream/Read", "unary_stream", bs.ReadRequest, bs.ReadResponse),
    "Write": ("/google.bytestream.ByteStream/Write", "stream_unary", bs.WriteRequest, bs.WriteResponse),
    "CreateBotSession": (_BOTS + "CreateBotSession", "unary_unary",
                         bots.CreateBotSessionRequest, bots.BotSession),
    "UpdateBotSession": (_BOTS + "UpdateBotSession", "unary_unary",
                         bots.UpdateBotSessionRequest, bots.BotSession),
}


def bind(channel, name: str):
    """A callable for method `name` on `channel`."""
    path, kind, request, response = METHODS[name]
    return getattr(channel, kind)(path, request_serializer=request.SerializeToString,
                                  response_deserializer=response.FromString)
