package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/telemetry"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ptr(f float64) *float64 { return &f }

func bet(plan, event, checkBy string) Entry {
	return Entry{Plan: plan, Worker: "w1", Status: "done", Commit: "abc", Time: t0, Event: event,
		Metric: "p95_ms", Baseline: ptr(120), Target: ptr(100), Direction: "lower", CheckBy: checkBy}
}

func plain(plan, event string) Entry {
	return Entry{Plan: plan, Worker: "w2", Status: "done: fixed it", Commit: "def", Time: t0, Event: event}
}

func mustAppend(t *testing.T, root string, e Entry) Entry {
	t.Helper()
	got, added, err := Append(root, e)
	if err != nil {
		t.Fatal(err)
	}
	if !added {
		t.Fatalf("Append(%s) did not add", e.Plan)
	}
	return got
}

func readLines(t *testing.T, root string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, File))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(data, []byte("\n")) {
		t.Errorf("ledger does not end with a newline")
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func TestLoadMissing(t *testing.T) {
	got, err := Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || len(got) != 0 {
		t.Errorf("Load of missing ledger = %#v, want empty", got)
	}
}

func TestAppend(t *testing.T) {
	root := t.TempDir()
	tests := []struct {
		name        string
		entry       Entry
		wantID      int
		wantAdded   bool
		wantOutcome string
	}{
		{"first", plain("a", "ev-1"), 1, true, ""},
		{"bet defaults to open", bet("b", "ev-2", "2026-04-01"), 2, true, Open},
		{"no event", plain("c", ""), 3, true, ""},
		{"no event again", plain("c", ""), 4, true, ""},
		{"same event", plain("other", "ev-2"), 2, false, Open},
		{"ids ignore the caller's", Entry{ID: 99, Plan: "d", Time: t0}, 5, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, added, err := Append(root, tt.entry)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != tt.wantID {
				t.Errorf("ID = %d, want %d", got.ID, tt.wantID)
			}
			if added != tt.wantAdded {
				t.Errorf("added = %v, want %v", added, tt.wantAdded)
			}
			if got.Outcome != tt.wantOutcome {
				t.Errorf("Outcome = %q, want %q", got.Outcome, tt.wantOutcome)
			}
		})
	}
	if got, want := len(readLines(t, root)), 5; got != want {
		t.Errorf("ledger has %d lines, want %d", got, want)
	}
	entries, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 5 {
		t.Fatalf("Load: %d entries, want 5", len(entries))
	}
	b := entries[1]
	if b.Plan != "b" || b.Outcome != Open || *b.Baseline != 120 || *b.Target != 100 || !b.Time.Equal(t0) || b.CheckBy != "2026-04-01" {
		t.Errorf("loaded bet = %+v", b)
	}
}

func TestAppendLineFormat(t *testing.T) {
	root := t.TempDir()
	mustAppend(t, root, plain("a", "ev-1"))
	line := readLines(t, root)[0]
	want := `{"type":"entry","id":1,"plan":"a","worker":"w2","status":"done: fixed it","commit":"def","time":"2026-03-01T12:00:00Z","event":"ev-1"}`
	if line != want {
		t.Errorf("line:\n%s\nwant:\n%s", line, want)
	}
}

func TestAppendInvalid(t *testing.T) {
	tests := []struct {
		name  string
		entry Entry
		want  error
	}{
		{"plain with outcome", Entry{Plan: "a", Outcome: Won}, ErrBadOutcome},
		{"bet with odd outcome", Entry{Plan: "a", Metric: "m", Outcome: "maybe"}, ErrBadOutcome},
		{"bad direction", Entry{Plan: "a", Metric: "m", Direction: "sideways"}, ErrBadEntry},
		{"bad check_by", Entry{Plan: "a", Metric: "m", CheckBy: "01/04/2026"}, ErrBadEntry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if _, _, err := Append(root, tt.entry); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
			if _, err := os.Stat(filepath.Join(root, File)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused entry touched the ledger")
			}
		})
	}
}

func TestSettle(t *testing.T) {
	root := t.TempDir()
	mustAppend(t, root, plain("a", "ev-1"))
	mustAppend(t, root, bet("b", "ev-2", "2026-04-01"))
	settledAt := t0.Add(30 * 24 * time.Hour)

	got, err := Settle(root, 2, 95.5, Won, settledAt)
	if err != nil {
		t.Fatal(err)
	}
	if got.Outcome != Won || *got.Measured != 95.5 || !got.SettledAt.Equal(settledAt) {
		t.Errorf("Settle returned %+v", got)
	}

	lines := readLines(t, root)
	if len(lines) != 3 {
		t.Fatalf("ledger has %d lines, want 3 (settling appends, never rewrites)", len(lines))
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[2]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["type"] != "settle" || rec["id"] != 2.0 || rec["measured"] != 95.5 || rec["outcome"] != "won" {
		t.Errorf("settle line = %s", lines[2])
	}
	if !strings.Contains(lines[1], `"outcome":"open"`) {
		t.Errorf("entry line changed: %s", lines[1])
	}

	entries, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := Find(entries, 2)
	if !ok {
		t.Fatal("Find(2) found nothing")
	}
	if e.Outcome != Won || e.Measured == nil || *e.Measured != 95.5 || e.SettledAt == nil || !e.SettledAt.Equal(settledAt) {
		t.Errorf("loaded settled bet = %+v", e)
	}

	errTests := []struct {
		name    string
		id      int
		outcome string
		want    error
	}{
		{"bad outcome", 2, "open", ErrBadOutcome},
		{"unknown id", 7, Lost, ErrNoEntry},
		{"not a bet", 1, Lost, ErrNotBet},
		{"already settled", 2, Lost, ErrSettled},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Settle(root, tt.id, 1, tt.outcome, settledAt); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
	if got := len(readLines(t, root)); got != 3 {
		t.Errorf("failed settlements wrote lines: %d, want 3", got)
	}
}

func TestDue(t *testing.T) {
	root := t.TempDir()
	mustAppend(t, root, bet("yesterday", "", "2026-03-31"))
	mustAppend(t, root, bet("today", "", "2026-04-01"))
	mustAppend(t, root, bet("tomorrow", "", "2026-04-02"))
	mustAppend(t, root, bet("undated", "", ""))
	mustAppend(t, root, plain("plain", ""))
	mustAppend(t, root, bet("settled", "", "2026-03-01"))
	if _, err := Settle(root, 6, 1, Lost, t0); err != nil {
		t.Fatal(err)
	}
	entries, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	plus9 := time.FixedZone("+9", 9*3600)
	tests := []struct {
		name  string
		today time.Time
		want  string
	}{
		{"start of day", time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), "yesterday,today"},
		{"end of day", time.Date(2026, 4, 1, 23, 59, 59, 0, time.UTC), "yesterday,today"},
		{"day before", time.Date(2026, 3, 31, 12, 0, 0, 0, time.UTC), "yesterday"},
		{"long before", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ""},
		{"local date counts", time.Date(2026, 4, 1, 16, 0, 0, 0, time.UTC).In(plus9), "yesterday,today,tomorrow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var plans []string
			for _, e := range Due(entries, tt.today) {
				plans = append(plans, e.Plan)
			}
			if got := strings.Join(plans, ","); got != tt.want {
				t.Errorf("Due = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLoadMalformed(t *testing.T) {
	good := `{"type":"entry","id":1,"plan":"a","metric":"m","outcome":"open","time":"2026-03-01T12:00:00Z"}`
	tests := []struct {
		name     string
		body     string
		wantLine string
	}{
		{"not json", good + "\n\n{oops\n", "line 3"},
		{"unknown type", good + "\n" + `{"type":"bet","id":2}` + "\n", "line 2"},
		{"no id", `{"type":"entry","plan":"a"}` + "\n", "line 1"},
		{"duplicate id", good + "\n" + good + "\n", "line 2"},
		{"settle unknown", good + "\n" + `{"type":"settle","id":5,"measured":1,"outcome":"won"}` + "\n", "line 2"},
		{"settle twice", good + "\n" + `{"type":"settle","id":1,"measured":1,"outcome":"won"}` + "\n" +
			`{"type":"settle","id":1,"measured":1,"outcome":"lost"}` + "\n", "line 3"},
		{"settle bad outcome", good + "\n" + `{"type":"settle","id":1,"measured":1,"outcome":"open"}` + "\n", "line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, File), []byte(tt.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(root)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
			if want := File + " " + tt.wantLine + ":"; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
			if _, _, err := Append(root, plain("x", "")); !errors.Is(err, ErrMalformed) {
				t.Errorf("Append on a malformed ledger: err = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestAppendAfterMissingNewline(t *testing.T) {
	root := t.TempDir()
	body := `{"type":"entry","id":1,"plan":"a","time":"2026-03-01T12:00:00Z"}` // hand edit, no final newline
	if err := os.WriteFile(filepath.Join(root, File), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, root, plain("b", ""))
	if got := len(readLines(t, root)); got != 2 {
		t.Errorf("ledger has %d lines, want 2", got)
	}
	entries, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[1].ID != 2 {
		t.Errorf("entries = %+v", entries)
	}
}

func TestAppendAllIsAppendForEach(t *testing.T) {
	root := t.TempDir()
	first, _, err := Append(root, Entry{Plan: "a", Worker: "w1", Status: "s", Commit: "c", Time: time.Now(), Event: "ev-a"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := AppendAll(root, []Entry{
		{Plan: "a", Worker: "w1", Status: "again", Commit: "c", Time: time.Now(), Event: "ev-a"},
		{Plan: "b", Worker: "w2", Status: "s", Commit: "c", Time: time.Now(), Event: "ev-b"},
		{Plan: "c", Worker: "w3", Status: "s", Commit: "c", Time: time.Now(), Event: "ev-c"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].ID != first.ID || got[0].Status != first.Status || got[1].ID != 2 || got[2].ID != 3 {
		t.Errorf("AppendAll = %+v", got)
	}
	all, err := Load(root)
	if err != nil || len(all) != 3 {
		t.Fatalf("Load = %d entries, %v; want 3", len(all), err)
	}
}

func TestAppendAllSameEventTwiceAndMissingNewline(t *testing.T) {
	root := t.TempDir()
	// A hand edit left the file without its final newline.
	if err := os.WriteFile(filepath.Join(root, File), []byte(`{"type":"entry","id":1,"plan":"a","worker":"w1","status":"s","commit":"c","time":"2026-01-01T00:00:00Z","event":"ev-a"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e := Entry{Plan: "b", Worker: "w2", Status: "s", Commit: "c", Time: time.Now(), Event: "ev-b"}
	got, err := AppendAll(root, []Entry{e, e})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].ID != 2 || got[1].ID != 2 {
		t.Errorf("ids %d and %d, want 2 and 2", got[0].ID, got[1].ID)
	}
	data, _ := os.ReadFile(filepath.Join(root, File))
	if n := strings.Count(string(data), "\n"); n != 2 {
		t.Errorf("%d lines, want 2:\n%s", n, data)
	}
	all, err := Load(root)
	if err != nil || len(all) != 2 {
		t.Errorf("Load = %d entries, %v; want 2", len(all), err)
	}
}

func TestCheckAppendOnly(t *testing.T) {
	committed := []byte("{\"a\":1}\n{\"b\":2}\n")
	for _, c := range []struct {
		name, current string
		line          int // 0: accepted
	}{
		{"unchanged", "{\"a\":1}\n{\"b\":2}\n", 0},
		{"appended", "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n", 0},
		{"second line edited", "{\"a\":1}\n{\"b\":9}\n", 2},
		{"first line edited", "{\"a\":0}\n{\"b\":2}\n", 1},
		{"truncated", "{\"a\":1}\n", 2},
	} {
		err := CheckAppendOnly(committed, []byte(c.current))
		if c.line == 0 {
			if err != nil {
				t.Errorf("%s: %v, want accepted", c.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrEdited) || !strings.Contains(err.Error(), fmt.Sprintf("line %d differs", c.line)) {
			t.Errorf("%s: %v, want ErrEdited at line %d", c.name, err, c.line)
		}
	}
	if err := CheckAppendOnly(nil, []byte("{}\n")); err != nil {
		t.Errorf("a ledger not committed yet: %v", err)
	}
}

// A fact is folded into its entry, recorded once per event, and refused
// for an entry that is not there.
func TestFacts(t *testing.T) {
	root := t.TempDir()
	e, _, err := Append(root, Entry{Plan: "a", Worker: "w1", Status: "ok", Commit: "abc", Time: time.Now(), Event: "ev1",
		Attempts: []Attempt{{N: 1, Worker: "w1", Start: time.Now()}}})
	if err != nil {
		t.Fatal(err)
	}
	in := int64(42)
	u := &telemetry.Usage{Source: telemetry.SourceClaudeTranscript, Input: &in}
	for i := 0; i < 2; i++ {
		added, err := AddFact(root, Fact{Type: FactUsage, ID: e.ID, Plan: "a", Event: "idle1", Usage: u, Time: time.Now()})
		if err != nil || added != (i == 0) {
			t.Fatalf("AddFact #%d = %v, %v; want added only the first time", i+1, added, err)
		}
	}
	if _, err := AddFact(root, Fact{Type: FactVerdict, ID: e.ID, Plan: "a", Event: "v1", Status: "refuted", Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := AddFact(root, Fact{Type: FactVerdict, ID: 99, Plan: "a", Event: "v2", Status: "verified"}); !errors.Is(err, ErrNoEntry) {
		t.Errorf("fact for a missing entry: %v, want ErrNoEntry", err)
	}
	if _, err := AddFact(root, Fact{Type: FactUsage, ID: e.ID, Plan: "a", Event: "x"}); !errors.Is(err, ErrBadEntry) {
		t.Errorf("usage fact without usage: %v, want ErrBadEntry", err)
	}
	got, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	g := got[0]
	if g.Usage == nil || *g.Usage.Input != 42 || g.Attempts[0].Usage == nil || g.Verdict != "refuted" {
		t.Errorf("entry after facts = %+v", g)
	}
	data, _ := Read(root)
	if n := strings.Count(string(data), `"type":"usage"`); n != 1 {
		t.Errorf("%d usage records, want 1", n)
	}
}
