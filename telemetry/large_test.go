package telemetry

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// large writes dir/name: copies of fixture's lines (whole sessions, dispatch
// lines and all) until the file is over size, then fixture itself, so that
// the part a plan's last attempt takes is at the end, as in a long pane
// session.
func large(tb testing.TB, dir, fixture string, size int) string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", fixture))
	if err != nil {
		tb.Fatal(err)
	}
	pad, err := os.ReadFile(filepath.Join("testdata", padFor(fixture)))
	if err != nil {
		tb.Fatal(err)
	}
	n := (size - len(data)) / len(pad)
	if n < 1 {
		n = 1
	}
	path := filepath.Join(dir, fixture)
	if err := os.WriteFile(path, append(bytes.Repeat(pad, n), data...), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// padFor is the complete session whose copies go before fixture.
func padFor(fixture string) string {
	if fixture[:5] == "codex" {
		return "codex-rollout.jsonl"
	}
	return "claude-transcript.jsonl"
}

// A plan's part at the end of a large file reads as it does in the small
// one, from the file (which looks for the part's start from the end) and
// from a reader (which reads every line), with the whole file read and
// with only its tail. codex-cut is a thread's start alone: after another
// session its totals go down, and the file must say so as the reader does.
func TestLargeFile(t *testing.T) {
	tests := []struct {
		fixture string
		plans   []string
		small   func(*os.File, string) Usage
		file    func(path, plan string, max int64) Usage
		reader  func(*os.File, string, bool, int64) Usage
	}{
		{"claude-transcript.jsonl", []string{"p1", "p2", "apierr", "", "p3"}, claudeSmall, claudeTranscriptFile, claudeReader},
		{"claude-copies.jsonl", []string{"p1", "p2", ""}, claudeSmall, claudeTranscriptFile, claudeReader},
		{"claude-two-attempts.jsonl", []string{"p1", "p2", ""}, claudeSmall, claudeTranscriptFile, claudeReader},
		{"claude-cut-copy.jsonl", []string{"p1", ""}, claudeSmall, claudeTranscriptFile, claudeReader},
		{"claude-cut-new.jsonl", []string{"p1", ""}, claudeSmall, claudeTranscriptFile, claudeReader},
		{"codex-rollout.jsonl", []string{"p1", "p2", "", "p3"}, codexSmall, codexRolloutFile, codexReader},
		{"codex-cut.jsonl", []string{"p1", ""}, nil, codexRolloutFile, codexReader},
	}
	dir := t.TempDir()
	const big = 4 << 20
	for _, tt := range tests {
		path := large(t, dir, tt.fixture, big)
		for _, plan := range tt.plans {
			t.Run(tt.fixture+"/"+plan, func(t *testing.T) {
				for _, max := range []int64{MaxFile, 1 << 20} {
					f, err := os.Open(path)
					if err != nil {
						t.Fatal(err)
					}
					want := tt.reader(f, plan, max < big, max)
					f.Close()
					if got := tt.file(path, plan, max); !reflect.DeepEqual(got, want) {
						t.Errorf("last %s read: file %s; reader %s", size(max), show(got), show(want))
					}
					if tt.small == nil || plan == "p3" {
						// p3 is never dispatched: missing, in words that
						// say how much was read.
						continue
					}
					if small := tt.small(open(t, tt.fixture), plan); !reflect.DeepEqual(want, small) {
						t.Errorf("last %s read: %s; the small file %s", size(max), show(want), show(small))
					}
				}
			})
		}
	}
}

// A user message whose dispatch line is written with escapes is found
// from the end as when every line is read.
func TestCodexRolloutEscapedDispatch(t *testing.T) {
	total := func(in, out int) string {
		return fmt.Sprintf(`{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":%d,"output_tokens":%d}}}}`+"\n", in, out)
	}
	rollout := `{"type":"turn_context","payload":{"model":"m"}}` + "\n" + total(10, 1) +
		`{"type":"event_msg","payload":{"type":"user_message","message":"Read plans\/p9\/PLAN.md and execute it exactly."}}` + "\n" +
		total(30, 4) + `{"type":"event_msg","payload":{"type":"user_\u006dessage","message":"Read plans/p8/PLAN.md and execute it exactly."}}` + "\n" + total(70, 9)
	path := filepath.Join(t.TempDir(), "rollout.jsonl")
	if err := os.WriteFile(path, []byte(rollout), 0o644); err != nil {
		t.Fatal(err)
	}
	check(t, CodexRolloutFile(path, "p9"), SourceCodexRollout, want{plan: "p9", model: "m", in: 20, out: 3, messages: 1})
	check(t, CodexRolloutFile(path, ""), SourceCodexRollout, want{plan: "p8", model: "m", in: 40, out: 5, messages: 1})
	check(t, CodexRollout(strings.NewReader(rollout), ""), SourceCodexRollout, want{plan: "p8", model: "m", in: 40, out: 5, messages: 1})
}

func claudeSmall(f *os.File, plan string) Usage { return ClaudeTranscript(f, plan) }
func codexSmall(f *os.File, plan string) Usage  { return CodexRollout(f, plan) }

// claudeReader and codexReader read f from where the file functions
// would start (its last max bytes) and on to its end, line by line.
func claudeReader(f *os.File, plan string, tail bool, max int64) Usage {
	seekTail(f, max)
	return claudeTranscript(f, plan, tail, tail, max)
}

func codexReader(f *os.File, plan string, tail bool, max int64) Usage {
	seekTail(f, max)
	return codexRollout(f, plan, tail, tail, max)
}

func seekTail(f *os.File, max int64) {
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		f.Seek(fi.Size()-max, 0)
	}
}

// A 64 MiB transcript (the most read of one) whose last plan's part is
// its last lines, read as orch-notify reads it at a Stop hook ("file");
// for a plan never dispatched (every line read, twice: from the end, then
// on); and through a reader (every line read once).
func BenchmarkClaudeTranscriptLarge(b *testing.B) {
	path := large(b, b.TempDir(), "claude-transcript.jsonl", MaxFile)
	benchLarge(b, path, "apierr", ClaudeTranscriptFile, ClaudeTranscript)
}

// The same for a 64 MiB Codex rollout (plan p1's last attempt at its end).
func BenchmarkCodexRolloutLarge(b *testing.B) {
	path := large(b, b.TempDir(), "codex-rollout.jsonl", MaxFile)
	benchLarge(b, path, "p1", CodexRolloutFile, CodexRollout)
}

func benchLarge(b *testing.B, path, last string, file func(path, plan string) Usage, reader func(io.Reader, string) Usage) {
	b.Run("file", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if u := file(path, ""); u.Plan != last || u.Missing != "" {
				b.Fatalf("read %s", show(u))
			}
		}
	})
	b.Run("no-dispatch", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if u := file(path, "p3"); u.Input != nil {
				b.Fatalf("read %s", show(u))
			}
		}
	})
	b.Run("reader", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			u := reader(f, "")
			f.Close()
			if u.Plan != last || u.Missing != "" {
				b.Fatalf("read %s", show(u))
			}
		}
	})
}
