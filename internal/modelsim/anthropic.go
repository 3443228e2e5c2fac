package modelsim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
)

// This file is the Anthropic half: POST /v1/messages (streaming and not)
// and /v1/messages/count_tokens, as Claude Code calls them, plus whatever
// else Claude Code asks for at start-up (serveOther).

// anthropicRequest is the part of a Messages API request body the server
// reads.
type anthropicRequest struct {
	Model    string             `json:"model"`
	System   json.RawMessage    `json:"system"` // a string or a list of text blocks
	Messages []anthropicMessage `json:"messages"`
	Tools    []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Stream       bool `json:"stream"`
	OutputConfig struct {
		Format struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
}

// anthropicMessage is one message; Content is a string or a list of blocks.
type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicBlock is one content block of a message, as far as read here.
type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// blocks returns a message's content as blocks (a string content is one
// text block).
func (m anthropicMessage) blocks() []anthropicBlock {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}
	}
	var bs []anthropicBlock
	json.Unmarshal(m.Content, &bs)
	return bs
}

// text is the text of a message's text blocks, one per line.
func (m anthropicMessage) text() string {
	var parts []string
	for _, b := range m.blocks() {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// systemText is the request's system prompt as one string.
func (r *anthropicRequest) systemText() string {
	if len(r.System) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(r.System, &s) == nil {
		return s
	}
	var bs []anthropicBlock
	json.Unmarshal(r.System, &bs)
	var parts []string
	for _, b := range bs {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n")
}

// hasTool reports whether the request offers the named tool.
func (r *anthropicRequest) hasTool(name string) bool {
	for _, t := range r.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// conversation finds the plan's dispatch in the request: the last user
// message whose text holds a dispatch line (a session that worked on
// several plans holds all their lines; the last is the task at hand), and
// the number of tool_result blocks in the messages after it (the steps of
// the script already done).
// ok is false for a side request.
func (r *anthropicRequest) conversation() (plan, notify string, results int, ok bool) {
	at := -1
	for i, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		if p, n, found := ParseDispatch(m.text()); found {
			plan, notify, at = p, n, i
		}
	}
	if at < 0 {
		return "", "", 0, false
	}
	for _, m := range r.Messages[at:] {
		if m.Role != "user" {
			continue
		}
		for _, b := range m.blocks() {
			if b.Type == "tool_result" {
				results++
			}
		}
	}
	return plan, notify, results, true
}

// workdirRE finds the working directory in Claude Code's system prompt,
// whose environment section says "Primary working directory: /abs/path"
// (older versions: "Working directory: /abs/path").
var workdirRE = regexp.MustCompile(`(?m)^\s*(?:-\s*)?(?:Primary w|W)orking directory:\s*(/\S*)\s*$`)

// workdir returns the agent's working directory as Claude Code states it,
// or "" when it does not. 2.1.332 puts its "# Environment" section in a
// message of role "system" among the messages, not in the top-level
// system prompt; both are searched.
func (r *anthropicRequest) workdir() string {
	texts := []string{r.systemText()}
	for _, m := range r.Messages {
		if m.Role == "system" {
			texts = append(texts, m.text())
		}
	}
	for _, t := range texts {
		if m := workdirRE.FindStringSubmatch(t); m != nil {
			return m[1]
		}
	}
	return ""
}

// outBlock is one content block of the answer.
type outBlock struct {
	Type  string         `json:"type"`
	Text  string         `json:"text,omitempty"`
	ID    string         `json:"id,omitempty"`
	Name  string         `json:"name,omitempty"`
	Input map[string]any `json:"input,omitempty"`
}

// serveAnthropic answers the Anthropic Messages API.
func (s *Server) serveAnthropic(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "modelsim: reading the body: "+err.Error())
		return
	}
	if r.Method != http.MethodPost {
		anthropicError(w, http.StatusMethodNotAllowed, "invalid_request_error", "modelsim: POST only")
		return
	}
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "modelsim: request body is not JSON: "+err.Error())
		return
	}
	plan, notify, results, isPlan := req.conversation()
	// A request that offers no tools cannot carry out a plan's script even
	// when it quotes the dispatch line (a title or summary of the session).
	if len(req.Tools) == 0 {
		isPlan = false
	}
	rec := Request{API: "anthropic", Path: r.URL.Path, Side: !isPlan}
	if isPlan {
		rec.Plan, rec.Results = plan, results
	}
	usage := estimateUsage(body, req, results)

	if strings.HasSuffix(r.URL.Path, "/count_tokens") {
		rec.Action = "count tokens"
		s.record(rec)
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": usage.total()})
		return
	}
	if r.URL.Path != "/v1/messages" {
		rec.Action = "not found"
		s.record(rec)
		anthropicError(w, http.StatusNotFound, "not_found_error", "modelsim: no such endpoint "+r.URL.Path)
		return
	}

	var content []outBlock
	stop := "end_turn"
	lead, lines, isLead := Action{}, []string(nil), false
	if !isPlan && len(req.Tools) > 0 {
		lead, lines, isLead = s.leadAnswer(&req)
	}
	if isLead {
		rec.Side, rec.Callbacks = false, lines
		id := toolID("lead:"+lines[0], len(req.Messages))
		if lead.Kind == RunCommand {
			rec.Action = "bash: " + lead.Command
			content = []outBlock{{Type: "tool_use", ID: id, Name: "Bash",
				Input: map[string]any{"command": lead.Command, "description": describe(lead.Command)}}}
			stop = "tool_use"
		} else {
			rec.Action = "say: " + lead.Text
			content = []outBlock{{Type: "text", Text: lead.Text}}
		}
	} else if !isPlan {
		text := sideAnswer(&req)
		rec.Action = "side: " + text
		content = []outBlock{{Type: "text", Text: text}}
	} else {
		a := Next(s.scenario(plan), plan, notify, results)
		id := toolID(plan, results)
		switch a.Kind {
		case Fail:
			rec.Action = fmt.Sprintf("fail %d: %s", a.Status, a.Text)
			s.record(rec)
			anthropicError(w, a.Status, "invalid_request_error", a.Text)
			return
		case Say:
			rec.Action = "say: " + a.Text
			content = []outBlock{{Type: "text", Text: a.Text}}
		case RunCommand:
			rec.Action = "bash: " + a.Command
			content = []outBlock{{Type: "tool_use", ID: id, Name: "Bash",
				Input: map[string]any{"command": a.Command, "description": describe(a.Command)}}}
			stop = "tool_use"
		case WriteFile:
			stop = "tool_use"
			dir := req.workdir()
			if req.hasTool("Write") && dir != "" {
				path := strings.TrimSuffix(dir, "/") + "/" + a.Path
				rec.Action = "write: " + path
				content = []outBlock{{Type: "tool_use", ID: id, Name: "Write",
					Input: map[string]any{"file_path": path, "content": a.Content}}}
			} else {
				// No Write tool, or no working directory to make the path
				// absolute: the shell starts in the working directory.
				cmd := heredoc(a.Path, a.Content)
				rec.Action = "bash: " + cmd
				content = []outBlock{{Type: "tool_use", ID: id, Name: "Bash",
					Input: map[string]any{"command": cmd, "description": "Write " + a.Path}}}
			}
		}
	}
	s.record(rec)

	out, _ := json.Marshal(content)
	usage.Output = 1 + len(out)/4
	msgID := "msg_modelsim_" + toolID(plan, results)[len("toolu_modelsim_"):]
	if !isPlan || isLead {
		h := sha256.Sum256(body)
		msgID = "msg_modelsim_" + hex.EncodeToString(h[:10])
	}
	if req.Stream {
		streamMessage(w, msgID, req.Model, content, stop, usage)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": req.Model,
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": usage.json(true),
	})
}

// sideAnswer is the text of the answer to a side request. Claude Code
// asks for a session title with a JSON schema in output_config.format
// ({"title": string}); such a request gets JSON of the schema's shape.
// Otherwise, when the system prompt asks for JSON, the answer is a small
// JSON object; else a short sentence.
func sideAnswer(req *anthropicRequest) string {
	if f := req.OutputConfig.Format; f.Type == "json_schema" && len(f.Schema) > 0 {
		var schema map[string]any
		if json.Unmarshal(f.Schema, &schema) == nil {
			b, _ := json.Marshal(fromSchema(schema))
			return string(b)
		}
	}
	system := req.systemText()
	if !strings.Contains(strings.ToLower(system), "json") {
		return "OK."
	}
	v := map[string]any{}
	for _, f := range []string{"title", "isNewTopic"} {
		if strings.Contains(system, f) {
			v[f] = map[string]any{"title": "Scripted session", "isNewTopic": false}[f]
		}
	}
	if len(v) == 0 {
		v["title"] = "Scripted session"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// fromSchema is a value of the shape a JSON schema describes: every
// property of an object, a fixed string, false, 0 or an empty list.
func fromSchema(schema map[string]any) any {
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	typ, _ := schema["type"].(string)
	if types, ok := schema["type"].([]any); ok && len(types) > 0 {
		typ, _ = types[0].(string)
	}
	switch typ {
	case "object":
		out := map[string]any{}
		props, _ := schema["properties"].(map[string]any)
		for k, p := range props {
			if ps, ok := p.(map[string]any); ok {
				out[k] = fromSchema(ps)
			}
		}
		return out
	case "array":
		return []any{}
	case "boolean":
		return false
	case "integer", "number":
		return 0
	case "null":
		return nil
	}
	return "Scripted session"
}

// describe is the Bash tool's description of a command.
func describe(command string) string {
	f := strings.Fields(command)
	if len(f) == 0 {
		return "Run a command"
	}
	name := f[0][strings.LastIndex(f[0], "/")+1:]
	if len(f) > 1 {
		return "Run " + name + " " + f[1]
	}
	return "Run " + name
}

// heredoc is a shell command that writes content to path (relative to the
// shell's working directory).
func heredoc(path, content string) string {
	const eof = "ORCH_MODELSIM_EOF"
	return fmt.Sprintf("mkdir -p \"$(dirname '%s')\" && cat > '%s' <<'%s'\n%s%s", path, path, eof, content, eof)
}

// toolID is a tool_use id, the same for the same step of the same plan so
// that a retried request gets the same answer.
func toolID(plan string, results int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", plan, results)))
	return "toolu_modelsim_" + hex.EncodeToString(h[:10])
}

// usage is the token counts of one answer. The server does not tokenize;
// it counts about four bytes a token, and plays prompt caching the way
// Claude Code's requests use it: the part of the conversation before the
// last message was cached by the previous request.
type usage struct {
	Input, CacheCreation, CacheRead, Output int
}

func (u usage) total() int { return u.Input + u.CacheCreation + u.CacheRead }

func (u usage) json(final bool) map[string]any {
	out := u.Output
	if !final {
		out = 1
	}
	return map[string]any{
		"input_tokens":                u.Input,
		"cache_creation_input_tokens": u.CacheCreation,
		"cache_read_input_tokens":     u.CacheRead,
		"output_tokens":               out,
		"service_tier":                "standard",
	}
}

// estimateUsage works out plausible input token counts for a request.
func estimateUsage(body []byte, req anthropicRequest, results int) usage {
	total := 1 + len(body)/4
	last := 1
	if n := len(req.Messages); n > 0 {
		last = 1 + len(req.Messages[n-1].Content)/4
	}
	if last > total {
		last = total
	}
	u := usage{Input: 3}
	if results == 0 {
		u.CacheCreation = total - last
	} else {
		u.CacheRead = total - last
		u.CacheCreation = last
	}
	if u.CacheCreation+u.CacheRead+u.Input > total && total > 3 {
		u.CacheCreation = total - 3 - u.CacheRead
	}
	return u
}

// streamMessage writes the answer as the Messages API's server-sent events.
func streamMessage(w http.ResponseWriter, id, model string, content []outBlock, stop string, u usage) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("request-id", "req_"+strings.TrimPrefix(id, "msg_"))
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	event := func(name string, data map[string]any) {
		data["type"] = name
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	event("message_start", map[string]any{"message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": u.json(false),
	}})
	event("ping", map[string]any{})
	for i, b := range content {
		switch b.Type {
		case "text":
			event("content_block_start", map[string]any{"index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			for _, part := range chunks(b.Text, 40) {
				event("content_block_delta", map[string]any{"index": i,
					"delta": map[string]any{"type": "text_delta", "text": part}})
			}
		case "tool_use":
			event("content_block_start", map[string]any{"index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}})
			in, _ := json.Marshal(b.Input)
			event("content_block_delta", map[string]any{"index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
			for _, part := range chunks(string(in), 60) {
				event("content_block_delta", map[string]any{"index": i,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
		}
		event("content_block_stop", map[string]any{"index": i})
	}
	event("message_delta", map[string]any{
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{
			"input_tokens":                u.Input,
			"cache_creation_input_tokens": u.CacheCreation,
			"cache_read_input_tokens":     u.CacheRead,
			"output_tokens":               u.Output,
		},
	})
	event("message_stop", map[string]any{})
}

// chunks splits s into pieces of at most n bytes, not splitting a UTF-8
// character; an empty s is one empty piece.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		i := n
		for i > 0 && s[i]&0xC0 == 0x80 {
			i--
		}
		if i == 0 {
			i = n
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return append(out, s)
}

// anthropicError writes an error the way the Messages API does.
func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"type": "error",
		"error": map[string]any{"type": typ, "message": msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// serveOther answers any other path Claude Code calls (at start-up and
// now and then): quickly, with an empty but well-formed answer, so the
// agent never waits on it. What 2.1.332 asks with a fresh HOME and an API
// key is the subject of the tests' notes; everything gets an answer.
func (s *Server) serveOther(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	s.record(Request{API: "anthropic", Path: r.URL.Path, Side: true, Action: "other: " + r.Method})
	switch {
	case r.URL.Path == "/" || r.Method == http.MethodHead:
		w.WriteHeader(http.StatusOK)
	case r.URL.Path == "/v1/models":
		writeJSON(w, http.StatusOK, map[string]any{"data": []any{}, "has_more": false, "first_id": nil, "last_id": nil})
	default:
		anthropicError(w, http.StatusNotFound, "not_found_error", "modelsim: no such endpoint "+r.URL.Path)
	}
}
