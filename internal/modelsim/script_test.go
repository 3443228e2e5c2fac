package modelsim

import (
	"strings"
	"testing"

	"github.com/orch-dev/orch/plans"
)

// The Claims scenario's RESULT.md has one claim orch reads, and the
// Verdicts scenario, run as its verification round, checks that claim's
// command and confirms it in the form orch's round reads strictly.
func TestClaimsAndVerdicts(t *testing.T) {
	const notify = "/bin/orch-notify"
	var author []Action
	for i := 0; ; i++ {
		a := Next(Claims, "a", notify, i)
		if a.Kind == Say {
			break
		}
		author = append(author, a)
	}
	if len(author) != 3 || author[0].Command != notify+" started a" || author[1].Kind != WriteFile || author[2].Command != notify+` done a "ok: a done"` {
		t.Fatalf("author's steps: %+v", author)
	}
	claims, err := plans.Claims([]byte(author[1].Content))
	if err != nil || len(claims) != 1 || claims[0] != "`test -s plans/a/RESULT.md` passes" {
		t.Fatalf("claims %q, %v", claims, err)
	}

	var round []Action
	for i := 0; ; i++ {
		a := Next(Verdicts, "a.v1r1", notify, i)
		if a.Kind == Say {
			break
		}
		round = append(round, a)
	}
	if len(round) != 4 || round[1].Command != "test -s plans/a/RESULT.md" || round[2].Path != "plans/a.v1r1/RESULT.md" ||
		!strings.HasPrefix(round[3].Command, notify+" done a.v1r1 ") {
		t.Fatalf("verifier's steps: %+v", round)
	}
	got, err := plans.Verdicts([]byte(round[2].Content), 1)
	if err != nil || got[0].Verdict != plans.Confirmed || !strings.Contains(got[0].Evidence, "test -s plans/a/RESULT.md") {
		t.Fatalf("verdicts %+v, %v", got, err)
	}
	// A round with too many claims for it is not passed off as confirmed.
	if _, err := plans.Verdicts([]byte(round[2].Content), 2); err == nil {
		t.Fatal("one verdict read as two")
	}
}
