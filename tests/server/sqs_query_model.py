"""An SQS service model for botocore (and so the AWS CLI) that speaks the query protocol.

botocore's SQS model speaks AWS JSON 1.0 only since April 2024 (and briefly from
1.31.81, November 2023): current boto3 and AWS CLI v1/v2 never send a query
request. Older releases sent query requests, with the wire names of the 2012-11-05
query model (``Attribute.1.Name``, ``AttributeName.1``, ``SendMessageBatchRequestEntry.1.Id``,
XML answers in ``<{Action}Result>``). This module rebuilds that model from the installed
JSON one: the same operations and shapes, plus the query protocol's names (the
``locationName`` traits and result wrappers the JSON model dropped). botocore loads a
model from ``AWS_DATA_PATH`` before its own, so ``write_query_model(dir)`` and
``AWS_DATA_PATH=dir`` make the installed CLI speak the query protocol.
"""

from __future__ import annotations

import copy
import json
import os

# list shape -> its members' wire name
_LIST_MEMBERS = {
    "AttributeNameList": "AttributeName",
    "MessageAttributeNameList": "MessageAttributeName",
    "MessageSystemAttributeList": "MessageSystemAttributeName",
    "TagKeyList": "TagKey",
    "AWSAccountIdList": "AWSAccountId",
    "ActionNameList": "ActionName",
    "SendMessageBatchRequestEntryList": "SendMessageBatchRequestEntry",
    "DeleteMessageBatchRequestEntryList": "DeleteMessageBatchRequestEntry",
    "ChangeMessageVisibilityBatchRequestEntryList": "ChangeMessageVisibilityBatchRequestEntry",
    "SendMessageBatchResultEntryList": "SendMessageBatchResultEntry",
    "DeleteMessageBatchResultEntryList": "DeleteMessageBatchResultEntry",
    "ChangeMessageVisibilityBatchResultEntryList": "ChangeMessageVisibilityBatchResultEntry",
    "BatchResultErrorEntryList": "BatchResultErrorEntry",
    "QueueUrlList": "QueueUrl",
    "MessageList": "Message",
    "ListMessageMoveTasksResultEntryList": "ListMessageMoveTasksResultEntry",
}
# structure member holding a map -> (its wire name, key name, value name)
_MAP_MEMBERS = {
    "Attributes": ("Attribute", "Name", "Value"),
    "MessageAttributes": ("MessageAttribute", "Name", "Value"),
    "MessageSystemAttributes": ("MessageSystemAttribute", "Name", "Value"),
    "Tags": ("Tag", "Key", "Value"),
    "tags": ("Tag", "Key", "Value"),
}


def _botocore_sqs_model() -> dict:
    """The installed SQS model: the AWS CLI's own copy of botocore (awscli >= 1.44
    vendors one at awscli/botocore) if there is one, else botocore's."""
    import gzip
    import importlib.util

    roots = []
    spec = importlib.util.find_spec("awscli")
    if spec and spec.origin:
        roots.append(os.path.join(os.path.dirname(spec.origin), "botocore"))
    spec = importlib.util.find_spec("botocore")
    if spec and spec.origin:
        roots.append(os.path.dirname(spec.origin))
    for root in roots:
        base = os.path.join(root, "data", "sqs", "2012-11-05", "service-2.json")
        if os.path.exists(base):
            with open(base) as f:
                return json.load(f)
        if os.path.exists(base + ".gz"):
            with gzip.open(base + ".gz") as f:
                return json.load(f)
    raise FileNotFoundError("no botocore SQS model installed")


def query_model() -> dict:
    m = copy.deepcopy(_botocore_sqs_model())
    md = m["metadata"]
    for k in ("jsonVersion", "targetPrefix", "awsQueryCompatible"):
        md.pop(k, None)
    md.update(protocol="query", protocols=["query"], xmlNamespace="http://queue.amazonaws.com/doc/2012-11-05/")
    for name, op in m["operations"].items():
        if "output" in op:
            op["output"]["resultWrapper"] = f"{name}Result"
    shapes = m["shapes"]
    for name, wire in _LIST_MEMBERS.items():
        if name in shapes:
            shapes[name]["member"]["locationName"] = wire
            shapes[name]["flattened"] = True
    for name in ("MessageAttributeValue", "MessageSystemAttributeValue"):
        for member, wire in (("StringListValues", "StringListValue"), ("BinaryListValues", "BinaryListValue")):
            shapes[name]["members"][member].update(locationName=wire, flattened=True)
            shapes[shapes[name]["members"][member]["shape"]]["member"]["locationName"] = wire
    for shape in shapes.values():
        if shape.get("type") != "structure":
            continue
        for member, ref in shape["members"].items():
            target = shapes.get(ref["shape"], {})
            if target.get("type") == "map" and member in _MAP_MEMBERS:
                wire, k, v = _MAP_MEMBERS[member]
                ref["locationName"] = wire
                target["flattened"] = True
                target["key"]["locationName"] = k
                target["value"]["locationName"] = v
    return m


def write_query_model(data_path: str) -> str:
    """Write the query-protocol SQS model under ``data_path`` (for AWS_DATA_PATH); return data_path."""
    d = os.path.join(data_path, "sqs", "2012-11-05")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "service-2.json"), "w") as f:
        json.dump(query_model(), f)
    return data_path
