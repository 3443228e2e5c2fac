package telemetry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// claudeLine is the part of a Claude Code transcript line read here
// (Claude Code 2.1: one JSON object a line; "user" and "assistant" lines
// hold an API message, other types are bookkeeping).
type claudeLine struct {
	Type             string `json:"type"`
	IsSidechain      bool   `json:"isSidechain"`
	IsMeta           bool   `json:"isMeta"`
	IsCompactSummary bool   `json:"isCompactSummary"`
	RequestID        string `json:"requestId"`
	Message          struct {
		ID      string          `json:"id"`
		Model   string          `json:"model"`
		Content json.RawMessage `json:"content"`
		Usage   *struct {
			Input      int64 `json:"input_tokens"`
			Output     int64 `json:"output_tokens"`
			CacheRead  int64 `json:"cache_read_input_tokens"`
			CacheWrite int64 `json:"cache_creation_input_tokens"`
		} `json:"usage"`
	} `json:"message"`
}

// claudeModelSynthetic is the model Claude Code names on the assistant
// message it makes up itself (an API error shown as text): no response.
const claudeModelSynthetic = "<synthetic>"

// ClaudeTranscript reads a Claude Code session transcript (the JSONL file
// a hook's transcript_path names) and sums what plan's attempt used: the
// usage of each assistant response from the last user prompt holding
// plan's dispatch line up to the next prompt dispatching another plan.
// Claude Code writes one line per content block of a response, each
// repeating its usage: a response is counted once per (message.id,
// requestId), with the values of its last copy. With plan "" the last
// plan dispatched is read. A transcript without the dispatch line, or one
// that cannot be read, gives nil counts and Missing.
func ClaudeTranscript(r io.Reader, plan string) Usage {
	return claudeTranscript(r, plan, false, false, MaxFile)
}

// ClaudeTranscriptFile is ClaudeTranscript of the file at path, of which
// at most the last MaxFile bytes are read.
func ClaudeTranscriptFile(path, plan string) Usage {
	return claudeTranscriptFile(path, plan, MaxFile)
}

func claudeTranscriptFile(path, plan string, max int64) Usage {
	f, lo, hi, err := openTail(path, max)
	if err != nil {
		return missing(SourceClaudeTranscript, plan, "transcript unreadable: "+err.Error())
	}
	defer f.Close()
	tail := lo > 0
	// What is counted depends only on the lines from the last one that
	// starts plan's part, so that line is looked for from the end (a
	// pane session's transcript is long, its last part short) and the
	// lines are read on from there. Lacking one, every line is read, to
	// say so as a full read does.
	seg := segmenter{plan: plan, last: plan == ""}
	start := int64(-1)
	err = linesBack(f, lo, hi, tail, func(line []byte, at int64) bool {
		if bytes.Contains(line, []byte(dispatchPost)) {
			var l claudeLine
			if json.Unmarshal(line, &l) == nil && seg.starts(claudeDispatched(&l, line)) {
				start = at
				return false
			}
		}
		return true
	})
	if err == nil && start >= 0 {
		if _, err := f.Seek(start, io.SeekStart); err == nil {
			return claudeTranscript(f, plan, false, tail, max)
		}
	}
	if _, err := f.Seek(lo, io.SeekStart); err != nil {
		return missing(SourceClaudeTranscript, plan, "transcript unreadable: "+err.Error())
	}
	return claudeTranscript(f, plan, tail, tail, max)
}

type claudeResponse struct {
	model string
	c     counts
}

// claudeTranscript reads r from a line's start (or, with skipFirst, from
// inside one); tail says the file's start is not in r.
func claudeTranscript(r io.Reader, plan string, skipFirst, tail bool, max int64) Usage {
	seg := segmenter{plan: plan, last: plan == ""}
	var (
		found     bool
		order     []string // response keys in the order first seen
		responses map[string]claudeResponse
		ids       map[string]bool // message ids seen, for a line cut short
		cutShort  bool
	)
	err := lines(r, skipFirst, func(line []byte, cut bool) {
		if !cut && !claudeMayCount(line, seg.in, ids) {
			return
		}
		var l claudeLine
		if cut || json.Unmarshal(line, &l) != nil {
			// Being written (the last line) or broken: it matters only
			// if it may be a response of the part counted not seen yet.
			if seg.in && !claudeCutHarmless(line, ids) {
				cutShort = true
			}
			return
		}
		switch l.Type {
		case "user":
			if seg.turn(claudeDispatched(&l, line)) {
				found = true
				order, responses, ids, cutShort = nil, map[string]claudeResponse{}, map[string]bool{}, false
			}
		case "assistant":
			m := l.Message
			if !seg.in || m.Usage == nil || m.Model == claudeModelSynthetic {
				return
			}
			key := m.ID + "\x00" + l.RequestID
			if _, ok := responses[key]; !ok {
				order = append(order, key)
			}
			responses[key] = claudeResponse{m.Model, counts{m.Usage.Input, m.Usage.Output, m.Usage.CacheRead, m.Usage.CacheWrite}}
			ids[m.ID] = true
		}
	})
	switch {
	case err != nil:
		return missing(SourceClaudeTranscript, plan, "transcript unreadable: "+err.Error())
	case !found:
		return missing(SourceClaudeTranscript, plan, noDispatch("transcript", plan, tail, max))
	}
	u := Usage{Source: SourceClaudeTranscript, Plan: seg.plan, Messages: len(order)}
	var sum counts
	var ms models
	for _, k := range order {
		resp := responses[k]
		sum.input += resp.c.input
		sum.output += resp.c.output
		sum.cacheRead += resp.c.cacheRead
		sum.cacheWrite += resp.c.cacheWrite
		ms.add(resp.model)
	}
	sum.set(&u)
	u.Model = ms.String()
	if cutShort {
		u.Missing = "the transcript's last line was cut short (still being written): a response may not be counted"
	}
	return u
}

// claudeMayCount says whether a complete line may change what is counted,
// found without decoding it (most lines are not in the part counted, or
// are bookkeeping): a user line that dispatches a plan holds the
// dispatch line's end as written; inside the part, so may an assistant
// line its type, and a line that does not decode matters unless it is
// harmless cut short.
func claudeMayCount(line []byte, in bool, ids map[string]bool) bool {
	if bytes.Contains(line, []byte(dispatchPost)) {
		return true
	}
	return in && (mayHold(line, "assistant") || !claudeCutHarmless(line, ids))
}

// claudeDispatched returns the plans a user line l (line, decoded)
// dispatches: none unless its prompt is the user's own and holds a
// dispatch line as written.
func claudeDispatched(l *claudeLine, line []byte) []string {
	if l.Type != "user" || l.IsSidechain || l.IsMeta || l.IsCompactSummary || !bytes.Contains(line, []byte(dispatchPost)) {
		return nil
	}
	return dispatched(claudeText(l.Message.Content))
}

// claudeCutHarmless says whether a line cut short is surely not a
// response left uncounted: a bookkeeping line (they start with their
// type), a user line or an attachment, or a copy of a response counted
// (its message id follows its content, so a line cut inside the content
// may be any response).
func claudeCutHarmless(line []byte, ids map[string]bool) bool {
	if bytes.HasPrefix(line, []byte(`{"type":"`)) && !bytes.HasPrefix(line, []byte(`{"type":"assistant"`)) {
		return true
	}
	if bytes.Contains(line, []byte(`"role":"user"`)) || bytes.Contains(line, []byte(`"attachment":{`)) {
		return true
	}
	id, ok := jsonStringAfter(line, `"id":"msg_`)
	return ok && ids["msg_"+id]
}

// claudeText is the text of a user message's content: a string, or the
// text blocks of a list (tool results are not the user's words).
func claudeText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var b bytes.Buffer
	for _, bl := range blocks {
		if bl.Type == "text" {
			b.WriteString(bl.Text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// jsonStringAfter returns the JSON string (without escapes) that starts
// right after the first key in line: the id of a line cut short.
func jsonStringAfter(line []byte, key string) (string, bool) {
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return "", false
	}
	rest := line[i+len(key):]
	j := bytes.IndexAny(rest, `"\`)
	if j < 0 || rest[j] != '"' {
		return "", false
	}
	return string(rest[:j]), true
}

// size is n bytes for a person.
func size(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// noDispatch says that no dispatch line for plan was found.
func noDispatch(what, plan string, tail bool, max int64) string {
	where := "the " + what
	if tail {
		where = fmt.Sprintf("the last %s of the %s", size(max), what)
	}
	if plan == "" {
		return "no dispatch line in " + where
	}
	return "no dispatch line for " + plan + " in " + where
}
