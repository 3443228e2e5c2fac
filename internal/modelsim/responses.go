package modelsim

// The OpenAI Responses API half of the server, as Codex calls it: POST
// <base_url>/responses with a JSON body whose `input` is the whole
// conversation so far (Codex sends store:false, so the server never has to
// remember anything) and `tools` the tools Codex offers, answered with a
// stream of server-sent events.
//
// The events Codex needs, in order: response.created, then per output item
// response.output_item.added, its deltas, response.output_item.done, and
// last response.completed carrying the response id and usage. A stream
// that ends without response.completed is an error to Codex (it retries),
// so every answer ends with one.

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
)

// responsesRequest is the part of a Responses API request body the server
// reads.
type responsesRequest struct {
	Model        string            `json:"model"`
	Instructions string            `json:"instructions"`
	Input        []json.RawMessage `json:"input"`
	Tools        []responsesTool   `json:"tools"`
	Stream       bool              `json:"stream"`
	Text         *struct {
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
}

// responsesTool is one entry of `tools`: a function tool (JSON-schema
// arguments), a custom (freeform) tool such as Codex's apply_patch, or a
// built-in such as local_shell or web_search.
type responsesTool struct {
	Type       string `json:"type"`
	Name       string `json:"name"`
	Parameters *struct {
		Properties map[string]struct {
			Type any `json:"type"` // "string", "array", or a list of types
		} `json:"properties"`
	} `json:"parameters"`
}

// has reports whether a function tool's arguments schema has property p.
func (t responsesTool) has(p string) bool {
	if t.Parameters == nil {
		return false
	}
	_, ok := t.Parameters.Properties[p]
	return ok
}

// propType is the JSON type of property p ("" when not declared or not a
// single type).
func (t responsesTool) propType(p string) string {
	if t.Parameters == nil {
		return ""
	}
	s, _ := t.Parameters.Properties[p].Type.(string)
	return s
}

// respItem is the part of one conversation item the server reads.
type respItem struct {
	Type    string          `json:"type"` // "message", "function_call_output", ...
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or a list of parts
}

// text is the text of a message item: its content string, or its text
// parts (input_text, output_text) joined.
func (it respItem) text() string {
	var s string
	if json.Unmarshal(it.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(it.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
		b.WriteString("\n")
	}
	return b.String()
}

// isToolResult reports whether a conversation item is the result of a tool
// call: Codex sends function_call_output for function tools (shell,
// exec_command, ...) and custom_tool_call_output for freeform tools
// (apply_patch).
func (it respItem) isToolResult() bool {
	switch it.Type {
	case "function_call_output", "custom_tool_call_output", "local_shell_call_output", "tool_search_output":
		return true
	}
	return false
}

// respCounter numbers response, item and call ids across the process.
var respCounter atomic.Int64

func respID(prefix string) string {
	return fmt.Sprintf("%s_modelsim_%d", prefix, respCounter.Add(1))
}

// serveResponses answers the OpenAI Responses API (POST .../responses).
func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request) {
	rec := Request{API: "responses", Path: r.URL.Path}
	if r.Method != http.MethodPost {
		rec.Action = "error 405: " + r.Method
		s.record(rec)
		respError(w, http.StatusMethodNotAllowed, "modelsim: POST only", "invalid_request_error")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		rec.Action = "error 400: reading body"
		s.record(rec)
		respError(w, http.StatusBadRequest, "modelsim: reading the body: "+err.Error(), "invalid_request_error")
		return
	}
	var req responsesRequest
	if err := json.Unmarshal(respDecompress(r, body), &req); err != nil {
		rec.Action = "error 400: bad JSON"
		s.record(rec)
		respError(w, http.StatusBadRequest, "modelsim: the body is not a Responses API request: "+err.Error(), "invalid_request_error")
		return
	}

	plan, notify, results, found := respConversation(req.Input)
	side := respSideThread(r, req)
	var lines []string // callback lines a lead's request brings
	if !found && !side {
		lines = respNewCallbacks(req.Input)
	}
	var out []map[string]any // output items to stream
	session, running := "", false
	if !found && !side && len(lines) == 0 {
		session, running = respRunning(req.Input)
	}
	switch {
	case running && session != "":
		// A lead's command still runs (Codex's exec_command yields after
		// at most 30s): wait on it, as a model would, keeping the turn open.
		if _, ok := respFindTool(req.Tools, "write_stdin"); ok {
			var id any = session
			if n, err := strconv.Atoi(session); err == nil {
				id = n
			}
			rec.Action = "write_stdin: wait on session " + session
			out = append(out, respFunctionCall("write_stdin", map[string]any{"session_id": id, "chars": "", "yield_time_ms": 300000}))
			break
		}
		rec.Side = true
		rec.Action = "side: OK."
		out = append(out, respMessage("OK."))
	case len(lines) > 0:
		rec.Callbacks = lines
		a := s.leadStep(lines)
		if a.Kind == RunCommand {
			item, desc := respShellCall(req.Tools, a.Command, a.Command == PermissionCommand)
			if args, ok := item["arguments"].(string); ok && a.Command != PermissionCommand {
				// The hold command waits as long as exec_command lets it.
				var m map[string]any
				if json.Unmarshal([]byte(args), &m) == nil {
					if t, _ := respFindTool(req.Tools, item["name"].(string)); t.has("yield_time_ms") {
						m["yield_time_ms"] = 30000
						b, _ := json.Marshal(m)
						item["arguments"] = string(b)
					}
				}
			}
			rec.Action = desc
			out = append(out, item)
		} else {
			rec.Action = "say: " + a.Text
			out = append(out, respMessage(a.Text))
		}
	case !found || side:
		rec.Side = true
		text := respSideText(req)
		rec.Action = "side: " + text
		out = append(out, respMessage(text))
	default:
		rec.Plan, rec.Results = plan, results
		a := Next(s.scenario(plan), plan, notify, results)
		switch a.Kind {
		case Fail:
			rec.Action = fmt.Sprintf("error %d: %s", a.Status, a.Text)
			s.record(rec)
			respError(w, a.Status, a.Text, "invalid_request_error")
			return
		case Say:
			rec.Action = "say: " + a.Text
			out = append(out, respMessage(a.Text))
		case RunCommand:
			item, desc := respShellCall(req.Tools, a.Command, a.Command == PermissionCommand)
			rec.Action = desc
			out = append(out, item)
		case WriteFile:
			item, desc := respWriteCall(req.Tools, a.Path, a.Content)
			rec.Action = desc
			out = append(out, item)
		}
	}
	s.record(rec)

	resp := map[string]any{
		"id":         respID("resp"),
		"object":     "response",
		"created_at": 0,
		"model":      req.Model,
		"status":     "completed",
		"output":     out,
		"usage":      respUsage(len(body), out),
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
		return
	}
	respStream(w, resp, out)
}

// respConversation finds the last user message holding a dispatch line
// (a session that worked on several plans holds all their lines; the last
// is the task at hand) and counts the tool results after it.
func respConversation(input []json.RawMessage) (plan, notify string, results int, found bool) {
	for _, raw := range input {
		var it respItem
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		if (it.Type == "message" || it.Type == "") && it.Role == "user" {
			if p, n, ok := ParseDispatch(it.text()); ok {
				plan, notify, found, results = p, n, true, 0
				continue
			}
		}
		if found && it.isToolResult() {
			results++
		}
	}
	return plan, notify, results, found
}

// respNewCallbacks returns orch's callback lines in the user messages
// after the model's last output (a message or a tool call): what a lead's
// request brings that the model has not answered yet (Codex sends the
// whole conversation each time).
func respNewCallbacks(input []json.RawMessage) []string {
	var out []string
	for _, raw := range input {
		var it respItem
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		switch {
		case it.Role == "assistant" || strings.HasSuffix(it.Type, "_call"):
			out = out[:0]
		case (it.Type == "message" || it.Type == "") && it.Role == "user":
			// orch serve --lead-pane types the callbacks waiting as one
			// line, joined by " | ".
			out = append(out, callbackRE.FindAllString(strings.ReplaceAll(it.text(), " | ", "\n"), -1)...)
		}
	}
	return out
}

// runningRE finds the session of a command Codex's exec_command left
// running ("Process running with session ID 1234").
var runningRE = regexp.MustCompile(`session ID ([0-9]+)`)

// respRunning says whether the conversation's last item is the output of
// a command still running, and its session.
func respRunning(input []json.RawMessage) (string, bool) {
	if len(input) == 0 {
		return "", false
	}
	var it struct {
		Type   string          `json:"type"`
		Output json.RawMessage `json:"output"`
	}
	if json.Unmarshal(input[len(input)-1], &it) != nil || it.Type != "function_call_output" {
		return "", false
	}
	var out string
	if json.Unmarshal(it.Output, &out) != nil {
		out = string(it.Output)
	}
	if m := runningRE.FindStringSubmatch(out); m != nil && !strings.Contains(out, "Process exited") {
		return m[1], true
	}
	return "", false
}

// respSideThread reports whether a request that quotes a dispatch line
// is still not the plan's own conversation. Codex's TUI starts a side
// thread to name the task whose user message quotes the person's first
// prompt ("Generate a concise, single-line task title ... User prompt:
// <dispatch line>") and asks for a JSON object through a structured
// output format; the X-Codex-Turn-Metadata header names it too
// ("thread_source":"thread_title"). Answering it with the plan's script
// would run the plan's commands twice.
func respSideThread(r *http.Request, req responsesRequest) bool {
	if req.Text != nil && req.Text.Format != nil && req.Text.Format.Type == "json_schema" {
		return true
	}
	var md struct {
		ThreadSource string `json:"thread_source"`
	}
	if h := r.Header.Get("X-Codex-Turn-Metadata"); h != "" && json.Unmarshal([]byte(h), &md) == nil {
		return md.ThreadSource != "" && md.ThreadSource != "user"
	}
	return false
}

// respSideText is the answer to a side request: a JSON value that fits
// the structured output schema when the request gives one (for the title
// thread, {"title":"modelsim"}), "{}" when the instructions ask for JSON,
// else a short text.
func respSideText(req responsesRequest) string {
	if req.Text != nil && req.Text.Format != nil {
		if len(req.Text.Format.Schema) > 0 {
			var schema map[string]any
			if json.Unmarshal(req.Text.Format.Schema, &schema) == nil {
				b, _ := json.Marshal(respFillSchema(schema))
				return string(b)
			}
		}
		if strings.HasPrefix(req.Text.Format.Type, "json") {
			return "{}"
		}
	}
	if strings.Contains(strings.ToLower(req.Instructions), "json") {
		return "{}"
	}
	return "OK."
}

// respFillSchema is a small value that satisfies a JSON schema: every
// required property of an object filled in, strings "modelsim", numbers 0,
// the first value of an enum.
func respFillSchema(schema map[string]any) any {
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	typ, _ := schema["type"].(string)
	if types, ok := schema["type"].([]any); ok && len(types) > 0 {
		typ, _ = types[0].(string)
	}
	switch typ {
	case "object":
		obj := map[string]any{}
		props, _ := schema["properties"].(map[string]any)
		req, _ := schema["required"].([]any)
		for _, name := range req {
			n, _ := name.(string)
			sub, _ := props[n].(map[string]any)
			obj[n] = respFillSchema(sub)
		}
		return obj
	case "array":
		return []any{}
	case "integer", "number":
		return 0
	case "boolean":
		return false
	case "null":
		return nil
	}
	return "modelsim"
}

// respMessage is an assistant message with one output_text part.
func respMessage(text string) map[string]any {
	return map[string]any{
		"type":   "message",
		"id":     respID("msg"),
		"status": "completed",
		"role":   "assistant",
		"content": []map[string]any{
			{"type": "output_text", "text": text, "annotations": []any{}},
		},
	}
}

// functionCall is a function_call item with arguments encoded as JSON.
func respFunctionCall(name string, args map[string]any) map[string]any {
	b, _ := json.Marshal(args)
	return map[string]any{
		"type":      "function_call",
		"id":        respID("fc"),
		"status":    "completed",
		"call_id":   respID("call"),
		"name":      name,
		"arguments": string(b),
	}
}

// respFindTool returns the first tool offered under one of names, in the
// order given.
func respFindTool(tools []responsesTool, names ...string) (responsesTool, bool) {
	for _, n := range names {
		for _, t := range tools {
			if t.Name == n {
				return t, true
			}
		}
	}
	return responsesTool{}, false
}

// respShellCall is the call that runs command with the shell tool Codex
// offers, and a description for the record. Codex offers one of:
// exec_command {cmd: string} (unified exec), shell_command {command:
// string}, shell {command: [argv]}, or the built-in local_shell. When
// escalate is true and the tool takes sandbox_permissions, the call asks
// to run outside the sandbox, with a justification, which under an
// on-request approval policy makes Codex ask a person.
func respShellCall(tools []responsesTool, command string, escalate bool) (map[string]any, string) {
	t, ok := respFindTool(tools, "exec_command", "shell_command", "shell", "container.exec")
	if !ok {
		for _, lt := range tools {
			if lt.Type == "local_shell" {
				return map[string]any{
					"type":    "local_shell_call",
					"id":      respID("lsh"),
					"call_id": respID("call"),
					"status":  "completed",
					"action": map[string]any{
						"type":    "exec",
						"command": []string{"bash", "-c", command},
					},
				}, "local_shell: " + command
			}
		}
		// No shell tool offered: call "shell" anyway, so the agent's
		// error for the unknown tool shows in its transcript.
		t = responsesTool{Type: "function", Name: "shell"}
	}
	args := map[string]any{}
	switch {
	case t.has("cmd"):
		args["cmd"] = command
	case t.propType("command") == "string":
		args["command"] = command
	default:
		args["command"] = []string{"bash", "-lc", command}
	}
	// A login shell may reset PATH (Debian's /etc/profile does); the
	// scripted commands use absolute paths, but skip the login shell
	// when the tool lets us.
	if t.has("login") {
		args["login"] = false
	}
	if escalate {
		if t.has("sandbox_permissions") {
			args["sandbox_permissions"] = "require_escalated"
		} else if t.has("with_escalated_permissions") {
			args["with_escalated_permissions"] = true
		}
		if t.has("justification") {
			args["justification"] = "modelsim: the plan needs this command to run outside the sandbox."
		}
	}
	desc := t.Name + ": " + command
	if escalate {
		desc += " (escalated)"
	}
	return respFunctionCall(t.Name, args), desc
}

// respWriteCall is the call that writes content to path: apply_patch when
// Codex offers it (as a freeform custom tool or as a function taking
// {input}), otherwise the shell tool with a heredoc.
func respWriteCall(tools []responsesTool, path, content string) (map[string]any, string) {
	var patch strings.Builder
	patch.WriteString("*** Begin Patch\n*** Add File: " + path + "\n")
	for _, line := range strings.SplitAfter(strings.TrimSuffix(content, "\n"), "\n") {
		patch.WriteString("+" + strings.TrimSuffix(line, "\n") + "\n")
	}
	patch.WriteString("*** End Patch\n")
	if t, ok := respFindTool(tools, "apply_patch"); ok {
		if t.Type == "custom" {
			return map[string]any{
				"type":    "custom_tool_call",
				"id":      respID("ctc"),
				"status":  "completed",
				"call_id": respID("call"),
				"name":    t.Name,
				"input":   patch.String(),
			}, "apply_patch (custom): " + path
		}
		return respFunctionCall(t.Name, map[string]any{"input": patch.String()}), "apply_patch (function): " + path
	}
	dir := path[:max(strings.LastIndex(path, "/"), 0)]
	cmd := fmt.Sprintf("cat > '%s' <<'MODELSIM_EOF'\n%sMODELSIM_EOF", path, content)
	if dir != "" {
		cmd = fmt.Sprintf("mkdir -p '%s' && %s", dir, cmd)
	}
	item, _ := respShellCall(tools, cmd, false)
	return item, "shell heredoc: " + path
}

// usage is a plausible token count: a quarter of the bytes in and out.
func respUsage(inBytes int, out []map[string]any) map[string]any {
	b, _ := json.Marshal(out)
	in, o := inBytes/4+1, len(b)/4+1
	return map[string]any{
		"input_tokens":          in,
		"input_tokens_details":  map[string]any{"cached_tokens": 0},
		"output_tokens":         o,
		"output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens":          in + o,
	}
}

// respStream writes resp as server-sent events: created, each item
// added / its deltas / done, completed.
func respStream(w http.ResponseWriter, resp map[string]any, out []map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	seq := 0
	send := func(typ string, ev map[string]any) {
		ev["type"] = typ
		ev["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		if fl != nil {
			fl.Flush()
		}
	}
	inProgress := map[string]any{}
	for k, v := range resp {
		inProgress[k] = v
	}
	inProgress["status"] = "in_progress"
	inProgress["output"] = []any{}
	delete(inProgress, "usage")
	send("response.created", map[string]any{"response": inProgress})
	send("response.in_progress", map[string]any{"response": inProgress})
	for i, item := range out {
		added := map[string]any{}
		for k, v := range item {
			added[k] = v
		}
		added["status"] = "in_progress"
		id := item["id"]
		switch item["type"] {
		case "message":
			added["content"] = []any{}
			send("response.output_item.added", map[string]any{"output_index": i, "item": added})
			text := item["content"].([]map[string]any)[0]["text"].(string)
			part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
			send("response.content_part.added", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "part": part})
			send("response.output_text.delta", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "delta": text})
			send("response.output_text.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "text": text})
			part["text"] = text
			send("response.content_part.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "part": part})
		case "function_call":
			added["arguments"] = ""
			send("response.output_item.added", map[string]any{"output_index": i, "item": added})
			send("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": item["arguments"]})
			send("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "arguments": item["arguments"]})
		case "custom_tool_call":
			added["input"] = ""
			send("response.output_item.added", map[string]any{"output_index": i, "item": added})
			send("response.custom_tool_call_input.delta", map[string]any{"item_id": id, "output_index": i, "delta": item["input"]})
			send("response.custom_tool_call_input.done", map[string]any{"item_id": id, "output_index": i, "input": item["input"]})
		default:
			send("response.output_item.added", map[string]any{"output_index": i, "item": added})
		}
		send("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	send("response.completed", map[string]any{"response": resp})
}

// respError answers with OpenAI's error JSON.
func respError(w http.ResponseWriter, status int, msg, typ string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil},
	})
}

// respDecompress undoes a gzip Content-Encoding. (Codex can compress
// request bodies with zstd for OpenAI's own endpoints; it does not for a
// custom provider, and a zstd body fails as bad JSON here.)
func respDecompress(r *http.Request, body []byte) []byte {
	if r.Header.Get("Content-Encoding") != "gzip" {
		return body
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return body
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return body
	}
	return b
}
