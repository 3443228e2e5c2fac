package lead

import (
	"os"
	"path/filepath"
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

func TestLastLogLine(t *testing.T) {
	dir := t.TempDir()
	for name, tt := range map[string]struct{ log, want string }{
		"gemini": {`Ripgrep is not available.
Error when talking to Gemini API Full report available at: /tmp/x.json _ApiError: {"error":{"code":400,"message":"bad plan","status":"INVALID_ARGUMENT"}}
    at throwErrorIfNotOK (file:///x.js:1:2)
    at async Turn.run (file:///x.js:3:4) {
  status: 400
}
An unexpected critical error occurred:[object Object]
`, "INVALID_ARGUMENT: bad plan"},
		"codex": {"ERROR: unexpected status 400 Bad Request: {\"error\":{\"code\":null,\"message\":\"no\",\"type\":\"invalid_request_error\"}}\n", "invalid_request_error: no"},
		"plain": {"working\nsomething broke: disk full\n\n", "something broke: disk full"},
		"empty": {"", ""},
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(tt.log), 0o600)
		if got := lastLogLine(p); got != tt.want {
			t.Errorf("%s: %q; want %q", name, got, tt.want)
		}
	}
}
