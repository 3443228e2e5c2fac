package lead

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/telemetry"
)

func count(n int64) *int64 { return &n }

// A turn end's usage goes on the attempt it names, never on another
// worker's or another attempt's; a reading without counts does not
// replace one with counts.
func TestUsageGoesToItsAttempt(t *testing.T) {
	l, _ := testLoop(t)
	p := l.st.Plans["p"]
	p.History = []ledger.Attempt{{N: 1, Worker: "w1", Start: testNow.Add(-time.Hour)}}
	idle := func(worker string, u telemetry.Usage) event.Event {
		e := workerEvent(event.Idle, "", worker, "")
		e.Usage = &u
		return e
	}
	ctx := context.Background()
	if err := l.noteEvent(ctx, idle("w2", telemetry.Usage{Source: telemetry.SourceClaudeTranscript, Plan: "p", Input: count(5)})); err != nil {
		t.Fatal(err)
	}
	if p.History[0].Usage != nil {
		t.Fatalf("w2's usage was put on w1's attempt: %+v", p.History[0].Usage)
	}
	if err := l.noteEvent(ctx, idle("w1", telemetry.Usage{Source: telemetry.SourceClaudeTranscript, Plan: "p", Input: count(7)})); err != nil {
		t.Fatal(err)
	}
	if u := p.History[0].Usage; u == nil || *u.Input != 7 {
		t.Fatalf("attempt usage = %+v, want 7 input tokens", u)
	}
	if err := l.noteEvent(ctx, idle("w1", telemetry.Usage{Source: telemetry.SourceClaudeTranscript, Plan: "p", Missing: "transcript unreadable"})); err != nil {
		t.Fatal(err)
	}
	if u := p.History[0].Usage; u == nil || u.Input == nil || *u.Input != 7 {
		t.Fatalf("a reading without counts replaced one with counts: %+v", u)
	}
	e := idle("w1", telemetry.Usage{Source: telemetry.SourceClaudeTranscript, Plan: "p", Input: count(9)})
	e.Attempt = 2 // a headless hook tied to another attempt
	l.noteEvent(ctx, e)
	if *p.History[0].Usage.Input != 7 {
		t.Fatalf("another attempt's usage was taken: %+v", p.History[0].Usage)
	}
	if w := l.st.Worker("w1"); w.Last != "idle" {
		t.Errorf("w1's last event %q, want idle", w.Last)
	}
}

// Once the attempt is ledgered, its usage is a fact committed about that
// entry, naming the plan; the same numbers again commit nothing.
func TestUsageAfterTheHarvestIsAFact(t *testing.T) {
	l, f := testLoop(t)
	en, _, err := ledger.Append(l.cfg.Root, ledger.Entry{Plan: "p", Worker: "w1", Status: "ok", Commit: "c", Time: testNow, Event: "done1"})
	if err != nil {
		t.Fatal(err)
	}
	p := l.st.Plans["p"]
	end := testNow.Add(-time.Minute)
	p.State, p.Ledger, p.LedgeredAttempt = state.PlanDone, en.ID, 1
	p.History = []ledger.Attempt{{N: 1, Worker: "w1", Start: testNow.Add(-time.Hour), End: &end, Outcome: "done"}}
	f.Expect("git", []string{"show", "HEAD:" + ledger.File}, "", gitExit(128)).
		Expect("git", []string{"ls-tree", "--name-only", "HEAD", "--", ledger.File}, "", nil)
	expectCommit(f, "ledger fact #1: usage of p\n\nOrch-Fact: idle1\n", "abc", ledger.File)
	u := telemetry.Usage{Source: telemetry.SourceClaudeTranscript, Plan: "p", Input: count(11)}
	if err := l.keepUsage(context.Background(), p, &p.History[0], u, "idle1"); err != nil {
		t.Fatal(err)
	}
	if err := l.keepUsage(context.Background(), p, &p.History[0], u, "idle2"); err != nil {
		t.Fatal(err) // the same numbers: no git call expected
	}
	got, err := ledger.Load(l.cfg.Root)
	if err != nil || got[0].Usage == nil || *got[0].Usage.Input != 11 {
		t.Fatalf("entry after the fact: %+v (%v)", got, err)
	}
}

// A headless run's stated cost joins the tokens its transcript gave; a
// result that does not add up is not taken.
func TestHeadlessCost(t *testing.T) {
	l, _ := testLoop(t)
	p := l.st.Plans["p"]
	p.History = []ledger.Attempt{{N: 1, Worker: "w1", Start: testNow.Add(-time.Hour),
		Usage: &telemetry.Usage{Source: telemetry.SourceClaudeTranscript, Plan: "p", Input: count(3), Output: count(4)}}}
	logs := filepath.Join(l.orchDir, orchdir.Logs)
	os.MkdirAll(logs, 0o700)
	write := func(body string) {
		if err := os.WriteFile(filepath.Join(logs, fleet.LogName("p", 1)), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e := event.Record(event.Exited, "x1", "p", "w1", "process 1 exit status 0", testNow)
	e.Attempt = 1
	write("some output\n" + `{"type":"result","total_cost_usd":-1,"usage":{"input_tokens":1,"output_tokens":1}}` + "\n")
	if err := l.headlessCost(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if u := p.History[0].Usage; u.CostUSD != nil {
		t.Fatalf("a negative cost was taken: %+v", u)
	}
	write("some output\n" + `{"type":"result","total_cost_usd":0.25,"usage":{"input_tokens":1,"output_tokens":1},"modelUsage":{"claude-x\u001b[31m":{}}}` + "\n")
	if err := l.headlessCost(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	u := p.History[0].Usage
	if u.CostUSD == nil || *u.CostUSD != 0.25 || *u.Input != 3 || u.Source != telemetry.SourceClaudeTranscript {
		t.Fatalf("usage = %+v, want the transcript's tokens and the stated cost", u)
	}
	if strings.ContainsRune(u.Model, 0x1b) {
		t.Errorf("model %q carries an escape", u.Model)
	}
}
