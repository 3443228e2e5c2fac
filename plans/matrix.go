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
	Rounds int    `json:"rounds"`
	Round  int    `json:"round"`
	Run    int    `json:"run"` // how many times this plan has been put to verification
	Author string `json:"author"`
	// AuthorAgent is the agent profile the author ran, VerifyWith what
	// the plan asked of its verifiers' agent (verify_with:).
	AuthorAgent string      `json:"author_agent,omitempty"`
	VerifyWith  string      `json:"verify_with,omitempty"`
	Claims      []string    `json:"claims"`
	Matrix      []MatrixRow `json:"matrix"`
	Outcome     string      `json:"outcome,omitempty"` // verified, refuted, failed
	Ledgered    bool        `json:"ledgered,omitempty"`
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
	// Agent is the verifier's agent profile; Independence says whether
	// it differs from the author's (independence.go).
	Agent        string `json:"agent,omitempty"`
	Independence string `json:"independence,omitempty"`
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
	fmt.Fprintf(&b, "# Verification: %s\n\nAuthor: %s. Rounds: %d. Outcome: **%s**.\n", plan, v.Author, v.Rounds, outcome)
	if v.AuthorAgent != "" {
		fmt.Fprintf(&b, "Author's agent: %s. Verifiers: %s.\n", v.AuthorAgent, v.independenceNote())
	}
	b.WriteString("\n| claim | round | verifier | verdict | evidence | agent |\n|---|---|---|---|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }
	for _, r := range v.Matrix {
		fmt.Fprintf(&b, "| %d. %s | %d | %s | %s | %s | %s |\n", r.Claim, cell(r.Text), r.Round, r.Verifier, r.Verdict, cell(r.Evidence), agentCell(r))
	}
	return b.String()
}

// Brief is the neutral task of plan's verification in its current round,
// the body of the round's plan name: it asks whether each claim holds and
// never says what the answer should be.
func Brief(plan string, v *Verification, name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Verify the claims of %s (round %d of %d)\n\n", plan, v.Round, v.Rounds)
	fmt.Fprintf(&b, "Another worker carried out %s and wrote %s.\n", RelPlanPath(plan), RelResultPath(plan))
	b.WriteString("Verify whether each claim below holds. Try to refute it. Run the commands yourself; do not take\n")
	b.WriteString("the result file's word for anything. Change no file except your own RESULT.md.\n\n## Claims\n")
	for i, c := range v.Claims {
		fmt.Fprintf(&b, "%d. %s\n", i+1, c)
	}
	if v.Round > 1 {
		b.WriteString("\n## Earlier verdicts\nA previous round concluded the following. A verdict is not evidence: check each claim again\n")
		b.WriteString("and try to refute it.\n")
		for _, r := range v.Matrix {
			fmt.Fprintf(&b, "- claim %d, round %d: %s (%s)\n", r.Claim, r.Round, r.Verdict, r.Evidence)
		}
	}
	fmt.Fprintf(&b, "\n## What to write\nWrite %s with a section \"## Verdicts\": one line per claim, in the form\n", RelResultPath(name))
	b.WriteString("`N. VERDICT: evidence`, where VERDICT is CONFIRMED, REFUTED or UNVERIFIABLE and the evidence\n")
	b.WriteString("says what you ran and what it showed.\n")
	return b.String()
}

// Record adds a round's verdicts (by verifier, running agent) to the
// matrix and returns the first that does not confirm its claim, or nil
// when all do.
func (v *Verification) Record(round int, verifier, agent string, got []Verdict) *Verdict {
	for _, g := range got {
		v.Matrix = append(v.Matrix, MatrixRow{Claim: g.Claim, Text: v.Claims[g.Claim-1], Round: round, Verifier: verifier, Verdict: g.Verdict, Evidence: g.Evidence,
			Agent: agent, Independence: v.independence(agent)})
	}
	for i := range got {
		if got[i].Verdict != Confirmed {
			return &got[i]
		}
	}
	return nil
}

// MatrixOutcome reads the author and the outcome from a VERIFICATION.md
// that RenderMatrix wrote ("Author: w2. Rounds: 3. Outcome: **refuted**.");
// ok is false when data has no such line.
func MatrixOutcome(data []byte) (author, outcome string, ok bool) {
	for _, line := range strings.Split(string(data), "\n") {
		rest, found := strings.CutPrefix(line, "Author: ")
		if !found {
			continue
		}
		a, rest, found := strings.Cut(rest, ". Rounds: ")
		if !found {
			return "", "", false
		}
		_, rest, found = strings.Cut(rest, "Outcome: **")
		if !found {
			return "", "", false
		}
		o, _, found := strings.Cut(rest, "**")
		return a, o, found && a != "" && o != ""
	}
	return "", "", false
}
