package modelsim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// testdata/claude-request.json is a request Claude Code 2.1.332 sent for a
// plan's conversation after the first tool result (orch-notify started
// ran), with machine-specific paths replaced (/work/repo is the working
// directory, /work/bin/orch-notify the notifier) and long tool
// descriptions trimmed. testdata/claude-title-request.json is the session
// title request it sent alongside.

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data map[string]any
}

// readSSE parses a text/event-stream body.
func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	var name string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("event %s: data is not JSON: %v", name, err)
			}
			if d["type"] != name {
				t.Fatalf("event %s has data type %v", name, d["type"])
			}
			out = append(out, sseEvent{name, d})
		}
	}
	return out
}

// assembled is an answer put together from its events, as a client does.
type assembled struct {
	stop   string
	blocks []map[string]any // each with "input" parsed from the input_json_delta parts
	usage  map[string]any   // message_delta's
}

func assemble(t *testing.T, events []sseEvent) assembled {
	t.Helper()
	var names []string
	for _, e := range events {
		names = append(names, e.name)
	}
	seq := strings.Join(names, " ")
	if !strings.HasPrefix(seq, "message_start") || !strings.HasSuffix(seq, "message_delta message_stop") {
		t.Fatalf("event sequence %q", seq)
	}
	var a assembled
	var partial []string
	for _, e := range events {
		switch e.name {
		case "message_start":
			u := e.data["message"].(map[string]any)["usage"].(map[string]any)
			for _, k := range []string{"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"} {
				if _, ok := u[k]; !ok {
					t.Errorf("message_start usage lacks %s: %v", k, u)
				}
			}
		case "content_block_start":
			if int(e.data["index"].(float64)) != len(a.blocks) {
				t.Fatalf("block index %v, want %d", e.data["index"], len(a.blocks))
			}
			a.blocks = append(a.blocks, e.data["content_block"].(map[string]any))
			partial = append(partial, "")
		case "content_block_delta":
			i := int(e.data["index"].(float64))
			d := e.data["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				a.blocks[i]["text"] = a.blocks[i]["text"].(string) + d["text"].(string)
			case "input_json_delta":
				partial[i] += d["partial_json"].(string)
			default:
				t.Fatalf("delta type %v", d["type"])
			}
		case "content_block_stop":
			i := int(e.data["index"].(float64))
			if a.blocks[i]["type"] == "tool_use" {
				var in map[string]any
				if err := json.Unmarshal([]byte(partial[i]), &in); err != nil {
					t.Fatalf("tool input %q: %v", partial[i], err)
				}
				a.blocks[i]["input"] = in
			}
		case "message_delta":
			a.stop = e.data["delta"].(map[string]any)["stop_reason"].(string)
			a.usage = e.data["usage"].(map[string]any)
		}
	}
	if out, _ := a.usage["output_tokens"].(float64); out < 1 {
		t.Errorf("message_delta output_tokens %v", a.usage["output_tokens"])
	}
	return a
}

func post(t *testing.T, url string, body []byte) *http.Response {
	t.Helper()
	resp, err := http.Post(url+"/v1/messages?beta=true", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func newTestServer(t *testing.T, sc map[string]Scenario) (*Server, string) {
	t.Helper()
	s := New(sc)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL
}

// withoutLast returns the captured request cut back to its first n
// messages (the conversation as it was earlier).
func withoutLast(t *testing.T, body []byte, n int) []byte {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	d["messages"] = d["messages"].([]any)[:n]
	out, _ := json.Marshal(d)
	return out
}

func TestClaudeRequestFollowsScript(t *testing.T) {
	body, err := os.ReadFile("testdata/claude-request.json")
	if err != nil {
		t.Fatal(err)
	}
	s, url := newTestServer(t, nil)

	// The captured request holds one tool result: next is writing
	// RESULT.md with the Write tool, at the absolute path under the
	// working directory the "# Environment" message states.
	resp := post(t, url, body)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	a := assemble(t, readSSE(t, resp.Body))
	if a.stop != "tool_use" || len(a.blocks) != 1 || a.blocks[0]["name"] != "Write" {
		t.Fatalf("answer %+v, want one Write tool_use", a)
	}
	in := a.blocks[0]["input"].(map[string]any)
	if in["file_path"] != "/work/repo/plans/p1/RESULT.md" || !strings.Contains(in["content"].(string), "Result of p1") {
		t.Errorf("Write input %v", in)
	}

	// The same conversation before the first tool result: orch-notify
	// started, with the Bash tool.
	resp = post(t, url, withoutLast(t, body, 2))
	a = assemble(t, readSSE(t, resp.Body))
	if a.stop != "tool_use" || a.blocks[0]["name"] != "Bash" {
		t.Fatalf("answer %+v, want a Bash tool_use", a)
	}
	if cmd := a.blocks[0]["input"].(map[string]any)["command"]; cmd != "/work/bin/orch-notify started p1" {
		t.Errorf("command %q", cmd)
	}

	reqs := s.Requests()
	if len(reqs) != 2 || reqs[0].Plan != "p1" || reqs[0].Results != 1 || reqs[1].Results != 0 || reqs[0].Side || reqs[0].API != "anthropic" {
		t.Errorf("recorded %+v", reqs)
	}
}

// TestClaudeRequestDoneAndSay adds tool results to the captured request and
// checks the rest of the Done script: orch-notify done, then end_turn text.
func TestClaudeRequestDoneAndSay(t *testing.T) {
	body, err := os.ReadFile("testdata/claude-request.json")
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	json.Unmarshal(body, &d)
	msgs := d["messages"].([]any)
	step := func(id string) {
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{"command": "true"}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "ok"}}})
		d["messages"] = msgs
		body, _ = json.Marshal(d)
	}
	_, url := newTestServer(t, nil)

	step("toolu_2")
	a := assemble(t, readSSE(t, post(t, url, body).Body))
	if cmd := a.blocks[0]["input"].(map[string]any)["command"]; cmd != `/work/bin/orch-notify done p1 "ok: p1 done"` {
		t.Errorf("command %q", cmd)
	}
	step("toolu_3")
	a = assemble(t, readSSE(t, post(t, url, body).Body))
	if a.stop != "end_turn" || a.blocks[0]["type"] != "text" || a.blocks[0]["text"] != "Finished p1." {
		t.Errorf("answer %+v, want end_turn text", a)
	}
}

func TestTitleRequestGetsSchemaJSON(t *testing.T) {
	body, err := os.ReadFile("testdata/claude-title-request.json")
	if err != nil {
		t.Fatal(err)
	}
	s, url := newTestServer(t, nil)
	a := assemble(t, readSSE(t, post(t, url, body).Body))
	var v map[string]any
	if err := json.Unmarshal([]byte(a.blocks[0]["text"].(string)), &v); err != nil || v["title"] == "" || v["title"] == nil {
		t.Fatalf("title answer %q (%v)", a.blocks[0]["text"], err)
	}
	if r := s.Requests(); len(r) != 1 || !r[0].Side || r[0].Plan != "" {
		t.Errorf("recorded %+v, want one side request", r)
	}
}

func TestAPIErrorAndNonStreaming(t *testing.T) {
	body, err := os.ReadFile("testdata/claude-request.json")
	if err != nil {
		t.Fatal(err)
	}
	_, url := newTestServer(t, map[string]Scenario{"p1": APIError})
	resp := post(t, url, body)
	var e struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 400 || e.Type != "error" || e.Error.Type != "invalid_request_error" || e.Error.Message != APIErrorMessage {
		t.Errorf("status %d, error %+v", resp.StatusCode, e)
	}

	// Not streaming: one JSON message.
	_, url = newTestServer(t, nil)
	var d map[string]any
	json.Unmarshal(body, &d)
	d["stream"] = false
	body, _ = json.Marshal(d)
	resp = post(t, url, body)
	var m struct {
		Type       string `json:"type"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type, Name string
			Input      map[string]any
		}
		Usage map[string]any
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Type != "message" || m.StopReason != "tool_use" || len(m.Content) != 1 || m.Content[0].Name != "Write" || m.Usage["output_tokens"].(float64) < 1 || m.Usage["cache_read_input_tokens"].(float64) < 1 {
		t.Errorf("message %+v", m)
	}
}

func TestCountTokensAndOther(t *testing.T) {
	_, url := newTestServer(t, nil)
	resp, err := http.Post(url+"/v1/messages/count_tokens?beta=true", "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hello there"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		InputTokens int `json:"input_tokens"`
	}
	json.NewDecoder(resp.Body).Decode(&c)
	resp.Body.Close()
	if resp.StatusCode != 200 || c.InputTokens < 1 {
		t.Errorf("count_tokens: %d %+v", resp.StatusCode, c)
	}
	req, _ := http.NewRequest(http.MethodHead, url+"/api/hello", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("HEAD /api/hello: %d", resp.StatusCode)
	}
}

func TestWorkdir(t *testing.T) {
	r := anthropicRequest{System: json.RawMessage(`"x\n - Primary working directory: /a/b\n"`)}
	if got := r.workdir(); got != "/a/b" {
		t.Errorf("workdir %q", got)
	}
	r = anthropicRequest{Messages: []anthropicMessage{{Role: "system", Content: json.RawMessage(`[{"type":"text","text":"Working directory: /c"}]`)}}}
	if got := r.workdir(); got != "/c" {
		t.Errorf("workdir %q", got)
	}
}

// TestNoWriteToolUsesHeredoc: a request that does not offer Write gets
// RESULT.md written by a Bash heredoc, relative to the working directory.
func TestNoWriteToolUsesHeredoc(t *testing.T) {
	body, err := os.ReadFile("testdata/claude-request.json")
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	json.Unmarshal(body, &d)
	var tools []any
	for _, tl := range d["tools"].([]any) {
		if tl.(map[string]any)["name"] != "Write" {
			tools = append(tools, tl)
		}
	}
	d["tools"] = tools
	body, _ = json.Marshal(d)
	_, url := newTestServer(t, nil)
	a := assemble(t, readSSE(t, post(t, url, body).Body))
	cmd, _ := a.blocks[0]["input"].(map[string]any)["command"].(string)
	if a.blocks[0]["name"] != "Bash" || !strings.Contains(cmd, "cat > 'plans/p1/RESULT.md' <<'ORCH_MODELSIM_EOF'\n# Result of p1\n") {
		t.Errorf("answer %+v", a.blocks[0])
	}
}
