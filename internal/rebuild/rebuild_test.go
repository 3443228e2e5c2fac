package rebuild

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
)

// Three plans as git holds them: x harvested and ledgered, then merged by
// orch integrate; y harvested and ledgered; z harvested with no ledger
// entry (its gates failed, or the lead stopped first).
func TestRebuildFromGit(t *testing.T) {
	root := t.TempDir()
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("HOME", t.TempDir())
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(rel, body string) {
		os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755)
		if err := os.WriteFile(filepath.Join(root, rel), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("init", "-q", "-b", "main")
	write("README", "r\n")
	run("add", "README")
	run("commit", "-qm", "base")
	harvest := func(plan, id string) string {
		write("plans/"+plan+"/RESULT.md", "# "+plan+" "+id+"\n")
		run("add", "plans/"+plan+"/RESULT.md")
		run("commit", "-qm", "harvest "+plan+": ok\n\nOrch-Event: "+id)
		return run("rev-parse", "HEAD")
	}
	xSha := harvest("x", "ev-x")
	ySha := harvest("y", "ev-y")
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	if _, err := ledger.AppendAll(root, []ledger.Entry{
		{Plan: "x", Worker: "w1", Status: "ok", Commit: xSha, Event: "ev-x", Time: now},
		{Plan: "y", Worker: "w2", Status: "ok", Commit: ySha, Event: "ev-y", Time: now},
	}); err != nil {
		t.Fatal(err)
	}
	run("add", ledger.File)
	run("commit", "-qm", "ledger: 2 entries")
	zSha := harvest("z", "ev-z")
	run("commit", "-q", "--allow-empty", "-m", "integrate x\n\nOrch-Integrated: x")
	merged := run("rev-parse", "HEAD")
	// y was integrated, then done again: it waits to be integrated again.
	run("commit", "-q", "--allow-empty", "-m", "integrate y\n\nOrch-Integrated: y")
	y2Sha := harvest("y", "ev-y2")
	if _, err := ledger.AppendAll(root, []ledger.Entry{{Plan: "y", Worker: "w2", Status: "ok again", Commit: y2Sha, Event: "ev-y2", Time: now}}); err != nil {
		t.Fatal(err)
	}
	run("add", ledger.File)
	run("commit", "-qm", "ledger: 1 entry")
	// A worker's own commit, merged in from its branch, claims y was
	// integrated; a commit message with a separator byte in a trailer.
	run("switch", "-q", "-c", "orch/y")
	run("commit", "-q", "--allow-empty", "-m", "wip\n\nOrch-Integrated: y")
	run("switch", "-q", "main")
	run("merge", "-q", "--no-ff", "-m", "merge orch/y", "orch/y")
	run("commit", "-q", "--allow-empty", "-m", "odd\n\nOrch-Integrated: a\x1eb")

	repo, err := git.Open(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	st, rep, err := Rebuild(context.Background(), root, repo, now)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rep.String(), "1 done (y); 1 integrated (x); 1 harvested without a ledger entry, now failed (z)"; got != want {
		t.Errorf("report %q, want %q", got, want)
	}
	x, y, z := st.Plans["x"], st.Plans["y"], st.Plans["z"]
	if x == nil || x.State != state.PlanIntegrated || x.Merged != merged || x.Ledger != 1 || x.Result != xSha || x.Worker != "w1" {
		t.Errorf("x = %+v, want integrated at %s, ledger 1", x, merged)
	}
	if y == nil || y.State != state.PlanDone || y.Ledger != 3 || y.DoneEvent != "ev-y2" || y.Worker != "w2" {
		t.Errorf("y = %+v, want done (not integrated: its last harvest came after), ledger 3", y)
	}
	if z == nil || z.State != state.PlanFailed || z.Result != zSha || !strings.Contains(z.Reason, "no ledger entry followed") {
		t.Errorf("z = %+v, want failed with the reason", z)
	}
	for _, id := range []string{"ev-x", "ev-y", "ev-y2", "ev-z"} {
		if st.Handled[id] == nil {
			t.Errorf("event %s is not recorded as handled: a redelivery would have a second effect", id)
		}
	}
}

// A repo with no orch history (or no commit at all) rebuilds nothing.
func TestRebuildNothing(t *testing.T) {
	root := t.TempDir()
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("HOME", t.TempDir())
	if out, err := exec.Command("git", "init", "-q", "-b", "main", root).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	repo, err := git.Open(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	st, rep, err := Rebuild(context.Background(), root, repo, time.Now())
	if err != nil || !rep.Empty() || len(st.Plans) != 0 {
		t.Errorf("Rebuild = %+v, %v, %v; want nothing", st.Plans, rep, err)
	}
}
