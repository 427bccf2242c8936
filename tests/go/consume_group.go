package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// member is one consumer group member's view of its assignment, kept by
// franz-go's callbacks (which, cooperative-sticky being incremental, name only the
// partitions added or taken away).
type member struct {
	mu    sync.Mutex
	topic string
	owned map[int32]bool
}

func (m *member) change(cl *kgo.Client, event string, parts map[string][]int32, add bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	changed := append([]int32{}, parts[m.topic]...) // franz-go calls with none at each rebalance too
	for _, p := range changed {
		if add {
			m.owned[p] = true
		} else {
			delete(m.owned, p)
		}
	}
	owned := make([]int32, 0, len(m.owned))
	for p := range m.owned {
		owned = append(owned, p)
	}
	slices.Sort(owned)
	slices.Sort(changed)
	memberID, generation := cl.GroupMetadata()
	emit(map[string]any{"event": event, "partitions": changed, "owned": owned,
		"member_id": memberID, "generation": generation})
}

func runConsumeGroup(args []string) {
	var c common
	fs := flag.NewFlagSet("consume-group", flag.ExitOnError)
	c.register(fs)
	topic := fs.String("topic", "", "topic to consume")
	group := fs.String("group", "", "consumer group")
	name := fs.String("name", "member", "this member's name, in its client id")
	count := fs.Int("count", 0, "stop after this many records (0: when stdin closes)")
	fs.Parse(args)
	if *topic == "" || *group == "" {
		fatal("consume-group needs --topic and --group")
	}

	ctx, cancel := c.context()
	defer cancel()
	m := &member{topic: *topic, owned: map[int32]bool{}}
	cl, err := kgo.NewClient(append(c.clientOpts("refka-franz-"+*name),
		kgo.ConsumerGroup(*group), kgo.ConsumeTopics(*topic),
		kgo.ConsumeStartOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, p map[string][]int32) {
			m.change(cl, "assigned", p, true)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, cl *kgo.Client, p map[string][]int32) {
			m.change(cl, "revoked", p, false)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, cl *kgo.Client, p map[string][]int32) {
			m.change(cl, "lost", p, false)
		}),
	)...)
	if err != nil {
		fatal("new client: %v", err)
	}

	// Polls stop when stdin closes (the test's signal to leave) or at the deadline.
	pollCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	stdinClosed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
		stopPolling()
	}()

	read := 0
	for *count == 0 || read < *count {
		var fetches kgo.Fetches
		if *count > 0 {
			fetches = cl.PollRecords(pollCtx, *count-read) // never more than asked: all of them are committed
		} else {
			fetches = cl.PollFetches(pollCtx)
		}
		stopped := pollCtx.Err() != nil
		fetches.EachError(func(t string, p int32, err error) {
			if stopped && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
				return
			}
			emit(map[string]any{"event": "fetch_error", "topic": t, "partition": p, "error": errName(err)})
		})
		records := fetches.Records()
		next := map[int32]int64{}
		for _, r := range records {
			emit(map[string]any{"event": "record", "topic": r.Topic, "partition": r.Partition, "offset": r.Offset,
				"key": r.Key, "value": r.Value, "headers": headersOf(r), "leader_epoch": r.LeaderEpoch})
			next[r.Partition] = r.Offset + 1
		}
		read += len(records)
		if len(records) > 0 {
			// Committed before the rebalance this poll blocked may go ahead.
			err := cl.CommitRecords(ctx, records...)
			emit(map[string]any{"event": "committed", "offsets": next, "error": errName(err)})
		}
		cl.AllowRebalance()
		if stopped {
			break
		}
	}

	reason := "count"
	select {
	case <-stdinClosed:
		reason = "stdin"
	default:
		if ctx.Err() != nil {
			reason = "timeout"
		}
	}
	emit(map[string]any{"event": "stopped", "reason": reason, "records": read})
	leaveCtx, leaveCancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer leaveCancel()
	emit(map[string]any{"event": "left", "error": errName(cl.LeaveGroupContext(leaveCtx))})
	cl.Close()
	if reason == "timeout" {
		fatal("deadline of %v passed after %d records", c.timeout, read)
	}
}
