// KafkaJS admin client against refka: `node admin_offsets.js <bootstrap> <topic> [timestamp...]`.
//
// Prints one JSON object on stdout: fetchTopicMetadata for the topic,
// fetchTopicOffsets (low, high, offset per partition), and
// fetchTopicOffsetsByTimestamp for each timestamp given.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, topic, ...timestamps] = process.argv.slice(2)
if (!bootstrap || !topic) {
  console.error('usage: node admin_offsets.js <bootstrap> <topic> [timestamp...]')
  process.exit(2)
}

async function main() {
  const kafka = new Kafka({
    clientId: 'refka-kafkajs-admin',
    brokers: bootstrap.split(','),
    logLevel: logLevel.ERROR,
    retry: { retries: 5 },
  })
  const admin = kafka.admin()
  await admin.connect()
  const result = {}
  try {
    const md = await admin.fetchTopicMetadata({ topics: [topic] })
    result.metadata = md.topics.map(t => ({
      name: t.name,
      partitions: t.partitions
        .map(p => ({
          partition: p.partitionId,
          error_code: p.partitionErrorCode,
          leader: p.leader,
          replicas: p.replicas,
          isr: p.isr,
        }))
        .sort((a, b) => a.partition - b.partition),
    }))
    const offsets = await admin.fetchTopicOffsets(topic)
    result.offsets = offsets
      .map(o => ({ partition: o.partition, offset: Number(o.offset), low: Number(o.low), high: Number(o.high) }))
      .sort((a, b) => a.partition - b.partition)
    result.by_timestamp = {}
    for (const ts of timestamps) {
      const found = await admin.fetchTopicOffsetsByTimestamp(topic, Number(ts))
      result.by_timestamp[ts] = found
        .map(o => ({ partition: o.partition, offset: Number(o.offset) }))
        .sort((a, b) => a.partition - b.partition)
    }
    result.topics = (await admin.listTopics()).sort()
  } finally {
    await admin.disconnect()
  }
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().catch(e => {
  console.error(`kafkajs admin failed: ${e && e.stack ? e.stack : e}`)
  process.exit(1)
})
