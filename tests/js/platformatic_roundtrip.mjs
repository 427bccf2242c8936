// @platformatic/kafka against refka: `node platformatic_roundtrip.mjs <bootstrap> <topic> <group> <count>`.
//
// Creates the topic (3 partitions) with its Admin client, produces <count> keyed
// records with its Producer, then consumes them in a consumer group (classic
// protocol, from the earliest offsets, autocommit) until all came back or 60 s
// passed. Prints one JSON object on stdout: what was produced (key, value,
// partition, offset) and what was consumed. The Python test compares them.
import { Admin, Consumer, MessagesStreamModes, Producer, stringDeserializers, stringSerializers } from '@platformatic/kafka'

const [bootstrap, topic, group, countArg] = process.argv.slice(2)
if (!bootstrap || !topic || !group || !countArg) {
  console.error('usage: node platformatic_roundtrip.mjs <bootstrap> <topic> <group> <count>')
  process.exit(2)
}
const count = Number(countArg)
const bootstrapBrokers = bootstrap.split(',')

const admin = new Admin({ clientId: 'refka-platformatic-admin', bootstrapBrokers })
await admin.createTopics({ topics: [topic], partitions: 3, replicas: 1 })
await admin.close()

const producer = new Producer({ clientId: 'refka-platformatic-producer', bootstrapBrokers, serializers: stringSerializers })
const messages = []
for (let i = 0; i < count; i++) messages.push({ topic, key: `key-${i % 7}`, value: `value-${i}` })
const sent = await producer.send({ messages })
await producer.close()

const consumer = new Consumer({
  groupId: group, clientId: 'refka-platformatic-consumer', bootstrapBrokers, deserializers: stringDeserializers
})
const stream = await consumer.consume({
  topics: [topic], mode: MessagesStreamModes.EARLIEST, autocommit: true, sessionTimeout: 10000, heartbeatInterval: 500
})
const consumed = []
const timer = setTimeout(() => stream.destroy(new Error(`timed out with ${consumed.length} of ${count} records`)), 60000)
try {
  for await (const m of stream) {
    consumed.push({ key: m.key, value: m.value, partition: m.partition, offset: Number(m.offset) })
    if (consumed.length >= count) break
  }
} finally {
  clearTimeout(timer)
  await consumer.close(true)
}
console.log(JSON.stringify({ offsets: sent.offsets?.map(o => ({ ...o, offset: Number(o.offset) })) ?? null, consumed }))
