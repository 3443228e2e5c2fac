package plans

// How independent a verdict is: the seeds want a result judged by
// "preferably a different model family". Each agent profile counts as a
// family of its own (claude, codex, gemini, one of orch.yaml's), so a
// verdict is independent when its verifier ran another profile than the
// author, and is labelled not-independent when it ran the same one,
// whether or not verify_with asked for another: a same-family verdict is
// never passed off as independent.
const (
	Independent    = "independent"
	NotIndependent = "not-independent"
	// UnknownAgent: the author's or the verifier's agent is not recorded
	// (a verification from before agents were).
	UnknownAgent = "unknown"
)

// independence labels a verdict by a verifier running agent.
func (v *Verification) independence(agent string) string {
	switch {
	case v.AuthorAgent == "" || agent == "":
		return UnknownAgent
	case agent == v.AuthorAgent:
		return NotIndependent
	}
	return Independent
}

// Independence sums up the matrix: not-independent when any verdict came
// from the author's own agent, unknown when any agent is not recorded,
// independent when every verdict came from another agent, "" before any
// verdict.
func (v *Verification) Independence() string {
	out := ""
	for _, r := range v.Matrix {
		switch r.Independence {
		case NotIndependent:
			return NotIndependent
		case Independent:
			if out == "" {
				out = Independent
			}
		default:
			out = UnknownAgent
		}
	}
	return out
}

// independenceNote is the matrix's line on its verifiers.
func (v *Verification) independenceNote() string {
	switch v.Independence() {
	case NotIndependent:
		return "**not-independent** (a verdict came from the author's own agent)"
	case Independent:
		return "independent (every verdict came from another agent)"
	case UnknownAgent:
		return "independence unknown (an agent is not recorded)"
	}
	return "none yet"
}

// agentCell is a matrix row's agent column.
func agentCell(r MatrixRow) string {
	switch {
	case r.Agent == "":
		return "-"
	case r.Independence == NotIndependent:
		return r.Agent + " (not independent: the author's agent)"
	}
	return r.Agent
}
