"""A small gRPC client of VQS, with grpcio and the code generated from vqs.proto.

    vqs serve --grpc-port 8643 &                # the grpc extra: pip install 'vqs[grpc]'
    python examples/grpc_client.py [--target 127.0.0.1:8643] [--token T]

Creates a topic, produces on one stream (an acknowledgement per batch),
subscribes (the records, then waits for more), commits the group's position,
and takes a message through a queue (send, receive, delete). Any other language
generates its client from vqs/server/grpc/proto/vqs/v1/vqs.proto (docs/grpc.md).
"""

from __future__ import annotations

import argparse
import uuid

import grpc

from vqs.server.grpc.gen import vqs_pb2 as pb
from vqs.server.grpc.gen import vqs_pb2_grpc as pbg


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="127.0.0.1:8643")
    ap.add_argument("--token", default=None, help="a bearer token of the server (--token)")
    args = ap.parse_args(argv)
    md = (("authorization", f"Bearer {args.token}"),) if args.token else None
    name = f"example-{uuid.uuid4().hex[:8]}"

    with grpc.insecure_channel(args.target) as ch:
        topics, records = pbg.TopicsStub(ch), pbg.RecordsStub(ch)
        groups, queues = pbg.GroupsStub(ch), pbg.QueuesStub(ch)

        topics.CreateTopic(pb.CreateTopicRequest(name=name, partitions=1), metadata=md)

        # ProduceStream: batches go out back to back; each comes back acknowledged, in order
        batches = (pb.ProduceRequest(topic=name, values=[f"event {i}-{j}".encode() for j in range(3)], batch_id=i)
                   for i in range(4))
        for ack in records.ProduceStream(batches, metadata=md):
            r = ack.ranges[0]
            print(f"batch {ack.batch_id}: {ack.count} records at offsets {r.base_offset}..{r.base_offset + r.count - 1}")

        # Subscribe from the group's committed position (none yet: the start); the stream
        # stays open for records produced later, until we cancel it (or a deadline passes)
        stream = records.Subscribe(pb.SubscribeRequest(topic=name, group="example"), metadata=md, timeout=30)
        seen = 0
        for batch in stream:
            for offset, value in zip(batch.offsets, batch.values):
                print(f"  {batch.topic}[{batch.partition}] offset {offset}: {value.decode()}")
            seen += len(batch.values)
            if seen >= 12:
                groups.Commit(pb.CommitRequest(group="example", offsets=[
                    pb.PartitionOffset(topic=name, partition=batch.partition, offset=batch.next_offset)]), metadata=md)
                stream.cancel()
                break
        lag = groups.Lag(pb.LagRequest(group="example"), metadata=md)
        print(f"group example: lag {lag.total_lag} after committing")

        # A queue: the SQS front's semantics and receipt handles
        queues.CreateQueue(pb.CreateQueueRequest(name=name, attributes={"VisibilityTimeout": "30"}), metadata=md)
        queues.Send(pb.SendRequest(queue=name, entries=[pb.SendEntry(body=b"resize image 42")]), metadata=md)
        got = queues.Receive(pb.ReceiveRequest(queue=name, max_messages=1, wait_seconds=5), metadata=md)
        for m in got.messages:
            print(f"queue {name}: {m.body.decode()!r} (receive count {m.receive_count})")
            queues.Delete(pb.DeleteRequest(queue=name, receipt_handle=m.receipt_handle), metadata=md)

        try:
            records.Fetch(pb.FetchRequest(topic=name, offset=1000), metadata=md)
        except grpc.RpcError as e:
            print(f"fetch past the end: {e.code().name}: {e.details()}")

        queues.DeleteQueue(pb.DeleteQueueRequest(name=name), metadata=md)
        topics.DeleteTopic(pb.DeleteTopicRequest(name=name), metadata=md)


if __name__ == "__main__":
    main()
