package event

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nkeys"

	"github.com/orch-dev/orch/telemetry"
)

func TestClean(t *testing.T) {
	long := strings.Repeat("é", MaxStatus) // 2 bytes a rune
	tests := []struct {
		name, in, want string
	}{
		{"plain", "all 12 tests pass", "all 12 tests pass"},
		{"newline", "a\nb", `a\nb`},
		{"escape sequence", "\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"carriage return and bell", "a\rb\a", `a\x0db\x07`},
		{"C1 control", "a\u009bb", `a\u009bb`},
		{"invalid UTF-8", "a\xffb", `a\xffb`},
		{"tab", "a\tb", `a\tb`},
		{"DEL", "a\x7fb", `a\x7fb`},
		// Invisible characters that change how a line reads, to a person
		// (bidi overrides) or to an agent that reads it (tag characters
		// spell hidden text): a worker's status reaches the lead agent.
		{"bidi override", "ok\u202egnp.exe", `ok\u202egnp.exe`},
		{"zero width and separators", "a\u200bb\u2028c\u2029d", `a\u200bb\u2028c\u2029d`},
		{"tag characters", "ok\U000E0069\U000E0067", `ok\ue0069\ue0067`},
		{"unicode kept", "naïve café ✓", "naïve café ✓"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Clean(tc.in); got != tc.want {
				t.Errorf("Clean(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	t.Run("long text is cut at a rune boundary and marked", func(t *testing.T) {
		got := Clean(long)
		if len(got) > MaxStatus || !strings.HasSuffix(got, TruncMarker) || !utf8.ValidString(got) {
			t.Errorf("Clean(long): len %d, marked %v, valid %v", len(got), strings.HasSuffix(got, TruncMarker), utf8.ValidString(got))
		}
	})
	t.Run("idempotent", func(t *testing.T) {
		for _, in := range []string{"a\nb\x1b", `a\nb`, long, "x\\y"} {
			once := Clean(in)
			if twice := Clean(once); twice != once {
				t.Errorf("Clean(Clean(%q)) = %q, want %q", in, twice, once)
			}
		}
	})
}

func TestParseRejects(t *testing.T) {
	ok := New(Done, "p", "fine", "w1", "h")
	tests := []struct {
		name string
		mut  func(e *Event)
	}{
		{"unknown kind", func(e *Event) { e.Kind = "exploded" }},
		{"short id", func(e *Event) { e.ID = "abc" }},
		{"id with capitals", func(e *Event) { e.ID = "ABCDEFGHIJ" }},
		{"no plan", func(e *Event) { e.Plan = "" }},
		{"no time", func(e *Event) { e.Time = time.Time{} }},
		{"bad worker", func(e *Event) { e.Worker = "w1;rm" }},
		{"future schema", func(e *Event) { e.V = 99 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := ok
			tc.mut(&e)
			if _, err := Parse(e.Marshal()); !errors.Is(err, ErrMalformed) {
				t.Errorf("Parse = %v, want ErrMalformed", err)
			}
		})
	}
	if _, err := Parse([]byte("{not json")); !errors.Is(err, ErrMalformed) {
		t.Errorf("Parse(garbage) = %v, want ErrMalformed", err)
	}
	got, err := Parse(ok.Marshal())
	if err != nil || got.ID != ok.ID || got.Status != "fine" {
		t.Errorf("Parse(valid) = %+v, %v", got, err)
	}
}

func TestParseCleansStatus(t *testing.T) {
	e := New(Done, "p", "", "w1", "h")
	e.Status = "a\x1b[2Jb" // a sender that did not clean
	got, err := Parse(e.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != `a\x1b[2Jb` {
		t.Errorf("status = %q, want it escaped", got.Status)
	}
}

func TestValidWorker(t *testing.T) {
	for id, want := range map[string]bool{"w1": true, "w12": true, "w9999": true, "w0": false, "w01": false, "w": false, "x1": false, "w1a": false, "w12345": false, "": false} {
		if got := ValidWorker(id); got != want {
			t.Errorf("ValidWorker(%q) = %v, want %v", id, got, want)
		}
	}
}

func testSigner(t *testing.T, by string) (SpoolSigner, string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	return SpoolSigner{By: by, Sign: kp.Sign}, pub
}

func TestSpoolRoundTripOldestFirst(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	sg, pub := testSigner(t, "w1")
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var ids []string
	for i, off := range []int{3, 1, 2} {
		e := New(Done, "p", "s", "w1", "h")
		e.Time = base.Add(time.Duration(off) * time.Second)
		if _, err := WriteSpool(dir, e, sg); err != nil {
			t.Fatal(err)
		}
		_ = i
		ids = append(ids, e.ID)
	}
	// A writer's temporary file and a garbage file.
	os.WriteFile(filepath.Join(dir, ".tmp-123"), []byte("half"), 0o600)
	os.WriteFile(filepath.Join(dir, "junk.json"), []byte("nope"), 0o600)
	good, bad, err := ReadSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(good) != 3 || len(bad) != 1 {
		t.Fatalf("good %d bad %d, want 3 and 1", len(good), len(bad))
	}
	want := []string{ids[1], ids[2], ids[0]}
	for i, s := range good {
		if s.Event.ID != want[i] {
			t.Errorf("position %d: %s, want %s", i, s.Event.ID, want[i])
		}
		if err := s.Verify(pub); s.By != "w1" || err != nil {
			t.Errorf("position %d: signed by %q, verify: %v", i, s.By, err)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("spool dir mode: %v %v, want 0700", fi.Mode().Perm(), err)
	}
}

// A spool file proves who wrote it: changed after signing, signed with
// another key, or not signed at all, it is refused with its own error.
func TestSpoolSignature(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	sg, pub := testSigner(t, "w1")
	_, otherPub := testSigner(t, "w2")
	e := New(Done, "p", "ok", "w1", "h")
	path, err := WriteSpool(dir, e, sg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ReadSpoolFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(pub); err != nil {
		t.Errorf("its own key: %v", err)
	}
	if err := s.Verify(otherPub); !errors.Is(err, ErrBadSignature) {
		t.Errorf("another key: %v, want ErrBadSignature", err)
	}
	data, _ := os.ReadFile(path)
	edited := strings.Replace(string(data), `\"status\":\"ok\"`, `\"status\":\"OK\"`, 1)
	edited = strings.Replace(edited, `"status":"ok"`, `"status":"OK"`, 1)
	if edited == string(data) {
		t.Fatalf("the test did not change the file: %s", data)
	}
	os.WriteFile(path, []byte(edited), 0o600)
	if s, err := ReadSpoolFile(path); err != nil {
		t.Fatal(err)
	} else if err := s.Verify(pub); !errors.Is(err, ErrBadSignature) {
		t.Errorf("edited: %v, want ErrBadSignature", err)
	}
	os.WriteFile(path, append(e.Marshal(), '\n'), 0o600)
	if _, err := ReadSpoolFile(path); !errors.Is(err, ErrUnsigned) || !strings.Contains(err.Error(), "a bare event") {
		t.Errorf("bare event: %v, want ErrUnsigned naming a bare event", err)
	}
	if _, err := WriteSpool(dir, e, SpoolSigner{}); !errors.Is(err, ErrNotKept) {
		t.Errorf("no signer: %v, want ErrNotKept", err)
	}
}

// A name set aside before is kept; the newcomer gets a numbered name.
func TestSetAsideKeepsEarlier(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.json")
	for _, body := range []string{"one", "two"} {
		os.WriteFile(path, []byte(body), 0o600)
		if _, err := SetAside(path, errors.New("why "+body)); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{"x.json": "one", "x.json.2": "two", "x.json.2.why": "why two\n"} {
		if got, _ := os.ReadFile(filepath.Join(dir, Rejected, name)); string(got) != want {
			t.Errorf("%s holds %q, want %q", name, got, want)
		}
	}
}

func TestDispatchedPlan(t *testing.T) {
	for text, want := range map[string]string{
		"Read plans/fix-auth/PLAN.md and execute it exactly. First run orch-notify started fix-auth.":         "fix-auth",
		"noise Read plans/a b/PLAN.md and execute it exactly. Read plans/b.2/PLAN.md and execute it exactly.": "b.2",
		"Read plans/../PLAN.md and execute it exactly.":                                                       "",
		"Read plans/x/PLAN.md and do something else.":                                                         "",
		"yes, go on": "",
		"":           "",
	} {
		if got := DispatchedPlan(text); got != want {
			t.Errorf("DispatchedPlan(%q) = %q; want %q", text, got, want)
		}
	}
}

func TestUsage(t *testing.T) {
	n, neg := int64(12), int64(-3)
	good := func() *telemetry.Usage {
		return &telemetry.Usage{Source: telemetry.SourceClaudeTranscript, Plan: "p", Model: "claude-opus-5-5", Input: &n, Output: &n, Messages: 2}
	}
	for _, k := range []Kind{Idle, Done, Failed} {
		e := New(k, "p", "", "w1", "h")
		e.Usage = good()
		got, err := Parse(e.Marshal())
		if err != nil {
			t.Fatalf("%s with usage: %v", k, err)
		}
		if got.Usage == nil || *got.Usage.Input != 12 || got.Usage.Model != "claude-opus-5-5" || got.Usage.Messages != 2 {
			t.Errorf("%s: usage %+v after a round trip", k, got.Usage)
		}
	}
	tests := []struct {
		name, why string
		kind      Kind
		mut       func(u *telemetry.Usage)
	}{
		{"on a started event", "usage on a started event", Started, func(*telemetry.Usage) {}},
		{"on a blocked event", "usage on a blocked event", Blocked, func(*telemetry.Usage) {}},
		{"a negative count", "input_tokens is -3", Idle, func(u *telemetry.Usage) { u.Input = &neg }},
		{"a negative cache count", "cache_write_tokens is -3", Done, func(u *telemetry.Usage) { u.CacheWrite = &neg }},
		{"a made-up source", `unknown source "guess"`, Idle, func(u *telemetry.Usage) { u.Source = "guess" }},
		{"no source", `unknown source ""`, Idle, func(u *telemetry.Usage) { u.Source = "" }},
		{"a bad plan name", `usage of plan "../x"`, Idle, func(u *telemetry.Usage) { u.Plan = "../x" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := New(tc.kind, "p", "", "w1", "h")
			e.Usage = good()
			tc.mut(e.Usage)
			_, err := Parse(e.Marshal())
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("Parse = %v; want ErrMalformed saying %q", err, tc.why)
			}
		})
	}
	// Text from a transcript reaches the screen only escaped.
	e := New(Idle, "p", "", "w1", "h")
	e.Usage = good()
	e.Usage.Model, e.Usage.Missing = "m\x1b[2J", "cut\nshort"
	got, err := Parse(e.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if got.Usage.Model != `m\x1b[2J` || got.Usage.Missing != `cut\nshort` {
		t.Errorf("model %q missing %q; want them escaped", got.Usage.Model, got.Usage.Missing)
	}
}
