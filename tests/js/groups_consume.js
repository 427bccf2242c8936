// A KafkaJS consumer group against refka:
// `node groups_consume.js <bootstrap> <topic> <group> <expected> <members>`.
//
// Starts <members> consumers in one group (consumer.run with eachMessage,
// auto-commit after every message), waits until together they have read
// <expected> records and every partition is owned by exactly one of them,
// disconnects them (commit, LeaveGroup), and prints one JSON object on
// stdout: per member its last assignment and the records it read (partition,
// offset, key, value and headers as base64).
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, topic, groupId, expectedArg, membersArg] = process.argv.slice(2)
if (!bootstrap || !topic || !groupId || !expectedArg) {
  console.error('usage: node groups_consume.js <bootstrap> <topic> <group> <expected> [members]')
  process.exit(2)
}
const expected = Number(expectedArg)
const memberCount = Number(membersArg || 2)
const DEADLINE_MS = 60000 // only against hangs

const b64 = buf => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))

async function main() {
  const kafka = new Kafka({
    clientId: 'refka-kafkajs-group',
    brokers: bootstrap.split(','),
    logLevel: logLevel.ERROR,
    retry: { retries: 8 },
  })
  const members = []
  for (let i = 0; i < memberCount; i++) {
    const consumer = kafka.consumer({
      groupId,
      sessionTimeout: 10000,
      rebalanceTimeout: 20000,
      heartbeatInterval: 1000,
      allowAutoTopicCreation: false,
    })
    const member = { consumer, assignment: [], records: [], generation: -1 }
    consumer.on(consumer.events.GROUP_JOIN, e => {
      member.assignment = (e.payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b)
      member.generation = e.payload.generationId !== undefined ? e.payload.generationId : member.generation
    })
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({
      autoCommit: true,
      autoCommitThreshold: 1,
      eachMessage: async ({ partition, message }) => {
        const headers = Object.entries(message.headers || {}).map(([k, v]) => [k, b64(v)])
        member.records.push({
          partition,
          offset: Number(message.offset),
          key: b64(message.key),
          value: b64(message.value),
          headers,
        })
      },
    })
    members.push(member)
  }

  const start = Date.now()
  const done = () => {
    const total = members.reduce((n, m) => n + m.records.length, 0)
    const owned = members.flatMap(m => m.assignment)
    return total >= expected && members.every(m => m.assignment.length > 0) && new Set(owned).size === owned.length
  }
  while (!done()) {
    if (Date.now() - start > DEADLINE_MS) throw new Error('timed out waiting for the group to read everything')
    await new Promise(r => setTimeout(r, 100))
  }
  // The assignments as they were once the group had read everything: leaving
  // (below) makes the group rebalance again.
  const assignments = members.map(m => m.assignment)
  for (const m of members) await m.consumer.disconnect()
  const out = members.map((m, i) => ({ assignment: assignments[i], records: m.records }))
  process.stdout.write(JSON.stringify({ members: out }) + '\n')
}

main().catch(e => {
  console.error(`kafkajs group failed: ${e && e.stack ? e.stack : e}`)
  process.exit(1)
})
