// Package event is the schema of what workers tell the lead loop: one JSON
// document per event, with an id that makes every handler idempotent, and
// the spool, where an event waits on disk while the broker is unreachable.
//
// The schema names a worker by id and host, never by a tmux pane or a local
// path, so an event means the same thing wherever the worker runs.
package event

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/orch-dev/orch/telemetry"
)

// Version is the schema version written into every event.
const Version = 1

// Kind is what happened.
type Kind string

// The kinds a worker may send, and the lead's own commands.
const (
	Started  Kind = "started"  // the worker read the dispatch line and began
	Done     Kind = "done"     // the worker finished and wrote RESULT.md
	Blocked  Kind = "blocked"  // the worker cannot go on; Status holds the reason
	Died     Kind = "died"     // the worker's process ended (a tmux hook or a process exit); Plan may be empty
	Dispatch Kind = "dispatch" // lead command: queue a plan (Worker: optional target)
	Lost     Kind = "lost"     // lead record: Worker's pane was gone at start while it held Plan
	Gated    Kind = "gated"    // lead record: Plan's acceptance gates finished; Status: "passed" or why not
	Verify   Kind = "verify"   // lead command: verify Plan; Status: rounds ("1" or "3")
	Regate   Kind = "regate"   // lead record: run Plan's gates again (they were running when the lead stopped)
	// Sent by an agent's hooks through orch-notify hook (see package agent).
	NeedsInput Kind = "needs-input" // the agent waits for a person: a permission or input prompt; Status: its message
	Idle       Kind = "idle"        // the agent's turn ended; the lead decides whether the plan was left unfinished
	Failed     Kind = "failed"      // the agent stopped on an error (API error, crash); Status: the reason
	Ready      Kind = "ready"       // the agent is up and at its prompt, ready for a line (Claude Code's SessionStart); no plan
	Exhausted  Kind = "exhausted"   // the agent ran out of context (a compaction or context-limit signal); Status: which
	// Say is a worker's finding for the others (orch-notify say): on the
	// bus (BusSubject), never on the lead's event subjects. Status: the
	// text; Plan: a per-plan topic, or Topic: a named one, or neither: the
	// whole fleet.
	Say Kind = "say"
	// Send is the lead's command to hand Status, one line, to Worker's
	// agent at its next prompt (orch send).
	Send Kind = "send"
	// Lead records.
	Prepared   Kind = "prepared"   // lead record: the setup command for Plan's attempt Attempt on Worker ended; Status: "ok" or "failed: <why>"
	Exited     Kind = "exited"     // lead record: a headless worker's process for Plan (attempt Attempt) ended; Status: how
	Integrated Kind = "integrated" // lead record: orch integrate's outcome for Plan; Status: "integrated <sha>", "conflict: <files>" or "failed: <why>"
	TimedOut   Kind = "timed-out"  // lead record: attempt Attempt of Plan on Worker reached its deadline
	// lead record: a bet's metric command for attempt Attempt of Plan on
	// Worker ended; Status: "<phase> <value>" or "<phase> error: <why>",
	// phase baseline (at dispatch) or harvest.
	Measured Kind = "measured"
)

// WorkerKinds are the kinds orch-notify accepts on its command line.
var WorkerKinds = []Kind{Started, Done, Blocked}

// MaxStatus bounds a status or reason. Longer text is cut at a rune
// boundary and marked, never dropped.
const MaxStatus = 4096

// TruncMarker ends a status that was cut to MaxStatus.
const TruncMarker = "…[truncated]"

// Event is one message on the bus.
type Event struct {
	V      int    `json:"v"`
	ID     string `json:"id"`
	Kind   Kind   `json:"kind"`
	Plan   string `json:"plan"`
	Status string `json:"status,omitempty"`
	Worker string `json:"worker,omitempty"`
	Host   string `json:"host,omitempty"`
	Pane   string `json:"pane,omitempty"` // for died: the tmux pane that ended, if any
	// Attempt ties a lead record (gated, regate) to one attempt of its plan.
	Attempt int       `json:"attempt,omitempty"`
	Time    time.Time `json:"time"`
	// Usage is what the agent recorded it used in the turn an idle (or
	// failed) event ends: read by orch-notify from the agent's own files.
	Usage *telemetry.Usage `json:"usage,omitempty"`
	// Topic is a say's named topic (orch-notify say --topic).
	Topic string `json:"topic,omitempty"`
}

// New returns an event with a fresh id and the current time. The status is
// cleaned with Clean.
func New(kind Kind, plan, status, worker, host string) Event {
	return Event{V: Version, ID: NewID(), Kind: kind, Plan: plan, Status: Clean(status),
		Worker: worker, Host: host, Time: time.Now().UTC()}
}

// NewID returns a random 128-bit id, hex encoded.
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand never fails on supported platforms (Go 1.24+ crashes
		// instead); keep a time-based id as a last resort rather than panic.
		return fmt.Sprintf("t%x", time.Now().UnixNano())
	}
	return hex.EncodeToString(b[:])
}

// DefaultPrefix is the subject prefix of a broker that names none.
const DefaultPrefix = "orch"

// WorkerInbox is the reply-subject prefix of the worker role, the only
// subjects a worker may subscribe to (to receive its publish acks).
const WorkerInbox = "_W"

// Subject is where e is published under prefix: a command on its kind's
// subject, a worker event on one that carries its worker's id, which only
// that worker's credential may publish on.
func Subject(prefix string, e Event) string {
	if e.Kind == Say {
		return BusSubject(prefix, e)
	}
	if IsCommand(e.Kind) {
		return prefix + ".cmd." + string(e.Kind)
	}
	w := e.Worker
	if w == "" {
		w = NoWorker
	}
	return prefix + ".ev." + w + "." + string(e.Kind)
}

// IsCommand says whether events of kind k are the lead's own (its
// commands and records), which no worker may send.
func IsCommand(k Kind) bool {
	return k == Dispatch || k == Lost || k == Gated || k == Verify || k == Regate || k == Integrated || k == Exited || k == Prepared ||
		k == TimedOut || k == Measured || k == Send
}

// Bus topics. A say goes to the whole fleet, to one plan's topic, or to a
// named topic; the topic is the subject's tail after the sender.
const (
	FleetTopic = "fleet"
	planTopic  = "plan."
	namedTopic = "topic."
)

// BusSubject is where a say is published: <prefix>.bus.<worker>.<topic>,
// which only that worker's credential may publish on (WorkerBusSubjects).
func BusSubject(prefix string, e Event) string {
	w := e.Worker
	if w == "" {
		w = NoWorker
	}
	return prefix + ".bus." + w + "." + SayTopic(e.Plan, e.Topic)
}

// SayTopic is the topic a say for plan (or named topic) goes to, as the
// bus subject's tail: "fleet", "plan.<P>" or "topic.<T>".
func SayTopic(plan, topic string) string {
	switch {
	case plan != "":
		return planTopic + plan
	case topic != "":
		return namedTopic + topic
	}
	return FleetTopic
}

// BusFilter is the subject filter of a topic as SayTopic writes it (""
// for all of them), over every sender.
func BusFilter(prefix, topic string) string {
	if topic == "" {
		return prefix + ".bus.>"
	}
	return prefix + ".bus.*." + topic
}

// BusSender is the worker whose credential published on a bus subject,
// and the topic after it; ok is false if subject is not a bus subject.
func BusSender(prefix, subject string) (worker, topic string, ok bool) {
	rest, ok := strings.CutPrefix(subject, prefix+".bus.")
	if !ok {
		return "", "", false
	}
	worker, topic, ok = strings.Cut(rest, ".")
	return worker, topic, ok && ValidWorker(worker) && topic != ""
}

// WorkerBusSubjects is what worker id may publish on the bus: says under
// its own id.
func WorkerBusSubjects(prefix, id string) string { return prefix + ".bus." + id + ".>" }

// CheckTopic enforces the rule of a named topic: that of a plan name.
func CheckTopic(topic string) error {
	if err := CheckPlanName(topic); err != nil {
		return fmt.Errorf("topic %q: use 1-%d characters of a-z, 0-9, '.', '_', '-', starting with a letter or digit: %w", topic, MaxPlanName, ErrBadPlanName)
	}
	return nil
}

// NoWorker stands for the worker in the subject of an event that names
// none (refused by the lead loop; no worker's credential may send it).
const NoWorker = "_"

// SubjectWorker is the worker a worker event's subject names (the worker
// whose credential sent it), or "" if subject is not a worker event's.
func SubjectWorker(prefix, subject string) string {
	rest, ok := strings.CutPrefix(subject, prefix+".ev.")
	if !ok {
		return ""
	}
	w, _, ok := strings.Cut(rest, ".")
	if !ok {
		return ""
	}
	return w
}

// WorkerSubjects is what worker id may publish: events on subjects that
// carry its own id.
func WorkerSubjects(prefix, id string) string { return prefix + ".ev." + id + ".>" }

// WorkerInboxOf is the reply-subject prefix of worker id.
func WorkerInboxOf(id string) string { return WorkerInbox + "." + id }

// Marshal encodes the event as one line of JSON.
func (e Event) Marshal() []byte {
	b, _ := json.Marshal(e) // cannot fail: strings, ints, a time, and a Usage whose cost is a JSON number (Check)
	return b
}

// Parse decodes and checks an event. It never trusts the sender: the status
// is cleaned again and ids and kinds are checked.
func Parse(data []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(data, &e); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := e.Check(); err != nil {
		return Event{}, err
	}
	e.Status = Clean(e.Status)
	if e.Usage != nil {
		u := *e.Usage
		u.Source, u.Plan, u.Model, u.Missing = Clean(u.Source), Clean(u.Plan), Clean(u.Model), Clean(u.Missing)
		e.Usage = &u
	}
	return e, nil
}

// Check reports what is wrong with an event's fields, if anything. Plan
// names are checked by the plans package, which owns their rule.
func (e Event) Check() error {
	switch {
	case e.V != Version:
		return fmt.Errorf("%w: schema version %d, want %d", ErrMalformed, e.V, Version)
	case !validID(e.ID):
		return fmt.Errorf("%w: id %q is not 8-64 characters of [0-9a-z]", ErrMalformed, e.ID)
	case !knownKind(e.Kind):
		return fmt.Errorf("%w: unknown kind %q", ErrMalformed, e.Kind)
	case e.Plan == "" && !PlanOptional(e.Kind):
		return fmt.Errorf("%w: no plan", ErrMalformed)
	case (PlanOptional(e.Kind) || e.Kind == Lost) && e.Worker == "":
		return fmt.Errorf("%w: %s without a worker id", ErrMalformed, e.Kind)
	case e.Time.IsZero():
		return fmt.Errorf("%w: no time", ErrMalformed)
	case e.Worker != "" && !ValidWorker(e.Worker):
		return fmt.Errorf("%w: worker id %q is invalid", ErrMalformed, e.Worker)
	case e.Pane != "" && !validPane(e.Pane):
		return fmt.Errorf("%w: pane %q is not a tmux pane id", ErrMalformed, e.Pane)
	case e.Topic != "" && (e.Kind != Say || e.Plan != ""):
		return fmt.Errorf("%w: a topic is only for a say without a plan", ErrMalformed)
	case e.Topic != "" && CheckTopic(e.Topic) != nil:
		return fmt.Errorf("%w: %v", ErrMalformed, CheckTopic(e.Topic))
	case (e.Kind == Say || e.Kind == Send) && e.Status == "":
		return fmt.Errorf("%w: %s without text", ErrMalformed, e.Kind)
	case e.Usage != nil && !CarriesUsage(e.Kind):
		return fmt.Errorf("%w: usage on a %s event (only on idle, done or failed)", ErrMalformed, e.Kind)
	case e.Usage != nil:
		if err := e.Usage.Check(); err != nil {
			return fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if e.Usage.Plan != "" && CheckPlanName(e.Usage.Plan) != nil {
			return fmt.Errorf("%w: usage of plan %q, not a plan name", ErrMalformed, e.Usage.Plan)
		}
	}
	return nil
}

// CarriesUsage says whether an event of kind k may carry a Usage: the
// ends of an agent's turn.
func CarriesUsage(k Kind) bool { return k == Idle || k == Done || k == Failed }

func knownKind(k Kind) bool {
	switch k {
	case Started, Done, Blocked, Died, Dispatch, Lost, Gated, Verify, Regate, NeedsInput, Idle, Failed, Ready, Exhausted, Integrated, Exited, Prepared, TimedOut, Measured, Say, Send:
		return true
	}
	return false
}

// PlanOptional says whether an event of kind k may leave Plan empty: the
// lead loop then means the plan its worker holds (for a headless exit: no
// plan). A pane's death and an agent's hooks know the worker, not always
// the plan.
func PlanOptional(k Kind) bool {
	return k == Died || k == NeedsInput || k == Idle || k == Failed || k == Ready || k == Exhausted || k == Exited || k == Say || k == Send
}

func validID(id string) bool {
	if len(id) < 8 || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z') {
			return false
		}
	}
	return true
}

func validPane(p string) bool {
	if len(p) < 2 || len(p) > 12 || p[0] != '%' {
		return false
	}
	for _, r := range p[1:] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// MaxPlanName is the longest plan name.
const MaxPlanName = 63

// CheckPlanName enforces the contract's plan name rule,
// ^[a-z0-9][a-z0-9._-]{0,62}$ without "..", before a name touches disk or
// tmux. It lives here, not in package plans, so that orch-notify checks
// names without linking a YAML parser; plans.ValidateName is this function.
func CheckPlanName(name string) error {
	ok := name != "" && len(name) <= MaxPlanName && !strings.Contains(name, "..")
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0:
		default:
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("plan name %q is %w: use 1-%d characters of a-z, 0-9, '.', '_', '-', starting with a letter or digit, without \"..\"",
			name, ErrBadPlanName, MaxPlanName)
	}
	return nil
}

// ValidWorker reports whether id is a worker id: "w" and 1-4 digits.
func ValidWorker(id string) bool {
	if len(id) < 2 || len(id) > 5 || id[0] != 'w' {
		return false
	}
	for _, r := range id[1:] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return id[1] != '0'
}

// Clean makes text safe to store and show: invalid UTF-8, control
// characters (including newlines and terminal escape sequences) and
// invisible format characters are written as visible escapes like \x1b
// and \u202e, and text longer than MaxStatus is cut and
// marked with TruncMarker. Clean(Clean(s)) == Clean(s), so text may be
// cleaned at every hop without growing.
func Clean(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f, unicode.Is(unicode.Cf, r), r == '\u2028', r == '\u2029':
			// C1 controls, and the characters that change how a line
			// reads without being seen: format characters (bidi overrides,
			// zero-width ones, tags that spell hidden text to an agent)
			// and the line and paragraph separators.
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	out := b.String()
	if len(out) <= MaxStatus {
		return out
	}
	cut := MaxStatus - len(TruncMarker)
	for cut > 0 && !utf8.RuneStart(out[cut]) {
		cut--
	}
	return out[:cut] + TruncMarker
}

// StillIdle is the status of an idle event that only repeats that the
// agent still waits (Claude Code's idle_prompt notification, a minute after
// a turn ended): it never replaces the reason a plan already waits for.
const StillIdle = "still waiting for input"

// DispatchedPlan returns the plan a dispatch line in text names ("Read
// plans/<name>/PLAN.md and execute it exactly."), or "" when text holds
// none: an agent's turn whose input lacks the line is not a plan's turn
// (a title request, a side thread, a person's question).
func DispatchedPlan(text string) string {
	const pre, post = "Read plans/", "/PLAN.md and execute it exactly."
	for {
		i := strings.Index(text, pre)
		if i < 0 {
			return ""
		}
		text = text[i+len(pre):]
		name, _, ok := strings.Cut(text, post)
		if ok && CheckPlanName(name) == nil {
			return name
		}
	}
}

// Hostname is the host an event says it comes from (Event.Host).
func Hostname() string {
	h, _ := os.Hostname()
	return h
}

// DerivedID is the id of a record the lead may report twice (a process's
// exit, a lost pane, a gate run's verdict): derived from what it is about,
// so that both reports have one effect.
func DerivedID(about string) string {
	sum := sha256.Sum256([]byte(about))
	return hex.EncodeToString(sum[:16])
}

// Record is an event the lead itself makes (a process's exit, a setup's
// end, a turn end decided late) about plan and worker, at now.
func Record(kind Kind, id, plan, worker, status string, now time.Time) Event {
	return Event{V: Version, ID: id, Kind: kind, Plan: plan, Worker: worker, Status: status, Host: Hostname(), Time: now.UTC()}
}
