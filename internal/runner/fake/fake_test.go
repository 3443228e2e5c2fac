package fake

import (
	"context"
	"strings"
	"testing"

	"github.com/orch-dev/orch/internal/runner"
)

// recorder is a testing.TB that keeps what the fake reports.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, format)
}

func (r *recorder) Cleanup(func()) {}

// The fake fails a call made with the right arguments in the wrong
// directory, or with the wrong standard input, and passes the right one.
func TestFakeChecksDirAndStdin(t *testing.T) {
	tests := []struct {
		name  string
		cmd   runner.Cmd
		fails bool
	}{
		{"as expected", runner.Cmd{Name: "git", Args: []string{"status"}, Dir: "/w/wt", Stdin: []byte("in")}, false},
		{"wrong directory", runner.Cmd{Name: "git", Args: []string{"status"}, Dir: "/w", Stdin: []byte("in")}, true},
		{"wrong stdin", runner.Cmd{Name: "git", Args: []string{"status"}, Dir: "/w/wt", Stdin: []byte("other")}, true},
		{"no stdin", runner.Cmd{Name: "git", Args: []string{"status"}, Dir: "/w/wt"}, true},
		{"wrong args", runner.Cmd{Name: "git", Args: []string{"log"}, Dir: "/w/wt", Stdin: []byte("in")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			f := New(rec).In("/w/wt").ExpectStdin("git", []string{"status"}, "in", "ok", nil)
			out, err := f.Run(context.Background(), tt.cmd)
			if got := len(rec.errs) > 0 || err != nil; got != tt.fails {
				t.Fatalf("failed = %v (%s, err %v), want %v", got, strings.Join(rec.errs, "; "), err, tt.fails)
			}
			if !tt.fails && string(out) != "ok" {
				t.Errorf("out = %q", out)
			}
			f.CheckForMissingCalls()
			if !tt.fails && len(rec.errs) != 0 {
				t.Errorf("a used expectation reported missing: %v", rec.errs)
			}
		})
	}
}
