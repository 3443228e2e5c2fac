package broker

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/notify"
)

// Go benchmarks of the callback's network path without process start-up:
// go run ./bench times the orch-notify process itself. Each runs against a
// broker started as orch serve starts it (stream, consumers, worker role).
//
//	go test -run '^$' -bench . -benchmem ./broker ./event

// BenchmarkRoundTrip is the baseline: one PING/PONG with the broker on an
// open worker connection (nc.Flush), the least any acknowledged exchange
// can cost.
func BenchmarkRoundTrip(b *testing.B) {
	_, dir := startBroker(b)
	nc := workerConn(b, dir)
	for b.Loop() {
		if err := nc.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublishAcked is one event published on an open connection and
// the stream's acknowledgement (stored in its file store; the store's sync
// policy is the broker's). The stream and its duplicate window grow by one
// event per op: harmless at the default -benchtime.
func BenchmarkPublishAcked(b *testing.B) {
	br, dir := startBroker(b)
	nc := workerConn(b, dir)
	for b.Loop() {
		e := event.New(event.Done, "p1", "ok", "w1", "bench")
		if _, dup, err := notify.PublishOn(nc, br.Prefix(), e, 2*time.Second); err != nil || dup {
			b.Fatalf("dup=%v err=%v", dup, err)
		}
	}
}

// BenchmarkSend is what orch-notify does after its start-up: connect with
// the worker NKey (INFO, signed CONNECT, PING/PONG), publish, wait for the
// acknowledgement, close.
func BenchmarkSend(b *testing.B) {
	_, dir := startBroker(b)
	cfg, err := notify.WorkerConfig(func(k string) string { return map[string]string{"ORCH_WORKER": "w1"}[k] }, filepath.Dir(dir))
	if err != nil {
		b.Fatal(err)
	}
	cfg.SpoolDir = "" // an event not acked is an error here, not a spool file
	for b.Loop() {
		res, err := notify.Send(cfg, event.New(event.Done, "p1", "ok", "w1", "bench"))
		if err != nil || !res.Acked || res.Duplicate {
			b.Fatalf("%+v %v", res, err)
		}
	}
}
