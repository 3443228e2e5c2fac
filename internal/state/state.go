// Package state is orch serve's record of its fleet and its plans' runs,
// kept in .orch/state.json: what each worker is doing, where each plan's
// current attempt stands, which events have had their effect. Only orch
// serve writes it; the CLI reads it.
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/atomicfile"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/plans"
)

// WorkerState is where a worker stands, as the contract names it.
type WorkerState string

// Worker states.
const (
	WorkerIdle WorkerState = "idle"
	WorkerBusy WorkerState = "busy"
	WorkerDead WorkerState = "dead"
)

// PlanState is where a plan stands, as the contract names it.
type PlanState string

// Plan states.
const (
	PlanDraft      PlanState = "draft"
	PlanQueued     PlanState = "queued"
	PlanDispatched PlanState = "dispatched"
	PlanRunning    PlanState = "running"
	PlanNeedsInput PlanState = "needs-input"
	PlanBlocked    PlanState = "blocked"
	PlanDone       PlanState = "done"
	PlanVerifying  PlanState = "verifying"
	PlanVerified   PlanState = "verified"
	PlanRefuted    PlanState = "refuted"
	PlanFailed     PlanState = "failed"
	PlanTimedOut   PlanState = "timed-out"
	PlanConflict   PlanState = "conflict"
	PlanIntegrated PlanState = "integrated"
)

// maxRejected bounds the list of refused events kept for orch status.
const maxRejected = 100

// Worker is one worker as the lead loop knows it.
type Worker struct {
	ID    string      `json:"id"`
	State WorkerState `json:"state"`
	Plan  string      `json:"plan,omitempty"`
	Pane  string      `json:"pane,omitempty"`
	Host  string      `json:"host,omitempty"`
	// Remote is the registered host (orch hosts) that runs the worker,
	// "" for the lead's own machine.
	Remote string `json:"remote,omitempty"`
	// Headless workers have no pane: each plan runs the agent's headless
	// command as a child process, PID while it runs.
	Headless bool      `json:"headless,omitempty"`
	PID      int       `json:"pid,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Since    time.Time `json:"since"`
	// Starting is set from the moment the worker's agent starts in its pane
	// until it is at its prompt (its SessionStart hook, or its prompt seen
	// on screen): the worker is busy and nothing is typed into it. Asked
	// is the dialog it showed meanwhile, as last reported to the lead.
	Starting bool   `json:"starting,omitempty"`
	Asked    string `json:"asked,omitempty"`
	// Hooked is set once the agent's own hook said it is up, while a
	// dialog on its screen still held it back.
	Hooked bool `json:"hooked,omitempty"`
	// Profile is the agent profile the worker runs; Last is the last
	// event it sent ("done plan-a") and LastAt when.
	Profile string    `json:"profile,omitempty"`
	Last    string    `json:"last,omitempty"`
	LastAt  time.Time `json:"last_at,omitzero"`
	// Interrupting is the plan that timed out on this worker while its
	// agent is being interrupted: the worker is busy until its agent is
	// back at its prompt (or its process ended).
	Interrupting string `json:"interrupting,omitempty"`
	// Agent is what the worker's agent was started from (a profile name,
	// or the --agent command): a restart re-adopts its pane as that agent.
	Agent string `json:"agent,omitempty"`
	// Restarts are when the worker was given a new pane (or, headless,
	// made usable again) after a death, within the restart window (package
	// lead's restart budget); RestartAt is when the next one is due while
	// the worker is dead and one is granted (zero: none is).
	Restarts  []time.Time `json:"restarts,omitempty"`
	RestartAt time.Time   `json:"restart_at,omitzero"`
	// DeadPane is the pane whose death was handled last: a second report
	// of it has no effect, while a worker taken out of use for another
	// reason (a line that could not be typed) still has its pane's death
	// handled, and its restart decided.
	DeadPane string `json:"dead_pane,omitempty"`
	// Refresh is set from the moment its agent is found out of context
	// until its fresh session is there (a new pane, or process).
	Refresh bool `json:"refresh,omitempty"`
	// InTurn says the worker's agent is in a turn orch knows it began (a
	// line typed, a started) and has not heard the end of (its turn-end
	// or ready hook): orch send's lines wait meanwhile.
	InTurn bool `json:"in_turn,omitempty"`
}

// Run is one plan's run: where its current attempt stands, and what its
// earlier attempts left. (Its definition, PLAN.md, is plans.Plan.)
type Run struct {
	Name     string    `json:"name"`
	State    PlanState `json:"state"`
	Worker   string    `json:"worker,omitempty"`
	Verifier string    `json:"verifier,omitempty"`
	Target   string    `json:"target,omitempty"` // orch dispatch --to
	Status   string    `json:"status,omitempty"` // the worker's last status line
	Reason   string    `json:"reason,omitempty"` // why blocked or failed
	Result   string    `json:"result,omitempty"` // harvest commit
	Ledger   int       `json:"ledger,omitempty"` // ledger entry id
	// LedgeredAttempt is the attempt whose harvest made entry Ledger.
	LedgeredAttempt int       `json:"ledgered_attempt,omitempty"`
	Queued          time.Time `json:"queued,omitzero"`
	// AttemptSince is when the current attempt began: the time of the
	// orch dispatch that queued it, or of its automatic re-queue. Worker
	// events sent before it belong to an earlier attempt.
	AttemptSince time.Time `json:"attempt_since,omitzero"`
	Updated      time.Time `json:"updated"`
	Attempts     int       `json:"attempts,omitempty"`
	// DoneEvent and DoneTime are the worker's done event that was harvested.
	DoneEvent string    `json:"done_event,omitempty"`
	DoneTime  time.Time `json:"done_time,omitzero"`
	// Gates is set while the acceptance gates of the harvest run.
	Gates bool `json:"gates,omitempty"`
	// Baseline is the bet's metric measured by the lead loop at dispatch,
	// or why it could not be.
	Baseline    *float64 `json:"baseline,omitempty"`
	BaselineErr string   `json:"baseline_error,omitempty"`
	// For a verification plan: the plan it verifies, the round, the workers
	// it must not go to (the author) and would rather not (earlier rounds').
	VerifyOf string   `json:"verify_of,omitempty"`
	Round    int      `json:"round,omitempty"`
	Exclude  []string `json:"exclude,omitempty"`
	Avoid    []string `json:"avoid,omitempty"`
	// OtherThan is, for a verification round asked to run on another
	// agent (verify_with: other-agent), the author's agent: the round
	// never goes to a worker of it (route.go).
	OtherThan string `json:"other_than,omitempty"`
	// GaveUp are the agents of the plan's agent: list it moved away from
	// after an outage, Outages the outages on its current agent (lead's
	// outage.go). A new orch dispatch starts over.
	GaveUp  []string `json:"gave_up,omitempty"`
	Outages int      `json:"outages,omitempty"`
	// Verification is set on a plan whose claims are being (or were) verified.
	Verification *plans.Verification `json:"verification,omitempty"`
	// Def is what PLAN.md asked for when the plan was dispatched: the lead
	// loop holds the worker to it, whatever the worker does to PLAN.md.
	Def *Def `json:"def,omitempty"`
	// AtHarvest is the bet's metric measured right after the harvest.
	AtHarvest    *float64 `json:"at_harvest,omitempty"`
	AtHarvestErr string   `json:"at_harvest_error,omitempty"`
	// Resent is set once the dispatch line of this attempt was re-sent.
	Resent bool `json:"resent,omitempty"`
	// Typed is set while the dispatch line is typed into the pane but not
	// yet submitted: Enter goes once the line shows on the screen.
	Typed bool `json:"typed,omitempty"`
	// Echo is how often the line showed on the screen before it was typed.
	Echo int `json:"echo,omitempty"`
	// Enters counts the Enters pressed for this attempt's line.
	Enters int `json:"enters,omitempty"`
	// Waiting is set while the line waits for its worker's agent to reach
	// its prompt (the worker's pane is new).
	Waiting bool `json:"waiting,omitempty"`
	// IdleEvent is the turn end (its event id) decided once the agent's
	// screen has settled: for agents that show an error only on screen.
	IdleEvent string `json:"idle_event,omitempty"`
	// Merged is the base branch's head once orch integrate brought the
	// plan in.
	Merged string `json:"merged,omitempty"`
	// Preparing names the setup run going on now (in Worker's worktree):
	// the plan stays queued, its worker busy, until that run's record
	// comes. SetupRuns counts the runs, so a record of an older one (from
	// before a restart) is told apart.
	Preparing int `json:"preparing,omitempty"`
	SetupRuns int `json:"setup_runs,omitempty"`
	// Base is the commit the plan's branch was made from (worktree
	// isolation), recorded at its first dispatch: the base branch's head,
	// its one dependency's branch head, or a merge of its dependencies'
	// branches (Stack).
	Base string `json:"base,omitempty"`
	// Stack is what Base was made from when the plan has dependencies:
	// each dependency, its attempt and its branch's head then.
	Stack []StackDep `json:"stack,omitempty"`
	// Unmerged names the files where its dependencies' branches conflict:
	// set while the plan is in conflict before it was ever dispatched.
	Unmerged []string `json:"unmerged,omitempty"`
	// Deadline is when the current attempt's time is up (the plan's
	// timeout, or orch.yaml's plan_timeout, from its dispatch), zero when
	// it has none; Limit is that timeout ("3s"). Recorded so that a
	// restarted lead loop re-arms it.
	Deadline time.Time `json:"deadline,omitzero"`
	Limit    string    `json:"limit,omitempty"`
	// Measuring is set while the bet's metric command runs off the loop:
	// for its baseline (queued, Preparing naming the run) before the line
	// is typed, or after the harvest (verifying) before the gates and the
	// ledger entry.
	Measuring bool `json:"measuring,omitempty"`
	// Unacked is set when the plan failed because no "started" came: a
	// late started or done from the same worker still counts.
	Unacked bool `json:"unacked,omitempty"`
	// History is the plan's attempts, newest last (Track), at most
	// MaxHistory; Asking is set while Track saw it needing input.
	History []ledger.Attempt `json:"history,omitempty"`
	Asking  bool             `json:"asking,omitempty"`
	// Requeued counts the times the plan went back to the queue by itself
	// because its worker died (once at most), Refreshed the times it was
	// given again to a fresh session of its worker because the agent ran
	// out of context (once at most); both start again at orch dispatch.
	// Retry says why the current attempt is a retry, for orch status.
	Requeued  int    `json:"requeued,omitempty"`
	Refreshed int    `json:"refreshed,omitempty"`
	Retry     string `json:"retry,omitempty"`
}

// StackDep is one dependency a plan's branch was made from: its attempt
// and the commit taken from it (its branch's head, or the base branch's
// head once it was integrated).
type StackDep struct {
	Plan    string `json:"plan"`
	Attempt int    `json:"attempt"`
	Commit  string `json:"commit"`
}

// StaleStack names the dependencies of p that went on to a new attempt
// since p's branch was made from them ("d1 (attempt 2, p started from
// attempt 1)"): p's branch does not have their new work.
func (s *State) StaleStack(p *Run) []string {
	var out []string
	for _, d := range p.Stack {
		if dep := s.Plans[d.Plan]; dep != nil && dep.Attempts > d.Attempt {
			out = append(out, fmt.Sprintf("%s (attempt %d; %s started from attempt %d)", d.Plan, dep.Attempts, p.Name, d.Attempt))
		}
	}
	return out
}

// Current is the record of the run's current attempt (its number on its
// worker), nil when it has none: where its gate outcome and its agent's
// usage are kept.
func (p *Run) Current() *ledger.Attempt {
	for i := len(p.History) - 1; i >= 0; i-- {
		if h := &p.History[i]; h.N == p.Attempts && (p.Worker == "" || h.Worker == p.Worker) {
			return h
		}
	}
	return nil
}

// Def is the part of PLAN.md's front matter the lead loop enforces.
type Def struct {
	Acceptance []string   `json:"acceptance,omitempty"`
	Verify     int        `json:"verify,omitempty"`
	Bet        *plans.Bet `json:"bet,omitempty"`
	// DependsOn and DependsOnState are kept for the ledger, orch stats and
	// the boards (the critical path, what a plan waits for).
	DependsOn      []string `json:"depends_on,omitempty"`
	DependsOnState string   `json:"depends_on_state,omitempty"`
	// VerifyWith is whose workers verify the plan (plans.Plan.VerifyWith).
	VerifyWith string `json:"verify_with,omitempty"`
}

// DefOf is what the lead loop holds a dispatched plan to, from its PLAN.md.
func DefOf(d *plans.Plan) *Def {
	return &Def{Acceptance: d.Acceptance, Verify: d.Verify, Bet: d.Bet, DependsOn: d.DependsOn, DependsOnState: d.DependsOnState, VerifyWith: d.VerifyWith}
}

// Handled records that an event had its effect, and the callback it
// produced, so a redelivery re-sends the same callback and nothing else.
type Handled struct {
	Kind     string          `json:"kind"`
	Plan     string          `json:"plan"`
	Time     time.Time       `json:"time"`
	Callback *event.Callback `json:"callback,omitempty"`
	// Published is set once the callback is stored. It is saved with the
	// next state save; until then a redelivery publishes the callback again
	// under the same message id, which the broker drops as a copy.
	Published bool   `json:"published,omitempty"`
	Note      string `json:"note,omitempty"`
	// Refused says the event was refused (the note says why).
	Refused bool `json:"refused,omitempty"`
}

// Rejection is an event the lead loop refused, kept for orch status.
type Rejection struct {
	Event  string    `json:"event"`
	Kind   string    `json:"kind"`
	Plan   string    `json:"plan"`
	Worker string    `json:"worker,omitempty"`
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
}

// State is everything the lead loop has recorded. Only orch serve writes it;
// the CLI reads it.
type State struct {
	Session string `json:"session,omitempty"`
	// Isolation is how the fleet's panes were started: worktree or shared.
	Isolation string              `json:"isolation,omitempty"`
	Workers   []*Worker           `json:"workers"`
	Plans     map[string]*Run     `json:"plans"`
	Handled   map[string]*Handled `json:"handled"`
	Rejected  []Rejection         `json:"rejected,omitempty"`
	Errors    map[string]string   `json:"errors,omitempty"` // event id -> why its effect could not be committed yet
	// Outbox holds callbacks not caused by a message (a dispatch that was
	// never acknowledged) until they are stored in the stream.
	Outbox []*event.Callback `json:"outbox,omitempty"`
	// Rebuilt says the record was made again from git (its file was lost,
	// or orch serve --rebuild asked for it), when, and what was found.
	Rebuilt *Rebuilt `json:"rebuilt,omitempty"`
	// TmuxDown is set once the tmux server stopped answering: the panes'
	// workers run their plans as headless processes from then on, until
	// orch serve brings a tmux fleet up again.
	TmuxDown *TmuxDown `json:"tmux_down,omitempty"`
	// Nudges are orch send's lines not typed yet (nudge.go).
	Nudges []*Nudge `json:"nudges,omitempty"`
}

// TmuxDown is when the tmux server stopped answering, and what showed it.
type TmuxDown struct {
	Since  time.Time `json:"since"`
	Reason string    `json:"reason"`
}

// Rebuilt is what a rebuild of the record found.
type Rebuilt struct {
	Time    time.Time `json:"time"`
	Why     string    `json:"why"`
	Summary string    `json:"summary"`
	// Kept is where an unreadable record was moved before the rebuild.
	Kept string `json:"kept,omitempty"`
}

// New returns an empty state.
func New() *State {
	return &State{Plans: map[string]*Run{}, Handled: map[string]*Handled{}, Errors: map[string]string{}}
}

// Load reads the state from an .orch directory; a missing file is an
// empty state.
func Load(orchDir string) (*State, error) {
	st := New()
	data, err := os.ReadFile(filepath.Join(orchDir, orchdir.State))
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load state: %w", err)
	}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("load state: %s: %w", orchdir.State, err)
	}
	if st.Plans == nil {
		st.Plans = map[string]*Run{}
	}
	if st.Handled == nil {
		st.Handled = map[string]*Handled{}
	}
	if st.Errors == nil {
		st.Errors = map[string]string{}
	}
	return st, nil
}

// handledKeep is how long a handled event id is remembered: far beyond the
// broker's duplicate window, and beyond any replay of a spool file a user
// might plausibly make.
const handledKeep = 30 * 24 * time.Hour

// Prune forgets handled ids older than handledKeep.
func (st *State) Prune(now time.Time) {
	for id, h := range st.Handled {
		if now.Sub(h.Time) > handledKeep {
			delete(st.Handled, id)
		}
	}
}

// Save writes the state atomically (temporary file, fsync, rename). It is
// compact JSON: the record grows with every handled event and is written
// several times per event, and indenting it was a tenth of the lead loop's
// CPU in a burst (BENCHMARKS.md); orch status --json is the readable view.
func (st *State) Save(orchDir string) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(orchDir, orchdir.State), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// Snapshot is the state as it was before an effect, to restore if the
// effect fails half-way. It is kept as JSON and decoded only then: effects
// rarely fail, and decoding it every time cost nearly as much as saving.
type Snapshot struct {
	data []byte
	err  error
}

// Snapshot keeps the state as it is now.
func (st *State) Snapshot() Snapshot {
	data, err := json.Marshal(st)
	return Snapshot{data, err}
}

// Restore returns the state as it was when the snapshot was taken, or cur
// when it could not be taken (as a copy made then would not have been).
func (s Snapshot) Restore(cur *State) *State {
	c := New()
	if s.err == nil && json.Unmarshal(s.data, c) == nil {
		return c
	}
	return cur
}

// Worker returns the worker with id, or nil.
func (st *State) Worker(id string) *Worker {
	for _, w := range st.Workers {
		if w.ID == id {
			return w
		}
	}
	return nil
}

// EnsureWorker returns the worker with id, recorded idle now if it is new.
func (st *State) EnsureWorker(id string, now time.Time) *Worker {
	w := st.Worker(id)
	if w == nil {
		w = &Worker{ID: id, State: WorkerIdle, Since: now}
		st.Workers = append(st.Workers, w)
	}
	return w
}

// Reject records a refused event, keeping the newest maxRejected.
func (st *State) Reject(r Rejection) {
	st.Rejected = append(st.Rejected, r)
	if n := len(st.Rejected); n > maxRejected {
		st.Rejected = append([]Rejection(nil), st.Rejected[n-maxRejected:]...)
	}
}

// IdleWorkers returns workers that can take a plan, in id order.
func (st *State) IdleWorkers() []*Worker {
	var out []*Worker
	for _, w := range st.Workers {
		if w.State == WorkerIdle && (w.Pane != "" || w.Headless) {
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return WorkerNum(out[i].ID) < WorkerNum(out[j].ID) })
	return out
}

// WorkerNum is the number in a worker id ("w12": 12), for ordering.
func WorkerNum(id string) int {
	n := 0
	for _, r := range id[1:] {
		n = n*10 + int(r-'0')
	}
	return n
}
