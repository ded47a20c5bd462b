#!/usr/bin/env python3
"""A kafka-python consumer group, run by cmd/sluice's real-client tests
(TestKafkaPythonGroupConsumersConsumeCommitAndTakeOver) against `sluice serve`.

    python3 kafka_python_consumer.py BROKERS TOPIC GROUP MEMBERS BEFORE AFTER TIMEOUT_MS

kafka-python 2.0 is an old client: it finds its coordinator with
FindCoordinator v0, joins with JoinGroup v0-v2 (as the broker version it
probes allows), commits with OffsetCommit v2 and reads commits with
OffsetFetch v1. MEMBERS consumers of one group (range assignor) subscribe
to TOPIC from the earliest offset, in this one process, one thread each.
Each commits what one poll returned, synchronously (enable_auto_commit
off), before counting it.

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
    def __init__(self, name, state, stop):
        self.name, self.state, self.stop = name, state, stop

    def on_partitions_revoked(self, revoked):
        if self.stop.is_set():
            return  # the member is leaving: not shown
        with self.state.lock:
            self.state.assigned[self.name] = []
        emit(member=self.name, assigned=[])

    def on_partitions_assigned(self, assigned):
        ps = sorted(tp.partition for tp in assigned if tp.topic == self.state.topic)
        with self.state.lock:
            self.state.assigned[self.name] = ps
        emit(member=self.name, assigned=ps)


def main(argv):
    if len(argv) != 8:
        log("usage: kafka_python_consumer.py BROKERS TOPIC GROUP MEMBERS BEFORE AFTER TIMEOUT_MS")
        return 2
    brokers, topic, group = argv[1].split(","), argv[2], argv[3]
    members, before, after, timeout_ms = (int(a) for a in argv[4:8])
    deadline = time.monotonic() + timeout_ms / 1000
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    state = State(topic)
    threads = {}  # member name -> (its thread, its stop event)
    for i in range(members):
        name, stop = "m%d" % i, threading.Event()
        th = threading.Thread(target=member, args=(name, brokers, group, state, stop))
        threads[name] = (th, stop)
        th.start()

    phase = "before"
    while time.monotonic() < deadline:
        if phase == "before" and state.holding_all(before, members):
            phase = "after"
            for name, (th, stop) in sorted(threads.items()):
                if name != "m0":
                    emit(member=name, left=True)
                    stop.set()
                    th.join()
        elif phase == "after" and state.committed_count() >= before + after:
            phase = "done"
            break
        time.sleep(0.05)
    else:
        log("timed out after %d ms in phase %s with %d of %d values committed"
            % (timeout_ms, phase, state.committed_count(), before + after))
    for th, stop in threads.values():
        stop.set()
        th.join()
    if phase != "done":
        return 1
    emit(done=True, values=state.committed_count())
    return 0


class State:
    """What the members share, under one lock."""

    def __init__(self, topic):
        self.topic = topic
        self.lock = threading.Lock()
        self.assigned = {}  # member name -> its partitions, as its last callback left them
        self.committed = set()

    def holding_all(self, before, members):
        """Whether before values are committed and every member holds partitions."""
        with self.lock:
            holding = sum(1 for ps in self.assigned.values() if ps)
            return len(self.committed) >= before and holding == members

    def committed_count(self):
        with self.lock:
            return len(self.committed)


def member(name, brokers, group, state, stop):
    """One consumer of the group, polling in its own thread until stop is
    set: kafka-python joins inside poll, so members polled in turn by one
    thread would wait for one another's JoinGroup until the rebalance
    times out."""
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
        c.subscribe([state.topic], listener=Listener(name, state, stop))
        while not stop.is_set():
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
