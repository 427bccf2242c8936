// Command refka-franz drives refka with franz-go (github.com/twmb/franz-go), the Go
// client, for tests/integration/test_franz_go.py. `make go-clients` builds it into
// .cache/bin/refka-franz.
//
// Subcommands, each printing one JSON object per line (bytes as base64, as
// encoding/json writes []byte; null for a null key, value or header value):
//
//	produce        records with keys and headers, acks=all, idempotent (franz-go's
//	               defaults), one compression codec; a line per record and its offset
//	consume-group  one consumer group member (cooperative-sticky, franz-go's default;
//	               commits after each poll); its assignments, records and commits,
//	               until --count records or stdin closes
//	admin          a kadm round trip over one topic and one group; a line per step
//
// Kafka errors are printed by name (kerr's, e.g. UNKNOWN_MEMBER_ID) for the test to
// assert on; only a failure to run at all exits non-zero.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	outMu sync.Mutex
	out   = json.NewEncoder(os.Stdout)
)

// emit prints one JSON line; safe from franz-go's callbacks' goroutines.
func emit(v map[string]any) {
	outMu.Lock()
	defer outMu.Unlock()
	if err := out.Encode(v); err != nil {
		fatal("writing stdout: %v", err)
	}
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "refka-franz: "+format+"\n", args...)
	os.Exit(1)
}

// errName is a Kafka error's name (kerr's), another error's text, or nil.
func errName(err error) any {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

// common are the flags every subcommand has.
type common struct {
	brokers string
	timeout time.Duration
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.brokers, "brokers", "127.0.0.1:9092", "bootstrap brokers, comma separated")
	fs.DurationVar(&c.timeout, "timeout", 60*time.Second, "the whole command's deadline (against hangs only)")
}

func (c *common) seeds() []string { return strings.Split(c.brokers, ",") }

// context is the command's deadline. A command still running 10s past it exits 1: some
// waits do not end with their context (franz-go does not fail an idempotent record once
// sent, as it cannot know whether the broker wrote it).
func (c *common) context() (context.Context, context.CancelFunc) {
	time.AfterFunc(c.timeout+10*time.Second, func() {
		fatal("still running 10s after the deadline of %v", c.timeout)
	})
	return context.WithTimeout(context.Background(), c.timeout)
}

// clientOpts are the options every client here starts from.
func (c *common) clientOpts(clientID string) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.ClientID(clientID)}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: refka-franz produce|consume-group|admin [flags] (-h for a subcommand's flags)")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	commands := map[string]func([]string){
		"produce":       runProduce,
		"consume-group": runConsumeGroup,
		"admin":         runAdmin,
	}
	run, ok := commands[os.Args[1]]
	if !ok {
		usage()
	}
	run(os.Args[2:])
}
