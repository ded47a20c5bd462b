// A kafkajs consumer group, run by cmd/sluice's real-client tests
// (TestKafkajsGroupConsumersConsumeAndCommit) against `sluice serve`.
//
//   node consumer.js BROKERS TOPIC GROUP MEMBERS EXPECT TIMEOUT_MS
//
// MEMBERS consumers of one group (kafkajs's classic protocol: JoinGroup,
// SyncGroup with its round-robin assignor, Heartbeat) subscribe to TOPIC
// from the beginning, in this one process. Each processes what it fetches
// a batch at a time and commits the batch's end (autoCommit off,
// OffsetCommit) before counting its records. Once EXPECT distinct values
// are consumed and committed and every member holds partitions (a group
// of one that consumed everything is not what the test asks for), every
// member disconnects (LeaveGroup) and the process exits 0; after
// TIMEOUT_MS it exits 1.
//
// stdout is JSON lines, one per event:
//   {"member":"m0","assigned":[0,2]}                  a join completed
//   {"member":"m0","partition":0,"offset":3,"value":"v"}  a record consumed
//   {"member":"m0","partition":0,"committed":4}       a commit acknowledged
//   {"done":true,"values":N}                           all committed, left
// kafkajs's own log goes to stderr.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const [brokers, topic, groupId, membersArg, expectArg, timeoutArg] = process.argv.slice(2)
if (timeoutArg === undefined) {
  process.stderr.write('usage: node consumer.js BROKERS TOPIC GROUP MEMBERS EXPECT TIMEOUT_MS\n')
  process.exit(2)
}
const membersN = Number(membersArg)
const expect = Number(expectArg)

const emit = obj => process.stdout.write(JSON.stringify(obj) + '\n')

const kafka = new Kafka({
  clientId: 'sluice-kafkajs-test',
  brokers: brokers.split(','),
  logLevel: logLevel.INFO,
  logCreator: () => ({ namespace, level, label, log }) => {
    process.stderr.write(JSON.stringify({ level: label, namespace, ...log }) + '\n')
  },
})

const committed = new Set()
const assigned = new Map() // member name -> its partitions at its last join
const consumers = []
let finished = false

async function finish(code) {
  if (finished) return
  finished = true
  clearTimeout(timer)
  // Disconnect stops the member's runner and sends LeaveGroup.
  await Promise.allSettled(consumers.map(c => c.disconnect()))
  if (code === 0) emit({ done: true, values: committed.size })
  process.exit(code)
}

const timer = setTimeout(() => {
  process.stderr.write(`timed out after ${timeoutArg} ms with ${committed.size} of ${expect} values committed\n`)
  finish(1)
}, Number(timeoutArg))

function maybeFinish() {
  const holding = [...assigned.values()].filter(ps => ps.length > 0).length
  if (committed.size >= expect && holding === membersN) finish(0)
}

async function startMember(name) {
  const consumer = kafka.consumer({ groupId, heartbeatInterval: 500, sessionTimeout: 10000, maxWaitTimeInMs: 500 })
  consumers.push(consumer)
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    const partitions = (payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b)
    assigned.set(name, partitions)
    emit({ member: name, assigned: partitions })
    maybeFinish()
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
      maybeFinish()
    },
  })
}

Promise.all(Array.from({ length: membersN }, (_, i) => startMember(`m${i}`))).catch(err => {
  process.stderr.write(`start: ${err.stack}\n`)
  finish(1)
})
