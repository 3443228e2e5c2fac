package telemetry

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fixtures in testdata are what the real agents wrote, run against
// internal/modelsim with a fresh HOME (see testdata/README.md):
//   - claude-transcript.jsonl: Claude Code 2.1.332, claude -p on p1, then
//     --resume with p2, then with apierr (an API error: only Claude
//     Code's own <synthetic> message);
//   - codex-rollout.jsonl: Codex 0.171.0, codex exec on p1, then exec
//     resume with p2, then with p1 again (a server reporting cached and
//     cache-write tokens for the last two);
//   - claude-result*.json: what claude -p --output-format json printed.
//
// The others are made from them: claude-copies (every response written
// two more times, the first copy with a partial usage), claude-two-attempts
// (p1's part once more at the end, fresh ids, 10x the output tokens),
// claude-cut-copy / claude-cut-new (p1's part and a last line cut short:
// a copy of a counted response, or a response not seen), codex-cut (p1's
// part and half a token_count line).

// want is a Usage's expected counts; nil for unknown.
type want struct {
	plan, model            string
	in, out, cread, cwrite int64
	messages               int
	missing                string // a part of Missing; "" for none
	nilCounts              bool
}

func check(t *testing.T, u Usage, source string, w want) {
	t.Helper()
	if u.Source != source {
		t.Errorf("source %q; want %q", u.Source, source)
	}
	if err := u.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	if w.missing == "" && u.Missing != "" || !strings.Contains(u.Missing, w.missing) {
		t.Errorf("missing %q; want %q", u.Missing, w.missing)
	}
	if w.nilCounts {
		if u.Input != nil || u.Output != nil || u.CacheRead != nil || u.CacheWrite != nil || u.CostUSD != nil {
			t.Errorf("counts %s; want none (unknown)", show(u))
		}
		if u.Missing == "" {
			t.Error("no counts and no reason")
		}
		return
	}
	got := [4]*int64{u.Input, u.Output, u.CacheRead, u.CacheWrite}
	exp := [4]int64{w.in, w.out, w.cread, w.cwrite}
	for i, name := range []string{"input", "output", "cache read", "cache write"} {
		if got[i] == nil {
			t.Errorf("%s unknown; want %d", name, exp[i])
		} else if *got[i] != exp[i] {
			t.Errorf("%s %d; want %d", name, *got[i], exp[i])
		}
	}
	if u.Plan != w.plan || u.Model != w.model || u.Messages != w.messages {
		t.Errorf("plan %q model %q messages %d; want %q %q %d", u.Plan, u.Model, u.Messages, w.plan, w.model, w.messages)
	}
}

func show(u Usage) string {
	b, _ := json.Marshal(u)
	return string(b)
}

func open(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// Worked out by hand from the fixtures' assistant lines (input_tokens,
// output_tokens, cache_read_input_tokens, cache_creation_input_tokens):
// p1: 3+3+3+3, 46+57+48+10, 0+12271+12376+12497, 9867+41+65+41;
// p2: 3+3+3+3, 46+57+48+10, 0+12679+12785+12905, 12556+41+65+41.
var (
	claudeP1 = want{plan: "p1", model: "claude-opus-5-5", in: 12, out: 161, cread: 37144, cwrite: 10014, messages: 4}
	claudeP2 = want{plan: "p2", model: "claude-opus-5-5", in: 12, out: 161, cread: 38369, cwrite: 12703, messages: 4}
)

func TestClaudeTranscript(t *testing.T) {
	p1Again := claudeP1
	p1Again.out = 1610
	tests := []struct {
		name, file, plan string
		want             want
	}{
		{"first of three plans", "claude-transcript.jsonl", "p1", claudeP1},
		{"second of three plans", "claude-transcript.jsonl", "p2", claudeP2},
		// The API error's only assistant line is Claude Code's own: no
		// response, nothing used.
		{"an API error", "claude-transcript.jsonl", "apierr", want{plan: "apierr"}},
		{"the last plan dispatched", "claude-transcript.jsonl", "", want{plan: "apierr"}},
		{"no dispatch line", "claude-transcript.jsonl", "p3", want{nilCounts: true, missing: "no dispatch line for p3 in the transcript"}},
		{"copies counted once, the last copy's values", "claude-copies.jsonl", "p1", claudeP1},
		{"copies counted once, second plan", "claude-copies.jsonl", "p2", claudeP2},
		{"dispatched again: the last attempt", "claude-two-attempts.jsonl", "p1", p1Again},
		{"dispatched again: the plan between", "claude-two-attempts.jsonl", "p2", claudeP2},
		{"last line cut: a copy of a counted response", "claude-cut-copy.jsonl", "p1", claudeP1},
		{"last line cut: a response not counted", "claude-cut-new.jsonl", "p1",
			want{plan: "p1", model: "claude-opus-5-5", in: 12, out: 161, cread: 37144, cwrite: 10014, messages: 4, missing: "cut short"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, ClaudeTranscript(open(t, tt.file), tt.plan), SourceClaudeTranscript, tt.want)
		})
	}
}

func TestClaudeTranscriptFile(t *testing.T) {
	check(t, ClaudeTranscriptFile(filepath.Join("testdata", "claude-transcript.jsonl"), "p2"), SourceClaudeTranscript, claudeP2)
	u := ClaudeTranscriptFile(filepath.Join(t.TempDir(), "gone.jsonl"), "p1")
	check(t, u, SourceClaudeTranscript, want{nilCounts: true, missing: "transcript unreadable"})
	if u.Plan != "p1" {
		t.Errorf("plan %q; want p1", u.Plan)
	}
	check(t, ClaudeTranscriptFile(t.TempDir(), "p1"), SourceClaudeTranscript, want{nilCounts: true, missing: "not a regular file"})
}

// A dispatch line the agent only read (in a tool result) or quoted in a
// compaction summary starts no part; one in a list of text blocks does.
func TestClaudeTranscriptWhichLinesDispatch(t *testing.T) {
	line := func(v any) string { b, _ := json.Marshal(v); return string(b) + "\n" }
	dispatch := "Read plans/p9/PLAN.md and execute it exactly. First run orch-notify started p9."
	resp := func(id string, out int) string {
		return line(map[string]any{"type": "assistant", "requestId": "req_" + id, "message": map[string]any{
			"id": id, "model": "m", "role": "assistant", "content": []any{},
			"usage": map[string]any{"input_tokens": 1, "output_tokens": out, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}}})
	}
	text := line(map[string]any{"type": "user", "message": map[string]any{"role": "user",
		"content": []any{map[string]any{"type": "text", "text": dispatch}}}})
	toolResult := line(map[string]any{"type": "user", "message": map[string]any{"role": "user",
		"content": []any{map[string]any{"type": "tool_result", "content": dispatch}}}})
	summary := line(map[string]any{"type": "user", "isCompactSummary": true, "message": map[string]any{"role": "user", "content": dispatch}})
	transcript := text + resp("a", 10) + toolResult + resp("b", 20) + summary + resp("c", 40)
	check(t, ClaudeTranscript(strings.NewReader(transcript), "p9"), SourceClaudeTranscript,
		want{plan: "p9", model: "m", in: 3, out: 70, messages: 3})
}

func TestClaudeTranscriptUnreadable(t *testing.T) {
	u := ClaudeTranscript(errReader{}, "p1")
	check(t, u, SourceClaudeTranscript, want{nilCounts: true, missing: "transcript unreadable: disk gone"})
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("disk gone") }

// Worked out by hand from the rollout's token_count totals (input,
// cached, cache write, output): before p1 nothing; after p1 (39068, 0,
// 0, 215); after p2 (80062, 16000, 0, 433); after p1 again (122978,
// 32000, 4000, 651). Input is input_tokens less cached and cache write.
func TestCodexRollout(t *testing.T) {
	tests := []struct {
		name, file, plan string
		want             want
	}{
		// p1's last attempt: 122978-80062 = 42916 in, of it 16000 cached
		// and 4000 written; 651-433 output.
		{"dispatched again: the last attempt", "codex-rollout.jsonl", "p1",
			want{plan: "p1", model: "gpt-5.5", in: 42916 - 16000 - 4000, out: 218, cread: 16000, cwrite: 4000, messages: 4}},
		{"the plan between", "codex-rollout.jsonl", "p2",
			want{plan: "p2", model: "gpt-5.5", in: 80062 - 39068 - 16000, out: 433 - 215, cread: 16000, messages: 4}},
		{"the last plan dispatched", "codex-rollout.jsonl", "",
			want{plan: "p1", model: "gpt-5.5", in: 22916, out: 218, cread: 16000, cwrite: 4000, messages: 4}},
		{"no dispatch line", "codex-rollout.jsonl", "p3", want{nilCounts: true, missing: "no dispatch line for p3 in the rollout"}},
		{"last line cut", "codex-cut.jsonl", "p1",
			want{plan: "p1", model: "gpt-5.5", in: 39068, out: 215, messages: 4, missing: "cut short"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, CodexRollout(open(t, tt.file), tt.plan), SourceCodexRollout, tt.want)
		})
	}
	check(t, CodexRollout(errReader{}, "p1"), SourceCodexRollout, want{nilCounts: true, missing: "rollout unreadable: disk gone"})
}

func TestCodexRolloutFile(t *testing.T) {
	check(t, CodexRolloutFile(filepath.Join("testdata", "codex-rollout.jsonl"), "p2"), SourceCodexRollout,
		want{plan: "p2", model: "gpt-5.5", in: 24994, out: 218, cread: 16000, messages: 4})
	check(t, CodexRolloutFile(filepath.Join(t.TempDir(), "gone.jsonl"), "p2"), SourceCodexRollout, want{nilCounts: true, missing: "rollout unreadable"})
}

// A file over the bound is read from its last bytes: a part whose
// dispatch line is there is counted; a baseline that is not is missing.
func TestTailRead(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "codex-rollout.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	const max = 1 << 20
	pad := strings.Repeat(`{"type":"padding","payload":{}}`+"\n", max/32+1)
	path := filepath.Join(t.TempDir(), "rollout.jsonl")
	if err := os.WriteFile(path, append([]byte(pad), data...), 0o644); err != nil {
		t.Fatal(err)
	}
	check(t, codexRolloutFile(path, "p2", max), SourceCodexRollout,
		want{plan: "p2", model: "gpt-5.5", in: 24994, out: 218, cread: 16000, messages: 4})
	check(t, codexRolloutFile(path, "p3", max), SourceCodexRollout, want{nilCounts: true, missing: "no dispatch line for p3 in the last 1 MiB of the rollout"})
	// p1's first attempt begins the thread: with the start not read, its
	// baseline is unknown (its last attempt is counted as usual).
	lines := strings.SplitAfter(string(data), "\n")
	if err := os.WriteFile(path, []byte(pad+strings.Join(lines[:29], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	check(t, codexRolloutFile(path, "p1", max), SourceCodexRollout, want{nilCounts: true, missing: "no token count before p1's dispatch line"})
}

func TestFindCodexRollout(t *testing.T) {
	home := t.TempDir()
	const id = "01a24278-7b92-7780-8ef1-45cfe046725f"
	mk := func(rel string) string {
		p := filepath.Join(home, "sessions", rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk("2026/11/30/rollout-2026-11-30T10-00-00-0000aaaa-0000-0000-0000-000000000000.jsonl")
	want := mk("2026/12/01/rollout-2026-12-01T09-12-01-" + id + ".jsonl")
	mk("2026/12/04/rollout-2026-12-04T19-12-01-0000bbbb-0000-0000-0000-000000000000.jsonl")
	got, err := FindCodexRollout(home, id)
	if err != nil || got != want {
		t.Errorf("FindCodexRollout = %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"0000cccc-0000-0000-0000-000000000000", "../../etc", "*", ""} {
		if got, err := FindCodexRollout(home, bad); !errors.Is(err, ErrNoRollout) {
			t.Errorf("FindCodexRollout(%q) = %q, %v; want ErrNoRollout", bad, got, err)
		}
	}
}

func TestClaudeResult(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "claude-result.json"))
	if err != nil {
		t.Fatal(err)
	}
	u := ClaudeResult(data)
	check(t, u, SourceClaudeResult, want{model: "claude-opus-5-5", in: 12, out: 161, cread: 37144, cwrite: 10014})
	if u.CostUSD == nil || *u.CostUSD != 0.06076680000000001 {
		t.Errorf("cost %v; want 0.06076680000000001", u.CostUSD)
	}
	// An API error after a --resume: nothing used this run; the cost is
	// the session's, earlier runs included.
	data, err = os.ReadFile(filepath.Join("testdata", "claude-result-apierror.json"))
	if err != nil {
		t.Fatal(err)
	}
	u = ClaudeResult(data)
	check(t, u, SourceClaudeResult, want{model: "claude-opus-5-5"})
	if u.CostUSD == nil || *u.CostUSD != 0.1352236 {
		t.Errorf("cost %v; want 0.1352236", u.CostUSD)
	}
	for _, bad := range []string{"", "Finished p1.", `{"type":"assistant"}`, `[1]`} {
		check(t, ClaudeResult([]byte(bad)), SourceClaudeResult, want{nilCounts: true, missing: "not a claude -p --output-format json result"})
	}
	u = ClaudeResult([]byte(`{"type":"result","total_cost_usd":0.5}`))
	if u.CostUSD == nil || *u.CostUSD != 0.5 || u.Input != nil || u.Missing != "the result states no token usage" {
		t.Errorf("cost only: %s", show(u))
	}
}

func TestUsageCheck(t *testing.T) {
	neg, cost := int64(-1), -0.5
	for _, u := range []Usage{
		{Source: "estimate"},
		{Source: ""},
		{Source: SourceCodexRollout, Input: &neg},
		{Source: SourceCodexRollout, CacheWrite: &neg},
		{Source: SourceClaudeResult, CostUSD: &cost},
		{Source: SourceClaudeTranscript, Messages: -2},
	} {
		if err := u.Check(); !errors.Is(err, ErrBadUsage) {
			t.Errorf("Check(%s) = %v; want ErrBadUsage", show(u), err)
		}
	}
}

// The fields others build on keep their JSON names.
func TestUsageJSON(t *testing.T) {
	n, c := int64(7), 0.25
	b, err := json.Marshal(Usage{Source: SourceClaudeResult, Model: "m", Input: &n, Output: &n, CacheRead: &n, CacheWrite: &n, CostUSD: &c, Messages: 1, Missing: "x"})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"source":"claude-result","model":"m","input_tokens":7,"output_tokens":7,"cache_read_tokens":7,"cache_write_tokens":7,"cost_usd":0.25,"messages":1,"missing":"x"}`
	if string(b) != want {
		t.Errorf("JSON %s; want %s", b, want)
	}
}
