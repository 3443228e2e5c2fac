package lead

import (
	"os"
	"testing"

	"github.com/orch-dev/orch/internal/orchdir"
)

// TestOrchDirLayout: what a running lead loop has made in .orch/ is named
// by package orchdir, and everything but the worktrees is private (a
// Claude Code worker may not edit it without asking).
func TestOrchDirLayout(t *testing.T) {
	root := startLoop(t)
	private := map[string]bool{}
	for _, n := range append(append([]string{}, orchdir.PrivateDirs...), orchdir.PrivateFiles...) {
		if n == orchdir.Worktrees || private[n] {
			t.Errorf("orchdir private lists hold %q wrongly or twice", n)
		}
		private[n] = true
	}
	entries, err := os.ReadDir(orchdir.Of(root))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 5 {
		t.Fatalf(".orch/ holds only %d entries", len(entries))
	}
	for _, e := range entries {
		if !private[e.Name()] && e.Name() != orchdir.Worktrees {
			t.Errorf(".orch/%s is not in orchdir.PrivateDirs or PrivateFiles", e.Name())
		}
	}
}
