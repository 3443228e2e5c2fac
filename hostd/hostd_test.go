package hostd

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/hosts"
	"github.com/orch-dev/orch/internal/orchdir"
)

func testDaemon(t *testing.T) *daemon {
	root := t.TempDir()
	os.MkdirAll(orchdir.Of(root), 0o700)
	return &daemon{tok: hosts.Token{Host: "alpha", Workers: []string{"w3", "w4"}, Prefix: "orch"},
		repo: &git.Repo{Root: root}, log: slog.New(slog.DiscardHandler),
		running: map[string]int{}, lastLog: map[string]string{}, runs: map[string]run{}}
}

// A request about a worker that is not the host's, a bad plan name or a
// base that is not a commit id is refused before anything is done; a
// request with a field the host does not know is refused too.
func TestRequestChecks(t *testing.T) {
	d := testDaemon(t)
	base := strings.Repeat("a", 40)
	for _, c := range []struct{ worker, plan, base string }{
		{"w1", "p", base}, {"w3", "../x", base}, {"w3", "p", "HEAD"}, {"w3", "p", "--upload-pack=x"},
	} {
		if err := d.check(c.worker, c.plan, c.base); !errors.Is(err, ErrRequest) {
			t.Errorf("check(%q, %q, %q) = %v, want a refusal", c.worker, c.plan, c.base, err)
		}
	}
	if err := d.check("w3", "p", base); err != nil {
		t.Errorf("a good request refused: %v", err)
	}
	var r hosts.Run
	if err := decode([]byte(`{"worker":"w3","plan":"p","evil":1}`), &r); !errors.Is(err, ErrRequest) {
		t.Errorf("unknown field: %v", err)
	}
	d.running["w3"] = 42
	if _, err := d.run(t.Context(), hosts.Run{Worker: "w3", Plan: "p", Attempt: 1, Base: base, PlanMD: []byte("x")}); !errors.Is(err, ErrBusy) {
		t.Errorf("a run on a busy worker: %v", err)
	}
}

// orch read's log request: the last lines of the worker's last run; none
// for a worker that ran nothing, or is not the host's.
func TestLogTail(t *testing.T) {
	d := testDaemon(t)
	if _, err := d.logTail(hosts.Log{Worker: "w3"}); err == nil {
		t.Error("a log of a worker that ran nothing")
	}
	if _, err := d.logTail(hosts.Log{Worker: "w9"}); !errors.Is(err, ErrRequest) {
		t.Errorf("another host's worker: %v", err)
	}
	logs := filepath.Join(orchdir.Of(d.repo.Root), orchdir.Logs)
	os.MkdirAll(logs, 0o700)
	os.WriteFile(filepath.Join(logs, "p-1.log"), []byte("one\ntwo\nthree\n"), 0o600)
	d.lastLog["w3"] = "p-1.log"
	r, err := d.logTail(hosts.Log{Worker: "w3", Lines: 2})
	if err != nil || r.Text != "two\nthree\n" || r.Name != "p-1.log" {
		t.Errorf("tail: %+v %v", r, err)
	}
}

// The runs record keeps only this host's workers' runs with a plan and a
// pid; an unreadable record watches nothing.
func TestRunsRecord(t *testing.T) {
	d := testDaemon(t)
	d.runs = map[string]run{"w3": {Plan: "p", Attempt: 1, PID: 7}}
	d.saveRuns()
	if fi, err := os.Stat(filepath.Join(orchdir.Of(d.repo.Root), orchdir.HostRuns)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("runs record: %v %v", fi, err)
	}
	if got := d.loadRuns(); len(got) != 1 || got["w3"].PID != 7 {
		t.Errorf("loaded %v", got)
	}
	os.WriteFile(filepath.Join(orchdir.Of(d.repo.Root), orchdir.HostRuns), []byte(`{"w1":{"plan":"p","pid":3},"w4":{"plan":"../x","pid":3},"w3":{"plan":"q","pid":0}}`), 0o600)
	if got := d.loadRuns(); len(got) != 0 {
		t.Errorf("kept %v from a record of others' and broken runs", got)
	}
}
