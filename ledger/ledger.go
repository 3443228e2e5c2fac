// Package ledger is the bet ledger: LEDGER.jsonl at the repository root, one
// JSON record per line, only ever appended to, so every change shows in
// `git log -p` as one added line. An "entry" record is one harvested plan
// (a bet when it names a metric); a "settle" record later gives a bet its
// measurement and outcome without rewriting the entry's line. Load folds the
// records back into entries.
//
// The package only reads and writes the file. Callers commit it (package
// git) and serialise writers (the lead loop holds a lock).
package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/orch-dev/orch/telemetry"
)

// File is the ledger's name, relative to the repository root.
const File = "LEDGER.jsonl"

// Outcomes of a bet.
const (
	Open = "open"
	Won  = "won"
	Lost = "lost"
)

// dateLayout is the layout of CheckBy.
const dateLayout = "2006-01-02"

// Entry is one harvested plan, with the bet it makes if Metric is set.
type Entry struct {
	ID        int        `json:"id"`
	Plan      string     `json:"plan"`
	Worker    string     `json:"worker"`
	Status    string     `json:"status"`
	Commit    string     `json:"commit"`
	Time      time.Time  `json:"time"`
	Event     string     `json:"event,omitempty"`
	Metric    string     `json:"metric,omitempty"`
	Baseline  *float64   `json:"baseline,omitempty"`
	Target    *float64   `json:"target,omitempty"`
	Direction string     `json:"direction,omitempty"`
	CheckBy   string     `json:"check_by,omitempty"`
	Measured  *float64   `json:"measured,omitempty"`
	Outcome   string     `json:"outcome,omitempty"`
	SettledAt *time.Time `json:"settled_at,omitempty"`
	// For bets whose plan gives metric_cmd: the command, and what the lead
	// loop measured itself before the change (at dispatch) and after it (at
	// harvest). A command that failed or printed no number leaves the value
	// empty and says why in the matching *_error field.
	MetricCmd      string     `json:"metric_cmd,omitempty"`
	BaselineError  string     `json:"baseline_error,omitempty"`
	AtHarvest      *float64   `json:"at_harvest,omitempty"`
	AtHarvestError string     `json:"at_harvest_error,omitempty"`
	CheckError     string     `json:"check_error,omitempty"` // the last orch ledger check that could not measure
	CheckedAt      *time.Time `json:"checked_at,omitempty"`

	// What the fleet spent on the plan, for orch stats and the boards.
	// Profile is the harvested attempt's agent profile, Attempt its
	// number; Attempts lists the plan's attempts up to this harvest, the
	// harvested one last (earlier ones ended failed, blocked, taken back).
	Profile   string    `json:"profile,omitempty"`
	Attempt   int       `json:"attempt,omitempty"`
	Attempts  []Attempt `json:"attempts,omitempty"`
	DependsOn []string  `json:"depends_on,omitempty"`
	VerifyOf  string    `json:"verify_of,omitempty"` // set on a verification plan's entry
	// Usage is what the harvested attempt's agent recorded it used (a
	// "usage" record when it came after the harvest); nil when nothing
	// was reported, Usage.Missing when it could not be read.
	Usage *telemetry.Usage `json:"usage,omitempty"`
	// Gates is the harvested attempt's gate run: "passed", or "" when the
	// plan has no gates (earlier attempts' runs are in Attempts).
	Gates string `json:"gates,omitempty"`
	// Verdict is how verification of this entry ended: verified or
	// refuted (a "verdict" record).
	Verdict string `json:"verdict,omitempty"`
}

// Attempt is one attempt of a plan: from the moment a worker was given it
// to the moment it left that worker, and how.
type Attempt struct {
	N       int        `json:"n"`
	Worker  string     `json:"worker"`
	Host    string     `json:"host,omitempty"`
	Profile string     `json:"profile,omitempty"`
	Start   time.Time  `json:"start"`
	End     *time.Time `json:"end,omitempty"` // nil while it runs
	// Outcome is how the attempt ended (the plan's state then): done,
	// blocked, failed, or "taken back" from the worker.
	Outcome string `json:"ended,omitempty"`
	// NeedsInput counts the times the attempt waited for a person; Gates
	// is its gate run's outcome ("passed" or why not; "" without one).
	NeedsInput int              `json:"needs_input,omitempty"`
	Gates      string           `json:"gates,omitempty"`
	Usage      *telemetry.Usage `json:"usage,omitempty"`
}

// Fact kinds: what a record adds to an entry after its harvest.
const (
	FactUsage   = "usage"
	FactVerdict = "verdict"
)

// Fact is a later record about entry ID: its attempt's usage (reported at
// the agent's turn end, after the harvest) or its verification's verdict
// (orch verify on a plan already ledgered). Event is the event it
// came from, so it is recorded once however often that event comes.
type Fact struct {
	Type   string           `json:"type"`
	ID     int              `json:"id"`
	Plan   string           `json:"plan"`
	Event  string           `json:"event"`
	Status string           `json:"status,omitempty"`
	Usage  *telemetry.Usage `json:"usage,omitempty"`
	Time   time.Time        `json:"time"`
}

// IsBet reports whether the entry claims to move a metric.
func (e Entry) IsBet() bool { return e.Metric != "" }

// entryRecord is an entry's line on disk; the type key comes first.
type entryRecord struct {
	Type string `json:"type"`
	Entry
}

// settleRecord is a settlement's line on disk.
type settleRecord struct {
	Type     string    `json:"type"`
	ID       int       `json:"id"`
	Measured float64   `json:"measured"`
	Outcome  string    `json:"outcome"`
	Time     time.Time `json:"time"`
}

// anyRecord decodes either kind of line.
type anyRecord struct {
	Type     string    `json:"type"`
	ID       int       `json:"id"`
	Measured *float64  `json:"measured"`
	Outcome  string    `json:"outcome"`
	Error    string    `json:"error"`
	Time     time.Time `json:"time"`
	Event    string    `json:"event"`
}

// checkRecord is a measurement attempt that produced no value.
type checkRecord struct {
	Type  string    `json:"type"`
	ID    int       `json:"id"`
	Error string    `json:"error"`
	Time  time.Time `json:"time"`
}

// Load reads the ledger under root and returns its entries in file order,
// settlements folded in. A missing file is an empty ledger.
func Load(root string) ([]Entry, error) {
	data, err := os.ReadFile(filepath.Join(root, File))
	if errors.Is(err, fs.ErrNotExist) {
		return []Entry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load ledger: %w", err)
	}
	return parse(data)
}

func parse(data []byte) ([]Entry, error) {
	entries := []Entry{}
	index := map[int]int{} // id -> position in entries
	for n, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%s line %d: %w: %s", File, n+1, ErrMalformed, fmt.Sprintf(format, args...))
		}
		var rec anyRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, bad("%v", err)
		}
		if rec.ID <= 0 {
			return nil, bad("missing or invalid id")
		}
		switch rec.Type {
		case "entry":
			var er entryRecord
			if err := json.Unmarshal(line, &er); err != nil {
				return nil, bad("%v", err)
			}
			if _, dup := index[er.ID]; dup {
				return nil, bad("duplicate id %d", er.ID)
			}
			if er.IsBet() && er.Outcome == "" {
				er.Outcome = Open
			}
			index[er.ID] = len(entries)
			entries = append(entries, er.Entry)
		case "settle":
			i, ok := index[rec.ID]
			switch {
			case !ok:
				return nil, bad("settles unknown id %d", rec.ID)
			case !entries[i].IsBet():
				return nil, bad("settles id %d, which is not a bet", rec.ID)
			case entries[i].Outcome != Open:
				return nil, bad("settles id %d again", rec.ID)
			case rec.Outcome != Won && rec.Outcome != Lost:
				return nil, bad("outcome %q", rec.Outcome)
			case rec.Measured == nil:
				return nil, bad("settlement without measured")
			}
			at := rec.Time
			entries[i].Measured = rec.Measured
			entries[i].Outcome = rec.Outcome
			entries[i].SettledAt = &at
		case "check":
			i, ok := index[rec.ID]
			if !ok || !entries[i].IsBet() || rec.Error == "" {
				return nil, bad("check record for id %d without a bet or an error", rec.ID)
			}
			at := rec.Time
			entries[i].CheckError, entries[i].CheckedAt = rec.Error, &at
		case FactUsage, FactVerdict:
			var f Fact
			if err := json.Unmarshal(line, &f); err != nil {
				return nil, bad("%v", err)
			}
			i, ok := index[f.ID]
			switch {
			case !ok:
				return nil, bad("%s record for unknown id %d", f.Type, f.ID)
			case f.Plan != entries[i].Plan:
				return nil, bad("%s record for id %d names plan %q, the entry is %q's", f.Type, f.ID, f.Plan, entries[i].Plan)
			}
			fold(&entries[i], f)
		default:
			return nil, bad("unknown type %q", rec.Type)
		}
	}
	return entries, nil
}

// fold gives entry e what fact f records; a later fact of a kind replaces
// an earlier one.
func fold(e *Entry, f Fact) {
	switch f.Type {
	case FactUsage:
		e.Usage = f.Usage
		if n := len(e.Attempts); n > 0 {
			e.Attempts[n-1].Usage = f.Usage
		}
	case FactVerdict:
		e.Verdict = f.Status
	}
}

// AddFact appends fact f about an existing entry, once: a fact from an
// event already recorded (f.Event) writes nothing and returns false.
func AddFact(root string, f Fact) (bool, error) {
	switch {
	case f.Type != FactUsage && f.Type != FactVerdict:
		return false, fmt.Errorf("fact: %w: unknown type %q", ErrBadEntry, f.Type)
	case f.Event == "":
		return false, fmt.Errorf("fact: %w: no event id", ErrBadEntry)
	case f.Type == FactUsage && f.Usage == nil:
		return false, fmt.Errorf("fact: %w: usage record without usage", ErrBadEntry)
	}
	data, err := readLedger(root)
	if err != nil {
		return false, fmt.Errorf("fact: %w", err)
	}
	entries, err := parse(data)
	if err != nil {
		return false, fmt.Errorf("fact: %w", err)
	}
	if e, ok := Find(entries, f.ID); !ok {
		return false, fmt.Errorf("fact %d: %w", f.ID, ErrNoEntry)
	} else if e.Plan != f.Plan {
		return false, fmt.Errorf("fact %d: %w: it names plan %q, the entry is %q's", f.ID, ErrBadEntry, f.Plan, e.Plan)
	}
	if hasFact(data, f.Type, f.Event) {
		return false, nil
	}
	f.Time = f.Time.UTC().Truncate(time.Second)
	if err := appendLine(root, data, f); err != nil {
		return false, fmt.Errorf("fact: %w", err)
	}
	return true, nil
}

// hasFact says whether the ledger holds a fact of kind typ from event ev.
func hasFact(data []byte, typ, ev string) bool {
	for _, line := range bytes.Split(data, []byte("\n")) {
		var rec anyRecord
		if json.Unmarshal(line, &rec) == nil && rec.Type == typ && rec.Event == ev {
			return true
		}
	}
	return false
}

// AppendAll appends several entries with one read, one write and one fsync
// (a batch of harvests). It is Append for each, in order: an entry whose
// event is already in the ledger is returned as it is.
func AppendAll(root string, es []Entry) ([]Entry, error) {
	return AppendAllChecked(root, es, nil)
}

// AppendAllChecked is AppendAll with check run on the ledger as read,
// before anything is written: an error from check writes nothing.
func AppendAllChecked(root string, es []Entry, check func(data []byte) error) ([]Entry, error) {
	for i := range es {
		if err := validate(&es[i]); err != nil {
			return nil, fmt.Errorf("append %s: %w", es[i].Plan, err)
		}
	}
	data, err := readLedger(root)
	if err != nil {
		return nil, fmt.Errorf("append: %w", err)
	}
	if check != nil {
		if err := check(data); err != nil {
			return nil, err
		}
	}
	entries, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("append: %w", err)
	}
	byEvent := map[string]Entry{}
	maxID := 0
	for _, old := range entries {
		if old.Event != "" {
			byEvent[old.Event] = old
		}
		maxID = max(maxID, old.ID)
	}
	out := make([]Entry, len(es))
	var recs []any
	for i, e := range es {
		if old, ok := byEvent[e.Event]; ok && e.Event != "" {
			out[i] = old
			continue
		}
		maxID++
		e.ID = maxID
		out[i] = e
		if e.Event != "" {
			byEvent[e.Event] = e
		}
		recs = append(recs, entryRecord{Type: "entry", Entry: e})
	}
	if len(recs) > 0 {
		if err := appendLines(root, data, recs); err != nil {
			return nil, fmt.Errorf("append: %w", err)
		}
	}
	return out, nil
}

// Append adds e to the ledger under root with the next free id and returns
// it as recorded, with added true. If e has an Event and an entry with the
// same Event is already there, nothing is written and that entry is returned
// with added false, so a redelivered event has one effect. A bet without an
// outcome is recorded as open. Time is kept to the second.
func Append(root string, e Entry) (got Entry, added bool, err error) {
	if err := validate(&e); err != nil {
		return Entry{}, false, fmt.Errorf("append %s: %w", e.Plan, err)
	}
	data, err := readLedger(root)
	if err != nil {
		return Entry{}, false, fmt.Errorf("append %s: %w", e.Plan, err)
	}
	entries, err := parse(data)
	if err != nil {
		return Entry{}, false, fmt.Errorf("append %s: %w", e.Plan, err)
	}
	maxID := 0
	for _, old := range entries {
		if e.Event != "" && old.Event == e.Event {
			return old, false, nil
		}
		maxID = max(maxID, old.ID)
	}
	e.ID = maxID + 1
	if err := appendLine(root, data, entryRecord{Type: "entry", Entry: e}); err != nil {
		return Entry{}, false, fmt.Errorf("append %s: %w", e.Plan, err)
	}
	return e, true, nil
}

func validate(e *Entry) error {
	e.Time = e.Time.Truncate(time.Second)
	if e.SettledAt != nil {
		at := e.SettledAt.Truncate(time.Second)
		e.SettledAt = &at
	}
	if !e.IsBet() {
		if e.Outcome != "" {
			return fmt.Errorf("outcome %q on an entry without a metric: %w", e.Outcome, ErrBadOutcome)
		}
		return nil
	}
	switch e.Outcome {
	case "":
		e.Outcome = Open
	case Open, Won, Lost:
	default:
		return fmt.Errorf("outcome %q: %w", e.Outcome, ErrBadOutcome)
	}
	switch e.Direction {
	case "", "lower", "higher":
	default:
		return fmt.Errorf("direction %q (want lower or higher): %w", e.Direction, ErrBadEntry)
	}
	if e.CheckBy != "" {
		if _, err := time.Parse(dateLayout, e.CheckBy); err != nil {
			return fmt.Errorf("check_by %q (want YYYY-MM-DD): %w", e.CheckBy, ErrBadEntry)
		}
	}
	for _, f := range []*float64{e.Baseline, e.Target, e.Measured} {
		if f != nil && (math.IsNaN(*f) || math.IsInf(*f, 0)) {
			return fmt.Errorf("number %v: %w", *f, ErrBadEntry)
		}
	}
	return nil
}

// Settle records the measurement and outcome (won or lost) of the open bet
// id, by appending a settle record, and returns the settled entry.
func Settle(root string, id int, measured float64, outcome string, now time.Time) (Entry, error) {
	if outcome != Won && outcome != Lost {
		return Entry{}, fmt.Errorf("settle %d: outcome %q: %w", id, outcome, ErrBadOutcome)
	}
	if math.IsNaN(measured) || math.IsInf(measured, 0) {
		return Entry{}, fmt.Errorf("settle %d: measured %v is not a number", id, measured)
	}
	data, err := readLedger(root)
	if err != nil {
		return Entry{}, fmt.Errorf("settle %d: %w", id, err)
	}
	entries, err := parse(data)
	if err != nil {
		return Entry{}, fmt.Errorf("settle %d: %w", id, err)
	}
	e, ok := Find(entries, id)
	switch {
	case !ok:
		return Entry{}, fmt.Errorf("settle %d: %w", id, ErrNoEntry)
	case !e.IsBet():
		return Entry{}, fmt.Errorf("settle %d: %w", id, ErrNotBet)
	case e.Outcome != Open:
		return Entry{}, fmt.Errorf("settle %d: %w (%s)", id, ErrSettled, e.Outcome)
	}
	now = now.Truncate(time.Second)
	rec := settleRecord{Type: "settle", ID: id, Measured: measured, Outcome: outcome, Time: now}
	if err := appendLine(root, data, rec); err != nil {
		return Entry{}, fmt.Errorf("settle %d: %w", id, err)
	}
	e.Measured = &measured
	e.Outcome = outcome
	e.SettledAt = &now
	return e, nil
}

// Due returns the open bets whose check_by date is today or earlier, in
// ledger order. Dates compare in today's location.
func Due(entries []Entry, today time.Time) []Entry {
	day := today.Format(dateLayout)
	due := []Entry{}
	for _, e := range entries {
		if !e.IsBet() || e.Outcome != Open || e.CheckBy == "" {
			continue
		}
		// Reformat so that a hand-written 2026-1-2 would still compare right;
		// an unparsable date is never due.
		d, err := time.Parse(dateLayout, e.CheckBy)
		if err != nil {
			continue
		}
		if d.Format(dateLayout) <= day {
			due = append(due, e)
		}
	}
	return due
}

// Find returns the entry with id.
func Find(entries []Entry, id int) (Entry, bool) {
	for _, e := range entries {
		if e.ID == id {
			return e, true
		}
	}
	return Entry{}, false
}

// Read returns the ledger's bytes as they are on disk (nil when there is
// no ledger yet).
func Read(root string) ([]byte, error) { return readLedger(root) }

// CheckAppendOnly says whether current is committed with only lines
// appended: the ledger is append-only, and a change to a line already
// committed is refused (ErrEdited) rather than swept into orch's next
// commit.
func CheckAppendOnly(committed, current []byte) error {
	if bytes.HasPrefix(current, committed) {
		return nil
	}
	line := 1 + bytes.Count(current[:commonPrefix(committed, current)], []byte("\n"))
	return fmt.Errorf("%w: line %d differs from the last commit of %s", ErrEdited, line, File)
}

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func readLedger(root string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(root, File))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// appendLine writes rec as one line at the end of the ledger and syncs it.
// data is the ledger as last read: if a hand edit left it without a final
// newline, one is written first so records never share a line.
func appendLine(root string, data []byte, rec any) error {
	return appendLines(root, data, []any{rec})
}

// appendLines appends records, one line each, with one write and one fsync.
func appendLines(root string, data []byte, recs []any) error {
	var line []byte
	if len(data) > 0 && data[len(data)-1] != '\n' {
		line = append(line, '\n')
	}
	for _, rec := range recs {
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		line = append(append(line, b...), '\n')
	}
	path := filepath.Join(root, File)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if data == nil {
		// The file is new: make its directory entry durable too.
		if d, err := os.Open(root); err == nil {
			d.Sync()
			d.Close()
		}
	}
	return nil
}

// RecordCheckFailure appends that measuring bet id failed (the command
// failed or printed no number): the reason is kept, no value is invented.
func RecordCheckFailure(root string, id int, reason string, now time.Time) (Entry, error) {
	entries, err := Load(root)
	if err != nil {
		return Entry{}, err
	}
	e, ok := Find(entries, id)
	switch {
	case !ok:
		return Entry{}, fmt.Errorf("check %d: %w", id, ErrNoEntry)
	case !e.IsBet():
		return Entry{}, fmt.Errorf("check %d: %w", id, ErrNotBet)
	}
	data, err := readLedger(root)
	if err != nil {
		return Entry{}, err
	}
	at := now.UTC().Truncate(time.Second)
	if err := appendLine(root, data, checkRecord{Type: "check", ID: id, Error: reason, Time: at}); err != nil {
		return Entry{}, err
	}
	e.CheckError, e.CheckedAt = reason, &at
	return e, nil
}

// Judge judges a measured value against a bet: won when it reaches the
// target in the bet's direction.
func (e Entry) Judge(measured float64) (string, error) {
	if e.Target == nil {
		return "", fmt.Errorf("bet %d: %w: no target", e.ID, ErrBadEntry)
	}
	switch e.Direction {
	case "lower":
		if measured <= *e.Target {
			return Won, nil
		}
	case "higher":
		if measured >= *e.Target {
			return Won, nil
		}
	default:
		return "", fmt.Errorf("bet %d: %w: no direction", e.ID, ErrBadEntry)
	}
	return Lost, nil
}
