// KafkaJS producer against refka: `node produce.js <bootstrap> <topic>`.
//
// Sends a fixed set of records (keys, null key, binary values, headers
// including a repeated header name, explicit timestamps, a gzip batch, and
// keyed records placed by KafkaJS's Java-compatible DefaultPartitioner) and
// prints one JSON object on stdout: what was sent (bytes as base64) and the
// RecordMetadata KafkaJS got back. The Python test reads the topic with
// another client and compares.
'use strict'

const { Kafka, logLevel, CompressionTypes, Partitioners } = require('kafkajs')

const [bootstrap, topic] = process.argv.slice(2)
if (!bootstrap || !topic) {
  console.error('usage: node produce.js <bootstrap> <topic>')
  process.exit(2)
}

const b64 = buf => (buf === null ? null : Buffer.from(buf).toString('base64'))
const BASE_TS = 1700000000000

// Partition 0: explicit partition, explicit timestamps BASE_TS + i * 1000.
function plainRecords() {
  const out = []
  for (let i = 0; i < 6; i++) {
    out.push({
      partition: 0,
      key: i === 3 ? null : Buffer.from(`key-${i}`),
      value: Buffer.from([0, 255, i, 10, 13, 0x80 + i]),
      timestamp: String(BASE_TS + i * 1000),
      headers: { trace: Buffer.from(`t${i}`), multi: [Buffer.from('a'), Buffer.from([0xfe, i])] },
    })
  }
  return out
}

// Partition 1: one gzip batch of UTF-8 text values, explicit timestamps.
function gzipRecords() {
  const out = []
  for (let i = 0; i < 5; i++) {
    out.push({
      partition: 1,
      key: Buffer.from(`gz-${i}`),
      value: Buffer.from(`gzip record ${i} \u00e9\u4e2d\ud83d\ude00`),
      timestamp: String(BASE_TS + 100000 + i),
      headers: { idx: Buffer.from(String(i)) },
    })
  }
  return out
}

// No partition given: KafkaJS's DefaultPartitioner (murmur2, as Java's) places them.
function keyedRecords() {
  const out = []
  for (let i = 0; i < 8; i++) {
    out.push({ key: Buffer.from(`user-${i}`), value: Buffer.from(`keyed-${i}`), timestamp: String(BASE_TS + 200000 + i) })
  }
  return out
}

function describe(records) {
  return records.map(r => {
    const headers = []
    for (const [name, v] of Object.entries(r.headers || {})) {
      for (const one of Array.isArray(v) ? v : [v]) headers.push([name, b64(one)])
    }
    return {
      partition: r.partition === undefined ? null : r.partition,
      key: b64(r.key),
      value: b64(r.value),
      timestamp: Number(r.timestamp),
      headers,
    }
  })
}

async function main() {
  const kafka = new Kafka({
    clientId: 'refka-kafkajs-produce',
    brokers: bootstrap.split(','),
    logLevel: logLevel.ERROR,
    retry: { retries: 5 },
  })
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, allowAutoTopicCreation: false })
  await producer.connect()
  const result = { base_timestamp: BASE_TS, sends: [] }
  try {
    const batches = [
      { name: 'plain', acks: -1, compression: CompressionTypes.None, messages: plainRecords() },
      { name: 'gzip', acks: 1, compression: CompressionTypes.GZIP, messages: gzipRecords() },
      { name: 'keyed', acks: -1, compression: CompressionTypes.None, messages: keyedRecords() },
    ]
    for (const b of batches) {
      const metadata = await producer.send({ topic, acks: b.acks, compression: b.compression, messages: b.messages })
      result.sends.push({
        name: b.name,
        records: describe(b.messages),
        metadata: metadata.map(m => ({
          topic: m.topicName,
          partition: m.partition,
          error_code: m.errorCode,
          base_offset: Number(m.baseOffset),
        })),
      })
    }
  } finally {
    await producer.disconnect()
  }
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().catch(e => {
  console.error(`kafkajs produce failed: ${e && e.stack ? e.stack : e}`)
  process.exit(1)
})
