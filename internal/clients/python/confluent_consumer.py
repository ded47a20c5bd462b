#!/usr/bin/env python3
"""A confluent-kafka-python (librdkafka) consumer group, run by cmd/sluice's
real-client tests (TestConfluentKafkaPythonGroupConsumersConsumeAndCommit)
against `sluice serve`.

    python3 confluent_consumer.py BROKERS TOPIC GROUP MEMBERS EXPECT TIMEOUT_MS

MEMBERS consumers of one group (the classic protocol, librdkafka's default
range,roundrobin assignors) subscribe to TOPIC from the earliest offset, in
this one process, polled in turn. Each commits what one poll returned,
synchronously (enable.auto.commit off), before counting it. Once EXPECT
distinct values are consumed and committed and every member holds
partitions, every member closes (LeaveGroup) and the process exits 0; after
TIMEOUT_MS it exits 1.

stdout is JSON lines, as internal/clients/kafkajs/consumer.js prints them:
  {"member":"m0","assigned":[0,2]}                     an assignment ([]: a revoke
                                                       before the members close)
  {"member":"m0","partition":0,"offset":3,"value":"v"} a record consumed
  {"member":"m0","partition":0,"committed":4}          a commit acknowledged
  {"done":true,"values":N}                             all committed, left
librdkafka's errors and logs go to stderr.
"""

import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition


def emit(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def main(argv):
    if len(argv) != 7:
        log("usage: confluent_consumer.py BROKERS TOPIC GROUP MEMBERS EXPECT TIMEOUT_MS")
        return 2
    brokers, topic, group = argv[1], argv[2], argv[3]
    members, expect, timeout_ms = int(argv[4]), int(argv[5]), int(argv[6])
    deadline = time.monotonic() + timeout_ms / 1000

    assigned = {}  # member name -> its partitions, as its last callback left them
    closing = []  # not empty once the members close: their revokes are not shown
    consumers = []
    for i in range(members):
        name = "m%d" % i

        def on_assign(_consumer, partitions, name=name):
            ps = sorted(tp.partition for tp in partitions if tp.topic == topic)
            assigned[name] = ps
            emit(member=name, assigned=ps)

        def on_revoke(_consumer, _partitions, name=name):
            if closing:
                return
            assigned[name] = []
            emit(member=name, assigned=[])

        c = Consumer({
            "bootstrap.servers": brokers,
            "group.id": group,
            "client.id": "sluice-confluent-test-" + name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
            "fetch.wait.max.ms": 200,
            "error_cb": lambda err, name=name: log("%s: error: %s" % (name, err)),
        })
        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        consumers.append((name, c))

    committed = set()
    code = 1
    try:
        while time.monotonic() < deadline:
            for name, c in consumers:
                consume_once(name, c, topic, committed)
            holding = sum(1 for ps in assigned.values() if ps)
            if len(committed) >= expect and holding == members:
                code = 0
                break
        else:
            log("timed out after %d ms with %d of %d values committed" % (timeout_ms, len(committed), expect))
    finally:
        closing.append(True)
        for _, c in consumers:
            c.close()  # leaves the group
    if code == 0:
        emit(done=True, values=len(committed))
    return code


def consume_once(name, c, topic, committed):
    msgs = c.consume(num_messages=500, timeout=0.1)
    ends = {}
    values = []
    for m in msgs:
        if m.error():
            log("%s: consume: %s" % (name, m.error()))
            continue
        emit(member=name, partition=m.partition(), offset=m.offset(), value=m.value().decode())
        ends[m.partition()] = m.offset() + 1
        values.append(m.value().decode())
    if not ends:
        return
    offsets = [TopicPartition(topic, p, end) for p, end in sorted(ends.items())]
    try:
        result = c.commit(offsets=offsets, asynchronous=False)
    except KafkaException as e:
        log("%s: commit: %s" % (name, e))
        return
    for tp in result:
        if tp.error:
            log("%s: commit of partition %d: %s" % (name, tp.partition, tp.error))
            return
    for tp in result:
        emit(member=name, partition=tp.partition, committed=tp.offset)
    committed.update(values)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
