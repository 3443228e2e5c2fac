// Package modelsim is a scripted model server for the tests: it speaks
// enough of the Anthropic Messages API (for Claude Code) and the OpenAI
// Responses API (for Codex) on 127.0.0.1 that the real agent CLIs run
// against it, and it plays each plan's part as a script instead of a model.
//
// The server is stateless between requests: what to answer is worked out
// from the conversation the agent sends (which plan its dispatch line
// names, how many tool results came back), so an agent that retries or
// restarts gets the same answer for the same conversation.
package modelsim

import (
	"fmt"
	"regexp"
	"strings"
)

// Scenario names what the scripted model does with one plan.
type Scenario string

const (
	// Done: orch-notify started, write RESULT.md, orch-notify done, end
	// the turn with a short text.
	Done Scenario = "done"
	// Permission: orch-notify started, then run a command the worker is
	// not allowed to run without a person (PermissionCommand), which the
	// agent must ask about.
	Permission Scenario = "permission"
	// APIError: answer the plan's first request with an HTTP 400 error
	// whose message is APIErrorMessage.
	APIError Scenario = "apierror"
	// NoDone: orch-notify started, write RESULT.md, end the turn without
	// orch-notify done.
	NoDone Scenario = "nodone"
	// Claims: as Done, with a RESULT.md whose "## Claims" lists one claim
	// a verifier can check: ClaimOf(plan).
	Claims Scenario = "claims"
	// Verdicts: the plan is a verification round of a plan that did
	// Claims (its name is the parent's with ".vNrM"): orch-notify started,
	// run the claim's command, write RESULT.md with a "## Verdicts"
	// section confirming claim 1, orch-notify done.
	Verdicts Scenario = "verdicts"
)

// PermissionCommand is the command the Permission scenario asks to run.
const PermissionCommand = "curl -fsS http://127.0.0.1:9/orch-modelsim-permission-probe"

// APIErrorMessage is the error text the APIError scenario returns.
const APIErrorMessage = "modelsim: scripted invalid_request_error for this plan"

// roundRE is the suffix orch gives a verification round's plan.
var roundRE = regexp.MustCompile(`\.v[0-9]+r[0-9]+$`)

// ClaimCommand is the command of the claim the Claims scenario makes for
// plan: that its RESULT.md is there and not empty.
func ClaimCommand(plan string) string { return "test -s plans/" + plan + "/RESULT.md" }

// ClaimOf is the claim line the Claims scenario writes for plan.
func ClaimOf(plan string) string { return "`" + ClaimCommand(plan) + "` passes" }

// ActionKind is what the scripted model does next.
type ActionKind int

const (
	// RunCommand runs Command in a shell (Claude Code: the Bash tool;
	// Codex: its shell tool).
	RunCommand ActionKind = iota
	// WriteFile writes Content to Path, relative to the agent's working
	// directory.
	WriteFile
	// Say ends the turn with Text.
	Say
	// Fail answers with an HTTP error: Status and Text.
	Fail
)

// Action is one step of a plan's script.
type Action struct {
	Kind    ActionKind
	Command string // RunCommand
	Path    string // WriteFile
	Content string // WriteFile
	Text    string // Say, Fail
	Status  int    // Fail
}

// dispatchRE finds the plan and the orch-notify the dispatch line names:
// "... First run <notify> started <plan>. ...".
var dispatchRE = regexp.MustCompile(`(\S*orch-notify) started ([a-z0-9][a-z0-9._-]{0,62})\b`)

// ParseDispatch returns the plan and orch-notify command the last
// dispatch line in text names (an agent may join a prompt that failed with
// the next one into one message), and false when text holds no dispatch
// line (a title request, a side thread, a person's prompt).
func ParseDispatch(text string) (plan, notify string, ok bool) {
	all := dispatchRE.FindAllStringSubmatch(text, -1)
	if all == nil {
		return "", "", false
	}
	m := all[len(all)-1]
	return strings.TrimSuffix(m[2], "."), m[1], true
}

// Next is the step after the given number of tool results, for plan under
// scenario s, with notify the orch-notify command the dispatch line named.
func Next(s Scenario, plan, notify string, results int) Action {
	started := Action{Kind: RunCommand, Command: notify + " started " + plan}
	result := Action{Kind: WriteFile, Path: "plans/" + plan + "/RESULT.md",
		Content: "# Result of " + plan + "\n\nstatus: ok\n\nDone by the scripted model (modelsim).\n"}
	done := Action{Kind: RunCommand, Command: fmt.Sprintf("%s done %s %q", notify, plan, "ok: "+plan+" done")}
	var steps []Action
	switch s {
	case APIError:
		return Action{Kind: Fail, Status: 400, Text: APIErrorMessage}
	case Permission:
		steps = []Action{started, {Kind: RunCommand, Command: PermissionCommand}}
	case NoDone:
		steps = []Action{started, result}
	case Claims:
		result.Content += "\n## Claims\n1. " + ClaimOf(plan) + "\n"
		steps = []Action{started, result, done}
	case Verdicts:
		check := ClaimCommand(roundRE.ReplaceAllString(plan, ""))
		result.Content = "# Verdicts of " + plan + "\n\n## Verdicts\n1. CONFIRMED: ran `" + check + "`, exit status 0 (modelsim's scripted verifier)\n"
		steps = []Action{started, {Kind: RunCommand, Command: check}, result, done}
	default:
		steps = []Action{started, result, done}
	}
	if results < len(steps) {
		return steps[results]
	}
	return Action{Kind: Say, Text: "Finished " + plan + "."}
}
