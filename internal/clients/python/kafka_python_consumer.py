#!/usr/bin/env python3
"""A kafka-python consumer group, run by cmd/sluice's real-client tests
(TestKafkaPythonGroupConsumersConsumeAndCommit) against `sluice serve`.

    python3 kafka_python_consumer.py BROKERS TOPIC GROUP MEMBERS EXPECT TIMEOUT_MS

kafka-python 2.0 is an old client: it finds its coordinator with
FindCoordinator v0 and reads commits with OffsetFetch v1, and joins with
JoinGroup v0-v2 as its probed broker version allows. MEMBERS consumers of
one group (range assignor) subscribe to TOPIC from the earliest offset, in
this one process, one thread each. Each commits what one poll returned,
synchronously (enable_auto_commit off), before counting it. Once EXPECT
distinct values are consumed and committed and every member holds
partitions, every member closes (LeaveGroup) and the process exits 0; after
TIMEOUT_MS it exits 1.

stdout is JSON lines, as internal/clients/kafkajs/consumer.js prints them:
  {"member":"m0","assigned":[0,2]}                     an assignment ([]: a revoke
                                                       before the members close)
  {"member":"m0","partition":0,"offset":3,"value":"v"} a record consumed
  {"member":"m0","partition":0,"committed":4}          a commit acknowledged
  {"done":true,"values":N}                             all committed, left
kafka-python's log (WARNING and up) goes to stderr.
"""

import json
import logging
import sys
import threading
import time

from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import KafkaError


_emit_lock = threading.Lock()


def emit(**event):
    with _emit_lock:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


class Listener(ConsumerRebalanceListener):
    def __init__(self, name, state):
        self.name, self.state = name, state

    def on_partitions_revoked(self, revoked):
        if self.state.stop.is_set():
            return  # the members are closing: not shown
        with self.state.lock:
            self.state.assigned[self.name] = []
        emit(member=self.name, assigned=[])

    def on_partitions_assigned(self, assigned):
        ps = sorted(tp.partition for tp in assigned if tp.topic == self.state.topic)
        with self.state.lock:
            self.state.assigned[self.name] = ps
        emit(member=self.name, assigned=ps)


def main(argv):
    if len(argv) != 7:
        log("usage: kafka_python_consumer.py BROKERS TOPIC GROUP MEMBERS EXPECT TIMEOUT_MS")
        return 2
    brokers, topic, group = argv[1].split(","), argv[2], argv[3]
    members, expect, timeout_ms = int(argv[4]), int(argv[5]), int(argv[6])
    deadline = time.monotonic() + timeout_ms / 1000
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    state = State(topic)
    threads = [threading.Thread(target=member, args=("m%d" % i, brokers, group, state)) for i in range(members)]
    for th in threads:
        th.start()
    code = 1
    while time.monotonic() < deadline:
        if state.finished(expect, members):
            code = 0
            break
        time.sleep(0.05)
    else:
        log("timed out after %d ms with %d of %d values committed" % (timeout_ms, state.committed_count(), expect))
    state.stop.set()
    for th in threads:
        th.join()
    if code == 0:
        emit(done=True, values=state.committed_count())
    return code


class State:
    """What the members share, under one lock."""

    def __init__(self, topic):
        self.topic = topic
        self.lock = threading.Lock()
        self.stop = threading.Event()  # set when the members are to close
        self.assigned = {}  # member name -> its partitions, as its last callback left them
        self.committed = set()

    def finished(self, expect, members):
        with self.lock:
            holding = sum(1 for ps in self.assigned.values() if ps)
            return len(self.committed) >= expect and holding == members

    def committed_count(self):
        with self.lock:
            return len(self.committed)


def member(name, brokers, group, state):
    """One consumer of the group, polling in its own thread: kafka-python
    joins inside poll, so members polled in turn by one thread would wait
    for one another's JoinGroup until the rebalance times out."""
    c = KafkaConsumer(
        bootstrap_servers=brokers,
        group_id=group,
        client_id="sluice-kafka-python-test-" + name,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=10000,
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=200,
    )
    try:
        c.subscribe([state.topic], listener=Listener(name, state))
        while not state.stop.is_set():
            consume_once(name, c, state)
    except Exception as e:  # a member that dies shows why; the main thread times out
        log("%s: %r" % (name, e))
        raise
    finally:
        c.close(autocommit=False)  # leaves the group


def consume_once(name, c, state):
    polled = c.poll(timeout_ms=100, max_records=500)
    ends = {}
    values = []
    for tp, records in sorted(polled.items()):
        for r in records:
            emit(member=name, partition=tp.partition, offset=r.offset, value=r.value.decode())
            ends[tp] = r.offset + 1
            values.append(r.value.decode())
    if not ends:
        return
    try:
        c.commit({tp: OffsetAndMetadata(end, None) for tp, end in ends.items()})
    except KafkaError as e:
        log("%s: commit: %r" % (name, e))
        return
    for tp, end in sorted(ends.items()):
        emit(member=name, partition=tp.partition, committed=end)
    with state.lock:
        state.committed.update(values)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
