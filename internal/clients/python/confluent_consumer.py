#!/usr/bin/env python3
"""A confluent-kafka-python (librdkafka) consumer group, run by cmd/sluice's
real-client tests (TestConfluentKafkaPythonGroupConsumersConsumeCommitAndTakeOver)
against `sluice serve`.

    python3 confluent_consumer.py BROKERS TOPIC GROUP MEMBERS BEFORE AFTER TIMEOUT_MS

MEMBERS consumers of one group (the classic protocol, librdkafka's default
range,roundrobin assignors) subscribe to TOPIC from the earliest offset, in
this one process, polled in turn. Each commits what one poll returned,
synchronously (enable.auto.commit off), before counting it.

Once BEFORE distinct values are consumed and committed and every member
holds partitions, every member but m0 leaves the group (close: LeaveGroup)
and m0 takes all the partitions over; the test then produces AFTER more.
Once BEFORE+AFTER values are committed, m0 leaves too and the process exits
0; after TIMEOUT_MS it exits 1.

stdout is JSON lines, as internal/clients/kafkajs/consumer.js prints them:
  {"member":"m0","assigned":[0,2]}                     an assignment ([]: a revoke
                                                       before the member leaves)
  {"member":"m0","partition":0,"offset":3,"value":"v"} a record consumed
  {"member":"m0","partition":0,"committed":4}          a commit acknowledged
  {"member":"m1","left":true}                          m1 is leaving
  {"done":true,"values":N}                             all committed, left
librdkafka's errors go to stderr.
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
    if len(argv) != 8:
        log("usage: confluent_consumer.py BROKERS TOPIC GROUP MEMBERS BEFORE AFTER TIMEOUT_MS")
        return 2
    brokers, topic, group = argv[1], argv[2], argv[3]
    members, before, after, timeout_ms = (int(a) for a in argv[4:8])
    deadline = time.monotonic() + timeout_ms / 1000

    assigned = {}  # member name -> its partitions, as its last callback left them
    leaving = set()  # members closing: their revokes are not shown
    consumers = {}  # member name -> its consumer, while it is in the group
    for i in range(members):
        name = "m%d" % i

        def on_assign(_consumer, partitions, name=name):
            ps = sorted(tp.partition for tp in partitions if tp.topic == topic)
            assigned[name] = ps
            emit(member=name, assigned=ps)

        def on_revoke(_consumer, _partitions, name=name):
            if name in leaving:
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
        consumers[name] = c

    committed = set()
    phase = "before"
    try:
        while time.monotonic() < deadline:
            for name, c in sorted(consumers.items()):
                consume_once(name, c, topic, committed)
            if phase == "before":
                holding = sum(1 for ps in assigned.values() if ps)
                if len(committed) >= before and holding == members:
                    phase = "after"
                    for name in sorted(consumers):
                        if name != "m0":
                            leaving.add(name)
                            emit(member=name, left=True)
                            consumers.pop(name).close()  # leaves the group
            elif len(committed) >= before + after:
                phase = "done"
                break
        else:
            log("timed out after %d ms in phase %s with %d of %d values committed"
                % (timeout_ms, phase, len(committed), before + after))
    finally:
        leaving.update(consumers)
        for c in consumers.values():
            c.close()  # leaves the group
    if phase != "done":
        return 1
    emit(done=True, values=len(committed))
    return 0


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
