package telemetry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// codexLine is the part of a Codex rollout line read here (Codex 0.171:
// {"timestamp", "type", "payload"} a line).
type codexLine struct {
	Type    string `json:"type"`
	Payload struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`    // response_item message
		Content json.RawMessage `json:"content"` // response_item message
		Message string          `json:"message"` // event_msg user_message
		Model   string          `json:"model"`   // turn_context
		Info    *struct {
			Total codexTotal `json:"total_token_usage"`
		} `json:"info"` // event_msg token_count; null before the first response
	} `json:"payload"`
}

// codexTotal is Codex's running token count of a thread. Codex counts
// input the way the Responses API does: input_tokens is all the input,
// cached_input_tokens (read from the prompt cache) and
// cache_write_input_tokens are part of it, and total_tokens is
// input_tokens + output_tokens. Found from Codex 0.171.0 itself, against
// a server that reported cached tokens: its rollout kept the server's
// input_tokens unchanged with cached_input_tokens beside it, and the
// "tokens used" it printed was total_tokens - cached_input_tokens (its
// non-cached input plus output). reasoning_output_tokens are part of
// output_tokens.
type codexTotal struct {
	Input      int64 `json:"input_tokens"`
	Cached     int64 `json:"cached_input_tokens"`
	CacheWrite int64 `json:"cache_write_input_tokens"`
	Output     int64 `json:"output_tokens"`
}

func (t codexTotal) counts() counts {
	return counts{input: t.Input - t.Cached - t.CacheWrite, output: t.Output, cacheRead: t.Cached, cacheWrite: t.CacheWrite}
}

// CodexRollout reads a Codex session rollout (the JSONL file under
// $CODEX_HOME/sessions/YYYY/MM/DD/) and works out what plan's attempt
// used: Codex records running totals (token_count events), so the
// attempt's usage is the total at the end of its part minus the total
// just before it began (its part: from the user message holding plan's
// dispatch line to the next one dispatching another plan). Input is the
// input neither read from nor written to the cache (see codexTotal). With
// plan "" the last plan dispatched is read.
func CodexRollout(r io.Reader, plan string) Usage {
	return codexRollout(r, plan, false, false, MaxFile)
}

// CodexRolloutFile is CodexRollout of the file at path, of which at most
// the last MaxFile bytes are read.
func CodexRolloutFile(path, plan string) Usage {
	return codexRolloutFile(path, plan, MaxFile)
}

func codexRolloutFile(path, plan string, max int64) Usage {
	f, lo, hi, err := openTail(path, max)
	if err != nil {
		return missing(SourceCodexRollout, plan, "rollout unreadable: "+err.Error())
	}
	defer f.Close()
	tail := lo > 0
	// What is counted depends only on the lines from the last one that
	// starts plan's part, and on two before it: the last token count (the
	// part's baseline) and the last turn context naming a model. They
	// are looked for from the end (a long session's rollout is long, its
	// last part short) and the lines are read on from the first of them.
	// Lacking a start, every line is read, to say so as a full read does.
	seg := segmenter{plan: plan, last: plan == ""}
	var (
		begin, from      int64 = -1, -1
		haveBase, haveMo bool
	)
	err = linesBack(f, lo, hi, tail, func(line []byte, at int64) bool {
		if !codexMayCount(line) || begin < 0 && !bytes.Contains(line, []byte(dispatchPost)) && !escapesASCII(line) {
			return true
		}
		var l codexLine
		if json.Unmarshal(line, &l) != nil {
			return true
		}
		switch {
		case begin < 0:
			if seg.starts(l.dispatched(line)) {
				begin, from = at, at
			}
		case l.Type == "turn_context" && l.Payload.Model != "" && !haveMo:
			haveMo, from = true, at
		case l.isTokenCount() && !haveBase:
			haveBase, from = true, at
		}
		return begin < 0 || !haveBase || !haveMo
	})
	if err == nil && from >= 0 {
		if _, err := f.Seek(from, io.SeekStart); err == nil {
			return codexRollout(f, plan, false, tail, max)
		}
	}
	if _, err := f.Seek(lo, io.SeekStart); err != nil {
		return missing(SourceCodexRollout, plan, "rollout unreadable: "+err.Error())
	}
	return codexRollout(f, plan, tail, tail, max)
}

// codexRollout reads r from a line's start (or, with skipFirst, from
// inside one); tail says the file's start is not in r.
func codexRollout(r io.Reader, plan string, skipFirst, tail bool, max int64) Usage {
	seg := segmenter{plan: plan, last: plan == ""}
	var (
		found, haveTotal, baseKnown, cutShort bool
		total, base, end                      codexTotal
		model                                 string // the model of the turn under way
		ms                                    models
		messages                              int
	)
	start := func(plans []string) {
		if !seg.turn(plans) {
			return
		}
		found, cutShort, messages = true, false, 0
		// Nothing before the file's start: a thread starts at 0.
		base, baseKnown = total, haveTotal || !tail
		end = base
		ms = models{}
		ms.add(model)
	}
	err := lines(r, skipFirst, func(line []byte, cut bool) {
		if !cut && !codexMayCount(line) {
			return
		}
		var l codexLine
		if cut || json.Unmarshal(line, &l) != nil {
			if seg.in && bytes.Contains(line, []byte(`"token_count"`)) {
				cutShort = true
			}
			return
		}
		p := l.Payload
		switch {
		case l.Type == "turn_context":
			if p.Model != "" {
				model = p.Model
				if seg.in {
					ms.add(model)
				}
			}
		case l.isUserInput():
			start(l.dispatched(line))
		case l.isTokenCount():
			if seg.in && (p.Info.Total != total || !haveTotal) {
				end = p.Info.Total
				messages++
			}
			total, haveTotal = p.Info.Total, true
		}
	})
	switch {
	case err != nil:
		return missing(SourceCodexRollout, plan, "rollout unreadable: "+err.Error())
	case !found:
		return missing(SourceCodexRollout, plan, noDispatch("rollout", plan, tail, max))
	case !baseKnown:
		return missing(SourceCodexRollout, seg.plan, fmt.Sprintf("the rollout is over %s and no token count before %s's dispatch line was read", size(max), seg.plan))
	}
	d := end.counts().minus(base.counts())
	if d.input < 0 || d.output < 0 || d.cacheRead < 0 || d.cacheWrite < 0 {
		return missing(SourceCodexRollout, seg.plan, fmt.Sprintf("the rollout's running totals went down (%+v before %s's part, %+v at its end)", base, seg.plan, end))
	}
	u := Usage{Source: SourceCodexRollout, Plan: seg.plan, Model: ms.String(), Messages: messages}
	d.set(&u)
	if cutShort {
		u.Missing = "the rollout's last token count was cut short (still being written): counted up to the one before"
	}
	return u
}

// codexMayCount says whether a complete line may change what is counted,
// found without decoding it (most lines are tool calls and bookkeeping):
// a turn context, a token count or a user input dispatching a plan holds
// its type or the dispatch line's end, as written or escaped.
func codexMayCount(line []byte) bool {
	return bytes.Contains(line, []byte("token_count")) || bytes.Contains(line, []byte("turn_context")) ||
		bytes.Contains(line, []byte(dispatchPost)) || escapesASCII(line)
}

// isUserInput says whether l is what the user typed: a response item
// message of role user, or a user message event.
func (l *codexLine) isUserInput() bool {
	p := &l.Payload
	return l.Type == "response_item" && p.Type == "message" && p.Role == "user" ||
		l.Type == "event_msg" && p.Type == "user_message"
}

// isTokenCount says whether l is a token count event with totals (Codex
// writes one with none before the first response).
func (l *codexLine) isTokenCount() bool {
	return l.Type == "event_msg" && l.Payload.Type == "token_count" && l.Payload.Info != nil
}

// dispatched returns the plans user input l (line, decoded) dispatches:
// a response item holding a dispatch line as written, or a user message
// event holding one.
func (l *codexLine) dispatched(line []byte) []string {
	p := &l.Payload
	switch {
	case l.Type == "response_item" && p.Type == "message" && p.Role == "user":
		if bytes.Contains(line, []byte(dispatchPost)) {
			return dispatched(codexText(p.Content))
		}
	case l.Type == "event_msg" && p.Type == "user_message":
		if strings.Contains(p.Message, dispatchPost) {
			return dispatched(p.Message)
		}
	}
	return nil
}

// codexText is the text of a response item message's input_text blocks.
func codexText(raw json.RawMessage) string {
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var b strings.Builder
	for _, bl := range blocks {
		if bl.Type == "input_text" || bl.Type == "text" {
			b.WriteString(bl.Text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// MaxRolloutDays bounds FindCodexRollout's search: the newest day
// folders it looks in.
const MaxRolloutDays = 400

// FindCodexRollout returns the rollout file of Codex thread threadID
// under codexHome: sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl,
// looked for in the newest day folders first (a resumed thread keeps
// writing the file of the day it began), at most MaxRolloutDays of them.
func FindCodexRollout(codexHome, threadID string) (string, error) {
	if !validThreadID(threadID) {
		return "", fmt.Errorf("find rollout: thread id %q: %w", threadID, ErrNoRollout)
	}
	suffix := "-" + threadID + ".jsonl"
	sessions := filepath.Join(codexHome, "sessions")
	days := 0
	for _, y := range newestFirst(sessions) {
		for _, m := range newestFirst(filepath.Join(sessions, y)) {
			for _, d := range newestFirst(filepath.Join(sessions, y, m)) {
				if days++; days > MaxRolloutDays {
					return "", fmt.Errorf("find rollout of %s in the newest %d days of %s: %w", threadID, MaxRolloutDays, sessions, ErrNoRollout)
				}
				dir := filepath.Join(sessions, y, m, d)
				entries, _ := os.ReadDir(dir)
				for _, e := range entries {
					if n := e.Name(); strings.HasPrefix(n, "rollout-") && strings.HasSuffix(n, suffix) && e.Type().IsRegular() {
						return filepath.Join(dir, n), nil
					}
				}
			}
		}
	}
	return "", fmt.Errorf("find rollout of %s in %s: %w", threadID, sessions, ErrNoRollout)
}

// newestFirst lists the all-digit folder names in dir, largest first
// (YYYY, MM and DD sort as numbers and as text alike).
func newestFirst(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if e.IsDir() && allDigits(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	return names
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// validThreadID: Codex's thread ids are UUIDs; nothing that could walk
// out of a folder or act as a pattern.
func validThreadID(id string) bool {
	if len(id) < 8 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '-') {
			return false
		}
	}
	return true
}
