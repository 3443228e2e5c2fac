// Package telemetry reads what a coding agent itself recorded about the
// tokens it used (and, where the agent states one, the cost): Claude
// Code's transcript, Codex's session rollout, and the result object of
// claude -p --output-format json. Counts are the agent's own, never
// estimated; what cannot be read is reported as missing, never as 0.
//
// One agent session runs many plans one after another, so a transcript or
// rollout is cut into segments at the dispatch lines orch types ("Read
// plans/<plan>/PLAN.md and execute it exactly."): a plan's attempt is the
// part from the last dispatch line naming it to the next one naming
// another plan, or to the end.
package telemetry

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// Usage is what one plan attempt's agent used, as the agent recorded it.
// A nil count is unknown (not recorded, or unreadable): Missing then says
// why. Cost is set only when the agent itself stated it.
//
// Input counts the input tokens neither read from nor written to a prompt
// cache, so that Input+CacheRead+CacheWrite is all the input, from every
// source (Anthropic's input_tokens already means that; Codex's counts the
// cached tokens in, and they are taken out, see CodexRollout).
type Usage struct {
	// Source is where the numbers were read: SourceClaudeTranscript,
	// SourceCodexRollout or SourceClaudeResult.
	Source string `json:"source"`
	// Plan is the plan whose part of a transcript or rollout was read
	// ("" for a ClaudeResult, which is one process's whole run).
	Plan string `json:"plan,omitempty"`
	// Model is the model the agent named; several are joined by ", ".
	Model      string   `json:"model,omitempty"`
	Input      *int64   `json:"input_tokens,omitempty"`
	Output     *int64   `json:"output_tokens,omitempty"`
	CacheRead  *int64   `json:"cache_read_tokens,omitempty"`
	CacheWrite *int64   `json:"cache_write_tokens,omitempty"`
	CostUSD    *float64 `json:"cost_usd,omitempty"`
	// Messages counts the model responses counted (after dropping copies).
	Messages int `json:"messages,omitempty"`
	// Missing says what could not be read and why ("" when nothing is
	// missing). A Usage with no counts at all and a reason is "missing".
	Missing string `json:"missing,omitempty"`
}

// Sources of a Usage.
const (
	SourceClaudeTranscript = "claude-transcript"
	SourceCodexRollout     = "codex-rollout"
	SourceClaudeResult     = "claude-result"
)

// MaxFile bounds what is read of a transcript or rollout: of a larger
// file only the last MaxFile bytes are read (a plan's part is at its end).
const MaxFile = 64 << 20

// Check reports what is wrong with u, if anything: an unknown source, a
// negative count or cost.
func (u Usage) Check() error {
	switch u.Source {
	case SourceClaudeTranscript, SourceCodexRollout, SourceClaudeResult:
	default:
		return fmt.Errorf("%w: unknown source %q", ErrBadUsage, u.Source)
	}
	for _, c := range []struct {
		name string
		n    *int64
	}{{"input_tokens", u.Input}, {"output_tokens", u.Output}, {"cache_read_tokens", u.CacheRead}, {"cache_write_tokens", u.CacheWrite}} {
		if c.n != nil && *c.n < 0 {
			return fmt.Errorf("%w: %s is %d", ErrBadUsage, c.name, *c.n)
		}
	}
	if u.CostUSD != nil && (*u.CostUSD < 0 || math.IsNaN(*u.CostUSD) || math.IsInf(*u.CostUSD, 0)) {
		return fmt.Errorf("%w: cost_usd is %v", ErrBadUsage, *u.CostUSD)
	}
	if u.Messages < 0 {
		return fmt.Errorf("%w: messages is %d", ErrBadUsage, u.Messages)
	}
	return nil
}

// missing is a Usage that could not be read at all.
func missing(source, plan, why string) Usage {
	return Usage{Source: source, Plan: plan, Missing: why}
}

// counts is a running sum of token counts.
type counts struct{ input, output, cacheRead, cacheWrite int64 }

func (c counts) minus(d counts) counts {
	return counts{c.input - d.input, c.output - d.output, c.cacheRead - d.cacheRead, c.cacheWrite - d.cacheWrite}
}

// set fills u's counts from c.
func (c counts) set(u *Usage) {
	u.Input, u.Output, u.CacheRead, u.CacheWrite = ptr(c.input), ptr(c.output), ptr(c.cacheRead), ptr(c.cacheWrite)
}

func ptr[T any](v T) *T { return &v }

// models collects model names in the order first seen.
type models []string

func (m *models) add(name string) {
	if name == "" {
		return
	}
	for _, n := range *m {
		if n == name {
			return
		}
	}
	*m = append(*m, name)
}

func (m models) String() string { return strings.Join(m, ", ") }

// Dispatch lines: what orch types to hand a worker a plan.
const dispatchPre, dispatchPost = "Read plans/", "/PLAN.md and execute it exactly."

// dispatched returns the plans whose dispatch lines text holds, in order.
// (event.DispatchedPlan is the same rule for one plan; event imports this
// package, so the rule is repeated here.)
func dispatched(text string) []string {
	var out []string
	for {
		i := strings.Index(text, dispatchPre)
		if i < 0 {
			return out
		}
		text = text[i+len(dispatchPre):]
		name, _, ok := strings.Cut(text, dispatchPost)
		if ok && planName(name) {
			out = append(out, name)
			text = text[len(name)+len(dispatchPost):]
		}
	}
}

// planName is the contract's plan name rule (event.CheckPlanName).
func planName(s string) bool {
	if s == "" || len(s) > 63 || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// segmenter tracks which plan's part of a session a line is in.
type segmenter struct {
	plan string // the plan asked about; "" until known when asked for the last one
	last bool   // asked for the last plan dispatched
	in   bool   // inside plan's part
}

// turn is called for each user input that names plans; it reports
// whether a new part for the asked plan starts here (counts restart).
func (s *segmenter) turn(plans []string) (start bool) {
	if len(plans) == 0 {
		return false
	}
	s.in = s.starts(plans)
	if s.in && s.last {
		s.plan = plans[len(plans)-1]
	}
	return s.in
}

// starts says whether a user input naming plans starts a part for the
// asked plan: it does not depend on the lines before.
func (s segmenter) starts(plans []string) bool {
	return len(plans) > 0 && (s.last || slices.Contains(plans, s.plan))
}

// lines calls fn for every complete line of r, and for a last line with
// no newline, with cut set (an agent may be writing it). skipFirst drops
// the first line (a tail read starts inside one). A line is given in a
// buffer reused for the next one: fn must not keep it.
func lines(r io.Reader, skipFirst bool, fn func(line []byte, cut bool)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte // a line longer than br's buffer, put together
	first := true
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long[:0], line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if len(line) > 0 {
			complete := line[len(line)-1] == '\n'
			if !(first && skipFirst) {
				if t := bytes.TrimSpace(line); len(t) > 0 {
					fn(t, !complete)
				}
			}
			first = false
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// linesBack calls fn for the complete lines of r's bytes [lo, hi), the
// last first, each as lines gives it, with the offset its line starts at,
// until fn returns false. The bytes after the last newline (a line being
// written) are not a line here, and with skipFirst neither is the first.
// A line is given in a buffer reused for the next one.
func linesBack(r io.ReaderAt, lo, hi int64, skipFirst bool, fn func(line []byte, at int64) bool) error {
	const chunk = 64 << 10
	var buf, spare []byte // buf holds r's bytes [off, off+len(buf))
	off := hi
	// prev returns the offset of the last newline before end, or lo-1,
	// reading what is before buf as needed.
	prev := func(end int64) (int64, error) {
		for {
			if i := bytes.LastIndexByte(buf[:end-off], '\n'); i >= 0 {
				return off + int64(i), nil
			}
			if off == lo {
				return lo - 1, nil
			}
			n := int64(max(chunk, len(buf))) // doubles for a long line
			n = min(n, off-lo)
			keep := end - off
			if int64(cap(spare)) < n+keep {
				spare = make([]byte, 0, 2*(n+keep))
			}
			next := spare[:n+keep]
			copy(next[n:], buf[:keep])
			if _, err := r.ReadAt(next[:n], off-n); err != nil {
				return 0, err
			}
			buf, spare, off = next, buf[:0], off-n
		}
	}
	nl, err := prev(hi)
	for err == nil && nl >= lo {
		var start int64
		if start, err = prev(nl); err != nil {
			break
		}
		start++
		if start == lo && skipFirst {
			return nil
		}
		if line := bytes.TrimSpace(buf[start-off : nl+1-off]); len(line) > 0 && !fn(line, start) {
			return nil
		}
		nl = start - 1
	}
	return err
}

// mayHold says whether a JSON line may hold s (ASCII) in one of its
// strings, as decoded, without decoding it: s as written, or an escape
// that could stand for a character of it.
func mayHold(line []byte, s string) bool {
	return bytes.Contains(line, []byte(s)) || escapesASCII(line)
}

// escapesASCII says whether line may hold a JSON escape of a printable
// ASCII character (\/ or \u0020 to \u007f), which may spell a key word
// without its letters in a row (an escaped backslash before "u0041" is
// taken for one too: reading a line for nothing costs only time). Claude
// Code and Codex escape only quotes, backslashes and control characters
// (\u001b), so this is rare.
func escapesASCII(line []byte) bool {
	if bytes.Contains(line, []byte(`\/`)) {
		return true
	}
	for {
		i := bytes.Index(line, []byte(`\u00`))
		if i < 0 || i+4 >= len(line) {
			return false
		}
		if c := line[i+4]; c >= '2' && c <= '7' {
			return true
		}
		line = line[i+4:]
	}
}

// openTail opens a regular file for reading at most max bytes of its
// end: the bytes [lo, hi), hi its size when opened; lo > 0 says the start
// was not read. f is at lo.
func openTail(path string, max int64) (f *os.File, lo, hi int64, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, 0, err
	}
	if !fi.Mode().IsRegular() {
		// A FIFO would block the reader (and a hook must never hang).
		return nil, 0, 0, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	f, err = os.Open(path)
	if err != nil {
		return nil, 0, 0, err
	}
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, 0, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	hi = fi.Size()
	if hi > max {
		lo = hi - max
		if _, err := f.Seek(lo, io.SeekStart); err != nil {
			f.Close()
			return nil, 0, 0, err
		}
	}
	return f, lo, hi, nil
}
