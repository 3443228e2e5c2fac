package board

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/telemetry"
)

// record is a lead record of n plans, each with two attempts and a long
// status, and as many handled events, as a busy fleet's would be.
func record(n int) *state.State {
	st := state.New()
	in := int64(1234)
	now := time.Now()
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("plan-%04d", i)
		end := now
		st.Plans[name] = &state.Run{Name: name, State: state.PlanDone, Worker: "w1", Attempts: 2, Status: strings.Repeat("done ", 40),
			Def: &state.Def{Acceptance: []string{"go test ./..."}, DependsOn: []string{"plan-0000"}}, Updated: now,
			History: []ledger.Attempt{{N: 1, Worker: "w1", Start: now, End: &end, Outcome: "failed"},
				{N: 2, Worker: "w2", Start: now, End: &end, Outcome: "done", Usage: &telemetry.Usage{Source: "claude-transcript", Input: &in, Output: &in}}}}
		st.Handled[fmt.Sprintf("%032d", i)] = &state.Handled{Kind: "done", Plan: name, Time: now}
	}
	for i := 1; i <= 8; i++ {
		st.Workers = append(st.Workers, &state.Worker{ID: fmt.Sprintf("w%d", i), State: state.WorkerIdle})
	}
	return st
}

// BenchmarkFrame is what one frame costs the loop (copy and encode), to
// be read against BenchmarkSaveEncode, what every save already costs it.
func BenchmarkFrame(b *testing.B) {
	for _, n := range []int{100, 1000} {
		st := record(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				_ = FrameOf(st, nil, time.Now()).Marshal()
			}
		})
	}
}

// BenchmarkSaveEncode is state.Save's encoding of the same record.
func BenchmarkSaveEncode(b *testing.B) {
	for _, n := range []int{100, 1000} {
		st := record(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				_, _ = json.Marshal(st)
			}
		})
	}
}

// BenchmarkTrack is the attempt bookkeeping run before every save.
func BenchmarkTrack(b *testing.B) {
	for _, n := range []int{100, 1000} {
		st := record(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				st.Track(time.Now(), "claude")
			}
		})
	}
}
