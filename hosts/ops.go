package hosts

import "time"

// The lead asks a host to do its fleet's work there, by request and reply
// over the host's leaf link (the lead's server sends the request to that
// host alone; the host's key may answer only under its own reply prefix).

// OpsSubject is where host hears the lead's requests of kind op.
func OpsSubject(prefix, host, op string) string { return prefix + ".hostd." + host + "." + op }

// ReplyPrefix is the inbox prefix of the lead's requests to host: the
// only subjects the host may publish on besides its sourced stream.
func ReplyPrefix(prefix, host string) string { return prefix + ".hostr." + host }

// The kinds of request.
const (
	OpRun    = "run"    // start a plan's attempt on a worker
	OpBundle = "bundle" // commit a worker's work on its plan branch, and bundle it
	OpTaken  = "taken"  // the lead has a bundle: it goes from the work store
	OpLog    = "log"    // a worker's screen, or its last run's output (orch read)
)

// Log asks a host for the last lines of worker's last run's output.
type Log struct {
	Worker string `json:"worker"`
	Lines  int    `json:"lines"`
}

// MaxLogReply bounds the output a host sends back for orch read.
const MaxLogReply = 48 << 10

// RunTimeout is how long a host may take over a run (fetching the base,
// readying the worktree, starting the process) before it gives up; the
// lead waits a little longer.
const RunTimeout = 45 * time.Second

// WorkBucket is the object store, in each host's JetStream domain, that
// holds the bundles of its plan branches for the lead to take.
const WorkBucket = "ORCH_WORK"

// Run asks a host to start attempt of plan on worker, its branch made at
// base (a commit the host fetches from its clone's remote) the first time.
type Run struct {
	Worker  string `json:"worker"`
	Plan    string `json:"plan"`
	Attempt int    `json:"attempt"`
	Base    string `json:"base"`
	// PlanMD is the plan's PLAN.md as the lead has it.
	PlanMD []byte `json:"plan_md"`
}

// MaxPlanMD bounds a PLAN.md sent in a Run (the request must fit in one
// message of the servers').
const MaxPlanMD = 40 << 10

// Bundle asks a host for worker's work on plan: what it left, committed
// on orch/<plan>, as a bundle of what base does not hold.
type Bundle struct {
	Worker string `json:"worker"`
	Plan   string `json:"plan"`
	Base   string `json:"base"`
}

// TakenBundle tells a host the lead has taken a bundle of its work store.
type TakenBundle struct {
	Object string `json:"object"`
}

// Reply is a host's answer: an error (the request had no effect, or the
// effect named), or what it did.
type Reply struct {
	Error string `json:"error,omitempty"`
	// PID is the started process's (Run), on the host; Pane, for a host
	// whose workers run in tmux panes (orch host join --tmux), the pane
	// the dispatch line went to (Run), or whose screen Text is (Log).
	PID  int    `json:"pid,omitempty"`
	Pane string `json:"pane,omitempty"`
	// Dead, with Error, refuses a Run because the worker's pane on the
	// host has died: nothing was started, and the worker is out of use
	// (the lead queues the plan again, no attempt spent).
	Dead bool `json:"dead,omitempty"`
	// Head is the plan branch's head; Object the bundle's name in
	// WorkBucket, "" when the head is the base (nothing to take).
	Head   string `json:"head,omitempty"`
	Object string `json:"object,omitempty"`
	// Text is a worker's output (Log), what Name names.
	Text string `json:"text,omitempty"`
	Name string `json:"name,omitempty"`
}

// RecordSubject is where a host puts its record of kind about worker (its
// process's exit): under the worker's subjects, where the host's server
// lets no worker send it.
func RecordSubject(prefix, worker, kind string) string {
	return prefix + ".ev." + worker + "." + kind
}
