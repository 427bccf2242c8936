package main

import (
	"bytes"
	"flag"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var codecs = map[string]kgo.CompressionCodec{
	"none":   kgo.NoCompression(),
	"gzip":   kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(),
	"lz4":    kgo.Lz4Compression(),
	"zstd":   kgo.ZstdCompression(),
}

type header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// testRecord is record i of a run: a key (null for every seventh), a value that
// compresses well on its own (so that even a batch of one record goes out
// compressed: franz-go sends a batch uncompressed when compressing does not shrink
// it) with bytes that are not UTF-8, a null value for the last record, and headers
// with a repeated name, an empty value and (every other record) a null value.
func testRecord(topic string, i, count int, base time.Time) *kgo.Record {
	r := &kgo.Record{Topic: topic, Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
	if i%7 != 3 {
		r.Key = fmt.Appendf(nil, "key-%d", i)
	}
	if i != count-1 {
		r.Value = append([]byte{0xff, 0x00, 0xfe, byte(i)}, bytes.Repeat(fmt.Appendf(nil, "franz-go record %d; ", i), 24)...)
	}
	r.Headers = []kgo.RecordHeader{
		{Key: "seq", Value: fmt.Appendf(nil, "%d", i)},
		{Key: "dup", Value: []byte("first")},
		{Key: "dup", Value: []byte("second")},
		{Key: "empty", Value: []byte{}},
	}
	if i%2 == 0 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: "null", Value: nil})
	}
	return r
}

func headersOf(r *kgo.Record) []header {
	hs := make([]header, 0, len(r.Headers))
	for _, h := range r.Headers {
		hs = append(hs, header{h.Key, h.Value})
	}
	return hs
}

func runProduce(args []string) {
	var c common
	fs := flag.NewFlagSet("produce", flag.ExitOnError)
	c.register(fs)
	topic := fs.String("topic", "", "topic to produce to")
	codec := fs.String("codec", "none", "compression: none, gzip, snappy, lz4 or zstd")
	count := fs.Int("count", 20, "how many records")
	baseMs := fs.Int64("base-timestamp-ms", 0, "record i's timestamp is this plus i (0: now)")
	fs.Parse(args)
	compression, ok := codecs[*codec]
	if *topic == "" || !ok {
		fatal("produce needs --topic and a --codec of none, gzip, snappy, lz4, zstd")
	}
	base := time.Now().Truncate(time.Millisecond)
	if *baseMs != 0 {
		base = time.UnixMilli(*baseMs)
	}

	ctx, cancel := c.context()
	defer cancel()
	// acks=all and the idempotent producer are franz-go's defaults; stated, not relied on.
	cl, err := kgo.NewClient(append(c.clientOpts("refka-franz-produce"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(compression))...)
	if err != nil {
		fatal("new client: %v", err)
	}
	defer cl.Close()

	records := make([]*kgo.Record, *count)
	for i := range records {
		records[i] = testRecord(*topic, i, *count, base)
	}
	for _, res := range cl.ProduceSync(ctx, records...) {
		r := res.Record
		emit(map[string]any{
			"event": "produced", "topic": r.Topic, "partition": r.Partition, "offset": r.Offset,
			"key": r.Key, "value": r.Value, "headers": headersOf(r), "timestamp_ms": r.Timestamp.UnixMilli(),
			"error": errName(res.Err),
		})
	}
	id, epoch, err := cl.ProducerID(ctx)
	emit(map[string]any{"event": "producer_id", "producer_id": id, "producer_epoch": epoch,
		"codec": *codec, "error": errName(err)})
}
