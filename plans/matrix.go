package plans

import (
	"fmt"
	"strings"

	"github.com/orch-dev/orch/event"
)

// VerificationFile is the matrix committed in the plan folder.
const VerificationFile = "VERIFICATION.md"

// Verification is a plan's verification in progress or done.
type Verification struct {
	Rounds   int         `json:"rounds"`
	Round    int         `json:"round"`
	Run      int         `json:"run"` // how many times this plan has been put to verification
	Author   string      `json:"author"`
	Claims   []string    `json:"claims"`
	Matrix   []MatrixRow `json:"matrix"`
	Outcome  string      `json:"outcome,omitempty"` // verified, refuted, failed
	Ledgered bool        `json:"ledgered,omitempty"`
}

// MatrixRow is one cell of the verification matrix: a claim, in a round,
// judged by a verifier.
type MatrixRow struct {
	Claim    int    `json:"claim"`
	Text     string `json:"text"`
	Round    int    `json:"round"`
	Verifier string `json:"verifier"`
	Verdict  string `json:"verdict"`
	Evidence string `json:"evidence"`
}

// RoundName is the verification plan of a round: <plan>.v<run>r<round>.
func RoundName(parent string, run, round int) string {
	suffix := fmt.Sprintf(".v%dr%d", run, round)
	if len(parent)+len(suffix) > event.MaxPlanName {
		parent = strings.TrimRight(parent[:event.MaxPlanName-len(suffix)], ".-_")
	}
	return parent + suffix
}

// RenderMatrix is the verification matrix as markdown: claim × round ×
// verifier × verdict × evidence.
func RenderMatrix(plan string, v *Verification) string {
	var b strings.Builder
	outcome := v.Outcome
	if outcome == "" {
		outcome = "in progress"
	}
	fmt.Fprintf(&b, "# Verification: %s\n\nAuthor: %s. Rounds: %d. Outcome: **%s**.\n\n", plan, v.Author, v.Rounds, outcome)
	b.WriteString("| claim | round | verifier | verdict | evidence |\n|---|---|---|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }
	for _, r := range v.Matrix {
		fmt.Fprintf(&b, "| %d. %s | %d | %s | %s | %s |\n", r.Claim, cell(r.Text), r.Round, r.Verifier, r.Verdict, cell(r.Evidence))
	}
	return b.String()
}
