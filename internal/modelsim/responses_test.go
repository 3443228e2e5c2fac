package modelsim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// testdata/codex-request.json is a request the real Codex 0.171.0 TUI
// sent (plan q2, after two tool results: the started command and the
// apply_patch of RESULT.md), with long instructions trimmed and paths
// replaced. testdata/codex-title-request.json is the request of the task
// title side thread Codex starts for the same prompt.

// respLoad reads a captured request body as a generic JSON object.
func respLoad(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var req map[string]any
	if err := json.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	return req
}

// respKeep cuts the request's input to its first n items.
func respKeep(req map[string]any, n int) map[string]any {
	out := map[string]any{}
	for k, v := range req {
		out[k] = v
	}
	out["input"] = req["input"].([]any)[:n]
	return out
}

// respEvent is one server-sent event: its event name and data.
type respEvent struct {
	Name string
	Data map[string]any
}

// post sends req to a test server and returns the response and, for a
// stream, its events.
func respPost(t *testing.T, s *Server, req map[string]any, header http.Header) (*http.Response, []respEvent) {
	t.Helper()
	ts := httptest.NewServer(s)
	defer ts.Close()
	body, _ := json.Marshal(req)
	hr, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/responses", bytes.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		hr.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []respEvent
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		events = append(events, respEvent{Name: "json", Data: m})
		return resp, events
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var ev respEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.Data); err != nil {
				t.Fatalf("bad data line %q: %v", line, err)
			}
		case line == "":
			if ev.Name != "" {
				if ev.Data["type"] != ev.Name {
					t.Errorf("event %s has data type %v", ev.Name, ev.Data["type"])
				}
				events = append(events, ev)
			}
			ev = respEvent{}
		}
	}
	return resp, events
}

// respOutputItem checks the stream's shape (created first, completed last with
// usage) and returns the one output item of the completed response.
func respOutputItem(t *testing.T, events []respEvent) map[string]any {
	t.Helper()
	if len(events) < 4 {
		t.Fatalf("only %d events", len(events))
	}
	if events[0].Name != "response.created" {
		t.Errorf("first event %s, want response.created", events[0].Name)
	}
	last := events[len(events)-1]
	if last.Name != "response.completed" {
		t.Fatalf("last event %s, want response.completed", last.Name)
	}
	resp := last.Data["response"].(map[string]any)
	if resp["id"] == "" || resp["status"] != "completed" {
		t.Errorf("completed response %v", resp)
	}
	u := resp["usage"].(map[string]any)
	for _, k := range []string{"input_tokens", "output_tokens", "total_tokens"} {
		if _, ok := u[k]; !ok {
			t.Errorf("usage lacks %s: %v", k, u)
		}
	}
	if _, ok := u["input_tokens_details"].(map[string]any)["cached_tokens"]; !ok {
		t.Errorf("usage lacks input_tokens_details.cached_tokens")
	}
	var done []map[string]any
	for _, ev := range events {
		if ev.Name == "response.output_item.done" {
			done = append(done, ev.Data["item"].(map[string]any))
		}
	}
	out := resp["output"].([]any)
	if len(done) != 1 || len(out) != 1 {
		t.Fatalf("%d items done, %d in output; want 1", len(done), len(out))
	}
	return done[0]
}

// args decodes a function_call's arguments.
func respArgs(t *testing.T, item map[string]any) map[string]any {
	t.Helper()
	var a map[string]any
	if err := json.Unmarshal([]byte(item["arguments"].(string)), &a); err != nil {
		t.Fatalf("arguments %v: %v", item["arguments"], err)
	}
	return a
}

func TestResponsesDoneFlow(t *testing.T) {
	full := respLoad(t, "codex-request.json")
	s := New(nil)

	// No tool result yet (input up to the dispatch message): orch-notify
	// started, with exec_command, no login shell.
	_, events := respPost(t, s, respKeep(full, 4), nil)
	item := respOutputItem(t, events)
	if item["type"] != "function_call" || item["name"] != "exec_command" {
		t.Fatalf("step 0: %v", item)
	}
	a := respArgs(t, item)
	if a["cmd"] != "/opt/orch/bin/orch-notify started q2" || a["login"] != false {
		t.Errorf("step 0 arguments %v", a)
	}
	if _, ok := a["sandbox_permissions"]; ok {
		t.Errorf("step 0 asks for escalation: %v", a)
	}

	// One result: RESULT.md through the freeform apply_patch tool.
	_, events = respPost(t, s, respKeep(full, 6), nil)
	item = respOutputItem(t, events)
	if item["type"] != "custom_tool_call" || item["name"] != "apply_patch" {
		t.Fatalf("step 1: %v", item)
	}
	in := item["input"].(string)
	if !strings.HasPrefix(in, "*** Begin Patch\n*** Add File: plans/q2/RESULT.md\n+# Result of q2\n") || !strings.HasSuffix(in, "*** End Patch\n") {
		t.Errorf("step 1 patch %q", in)
	}

	// Two results (the whole captured request): orch-notify done.
	_, events = respPost(t, s, full, nil)
	item = respOutputItem(t, events)
	if a := respArgs(t, item); a["cmd"] != `/opt/orch/bin/orch-notify done q2 "ok: q2 done"` {
		t.Errorf("step 2 arguments %v", a)
	}

	// Three results: the closing message, streamed as a text delta.
	more := respKeep(full, 8)
	more["input"] = append(more["input"].([]any),
		map[string]any{"type": "function_call", "call_id": "c9", "name": "exec_command", "arguments": "{}"},
		map[string]any{"type": "function_call_output", "call_id": "c9", "output": "ok"})
	_, events = respPost(t, s, more, nil)
	item = respOutputItem(t, events)
	if item["type"] != "message" || item["role"] != "assistant" {
		t.Fatalf("step 3: %v", item)
	}
	var delta string
	for _, ev := range events {
		if ev.Name == "response.output_text.delta" {
			delta += ev.Data["delta"].(string)
		}
	}
	if delta != "Finished q2." {
		t.Errorf("step 3 text %q", delta)
	}

	rs := s.Requests()
	if len(rs) != 4 {
		t.Fatalf("%d requests recorded", len(rs))
	}
	for i, r := range rs {
		if r.API != "responses" || r.Plan != "q2" || r.Results != i || r.Side {
			t.Errorf("request %d recorded as %+v", i, r)
		}
	}
}

func TestResponsesTitleThreadIsSide(t *testing.T) {
	// The title thread quotes the dispatch line in its user message; it
	// must not run the plan's script.
	req := respLoad(t, "codex-title-request.json")
	s := New(nil)
	_, events := respPost(t, s, req, nil)
	item := respOutputItem(t, events)
	if item["type"] != "message" {
		t.Fatalf("title answer %v", item)
	}
	text := item["content"].([]any)[0].(map[string]any)["text"].(string)
	var v map[string]any
	if err := json.Unmarshal([]byte(text), &v); err != nil || v["title"] == "" || len(v) != 1 {
		t.Errorf("title answer %q is not the schema's object", text)
	}
	if r := s.Requests()[0]; !r.Side || r.Plan != "" {
		t.Errorf("recorded %+v", r)
	}

	// Without the output schema, the turn metadata header still names it.
	delete(req, "text")
	h := http.Header{"X-Codex-Turn-Metadata": {`{"request_kind":"turn","thread_source":"thread_title"}`}}
	_, events = respPost(t, s, req, h)
	if item := respOutputItem(t, events); item["type"] != "message" {
		t.Errorf("title answer without schema %v", item)
	}
}

func TestResponsesSideRequest(t *testing.T) {
	req := respKeep(respLoad(t, "codex-request.json"), 3) // no dispatch line
	s := New(nil)
	_, events := respPost(t, s, req, nil)
	if item := respOutputItem(t, events); item["type"] != "message" {
		t.Errorf("side answer %v", item)
	}
	if !s.Requests()[0].Side {
		t.Errorf("not recorded as side")
	}
}

func TestResponsesAPIError(t *testing.T) {
	s := New(map[string]Scenario{"q2": APIError})
	resp, events := respPost(t, s, respLoad(t, "codex-request.json"), nil)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d", resp.StatusCode)
	}
	e := events[0].Data["error"].(map[string]any)
	if e["message"] != APIErrorMessage || e["type"] != "invalid_request_error" {
		t.Errorf("error body %v", events[0].Data)
	}
}

func TestResponsesPermissionEscalates(t *testing.T) {
	full := respLoad(t, "codex-request.json")
	s := New(map[string]Scenario{"q2": Permission})
	// After one result the Permission scenario runs PermissionCommand,
	// asking to leave the sandbox so that Codex asks a person.
	_, events := respPost(t, s, respKeep(full, 6), nil)
	a := respArgs(t, respOutputItem(t, events))
	if a["cmd"] != PermissionCommand || a["sandbox_permissions"] != "require_escalated" || a["justification"] == nil {
		t.Errorf("arguments %v", a)
	}
}

func TestResponsesOtherTools(t *testing.T) {
	// An older tool set: shell {command: [argv]}, no apply_patch. The
	// file is written with a heredoc; the stream is asked for as JSON.
	full := respLoad(t, "codex-request.json")
	req := respKeep(full, 6)
	req["tools"] = []any{map[string]any{
		"type": "function", "name": "shell",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{
			"command": map[string]any{"type": "array"}, "workdir": map[string]any{"type": "string"},
		}},
	}}
	req["stream"] = false
	s := New(nil)
	_, events := respPost(t, s, req, nil)
	out := events[0].Data["output"].([]any)
	item := out[0].(map[string]any)
	if item["name"] != "shell" {
		t.Fatalf("item %v", item)
	}
	cmd := respArgs(t, item)["command"].([]any)
	if len(cmd) != 3 || cmd[0] != "bash" || !strings.Contains(cmd[2].(string), "cat > 'plans/q2/RESULT.md' <<'MODELSIM_EOF'\n# Result of q2") {
		t.Errorf("command %v", cmd)
	}
}

func TestResponsesBadRequests(t *testing.T) {
	s := New(nil)
	ts := httptest.NewServer(s)
	defer ts.Close()
	resp, err := http.Post(ts.URL+"/v1/responses", "application/json", strings.NewReader("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad JSON: status %d", resp.StatusCode)
	}
	resp, err = http.Get(ts.URL + "/v1/responses")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: status %d", resp.StatusCode)
	}
}

// A Codex lead's conversation (orch serve --lead-pane types the
// callbacks as one line, joined by " | "): the lines after the model's
// last output are new; a command still running is waited on.
func TestRespLead(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	input := []json.RawMessage{
		raw(`{"type":"message","role":"user","content":[{"type":"input_text","text":"WORKER-DONE a: ok"}]}`),
		raw(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Noted."}]}`),
		raw(`{"type":"message","role":"user","content":[{"type":"input_text","text":"WORKER-DONE b: ok | WORKER-FAILED c: boom"}]}`),
	}
	got := respNewCallbacks(input)
	if len(got) != 2 || got[0] != "WORKER-DONE b: ok" || got[1] != "WORKER-FAILED c: boom" {
		t.Fatalf("new callbacks: %q", got)
	}
	input = append(input, raw(`{"type":"function_call","name":"exec_command","call_id":"x","arguments":"{}"}`),
		raw(`{"type":"function_call_output","call_id":"x","output":"Process running with session ID 42\nOutput:\n"}`))
	if got := respNewCallbacks(input); len(got) != 0 {
		t.Fatalf("callbacks answered already: %q", got)
	}
	if id, ok := respRunning(input); !ok || id != "42" {
		t.Fatalf("running: %q %v", id, ok)
	}
}
