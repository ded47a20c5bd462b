// A kafkajs consumer group, run by cmd/sluice's real-client tests
// (TestKafkajsGroupConsumersConsumeCommitAndTakeOver) against `sluice serve`.
//
//   node consumer.js BROKERS TOPIC GROUP MEMBERS BEFORE AFTER TIMEOUT_MS
//
// MEMBERS consumers of one group (kafkajs's classic protocol: JoinGroup,
// SyncGroup with its round-robin assignor, Heartbeat) subscribe to TOPIC
// from the beginning, in this one process. Each processes what it fetches
// a batch at a time and commits the batch's end (autoCommit off,
// OffsetCommit) before counting its records.
//
// Once BEFORE distinct values are consumed and committed and every member
// holds partitions, every member but m0 leaves the group (disconnect:
// LeaveGroup), and m0 takes all the partitions over; the test then produces
// AFTER more. Once BEFORE+AFTER values are committed, m0 leaves too and the
// process exits 0; after TIMEOUT_MS it exits 1.
//
// stdout is JSON lines, one per event (the Python scripts print the same):
//   {"member":"m0","assigned":[0,2]}                     a join completed
//   {"member":"m0","partition":0,"offset":3,"value":"v"} a record consumed
//   {"member":"m0","partition":0,"committed":4}          a commit acknowledged
//   {"member":"m1","left":true}                          m1 is leaving
//   {"done":true,"values":N}                             all committed, left
// kafkajs's own log goes to stderr.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const args = process.argv.slice(2)
if (args.length !== 7) {
  process.stderr.write('usage: node consumer.js BROKERS TOPIC GROUP MEMBERS BEFORE AFTER TIMEOUT_MS\n')
  process.exit(2)
}
const [brokers, topic, groupId] = args
const [membersN, before, after, timeoutMs] = args.slice(3).map(Number)

const emit = obj => process.stdout.write(JSON.stringify(obj) + '\n')

const kafka = new Kafka({
  clientId: 'sluice-kafkajs-test',
  brokers: brokers.split(','),
  logLevel: logLevel.INFO,
  logCreator: () => ({ namespace, label, log }) => {
    process.stderr.write(JSON.stringify({ level: label, namespace, ...log }) + '\n')
  },
})

const committed = new Set()
const assigned = new Map() // member name -> its partitions at its last join
const consumers = new Map() // member name -> its consumer, while it is in the group
let phase = 'before' // then 'after' once the others left, then 'finished'

const timer = setTimeout(() => {
  process.stderr.write(`timed out after ${timeoutMs} ms in phase ${phase} with ${committed.size} of ${before + after} values committed\n`)
  finish(1)
}, timeoutMs)

async function finish(code) {
  if (phase === 'finished') return
  phase = 'finished'
  clearTimeout(timer)
  // Disconnect stops the member's runner and sends LeaveGroup.
  await Promise.allSettled([...consumers.values()].map(c => c.disconnect()))
  if (code === 0) emit({ done: true, values: committed.size })
  process.exit(code)
}

function progress() {
  if (phase === 'before') {
    const holding = [...assigned.values()].filter(ps => ps.length > 0).length
    if (committed.size >= before && holding === membersN) leaveAllBut('m0')
  } else if (phase === 'after') {
    if (committed.size >= before + after) finish(0)
  }
}

function leaveAllBut(keep) {
  phase = 'after'
  for (const [name, c] of consumers) {
    if (name === keep) continue
    consumers.delete(name)
    emit({ member: name, left: true })
    c.disconnect().catch(err => {
      process.stderr.write(`${name}: disconnect: ${err.stack}\n`)
      finish(1)
    })
  }
  progress() // AFTER may be 0
}

async function startMember(name) {
  const consumer = kafka.consumer({ groupId, heartbeatInterval: 500, sessionTimeout: 10000, maxWaitTimeInMs: 500 })
  consumers.set(name, consumer)
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    const partitions = (payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b)
    assigned.set(name, partitions)
    emit({ member: name, assigned: partitions })
    progress()
  })
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    process.stderr.write(`${name} crashed: ${payload.error && payload.error.stack}\n`)
    finish(1)
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch, heartbeat, isRunning }) => {
      if (batch.isEmpty() || !isRunning()) return
      for (const m of batch.messages) {
        emit({ member: name, partition: batch.partition, offset: Number(m.offset), value: m.value.toString() })
      }
      const next = (BigInt(batch.lastOffset()) + 1n).toString()
      await consumer.commitOffsets([{ topic, partition: batch.partition, offset: next }])
      emit({ member: name, partition: batch.partition, committed: Number(next) })
      for (const m of batch.messages) committed.add(m.value.toString())
      await heartbeat()
      progress()
    },
  })
}

Promise.all(Array.from({ length: membersN }, (_, i) => startMember(`m${i}`))).catch(err => {
  process.stderr.write(`start: ${err.stack}\n`)
  finish(1)
})
