package modelsim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// testdata/gemini-request.json is a request the real Gemini CLI 0.61.0
// sent headless with --approval-mode auto_edit (plan p1, after one tool
// result: the started command), with the system instruction and the tool
// descriptions trimmed and paths replaced. The CLI's working directory,
// /work/repo/.orch/worktrees/w1, is in its <session_context> part.

const gemStream = "/v1beta/models/gemini-3.8-flash:streamGenerateContent"

// gemLoad reads the captured request as a generic JSON object.
func gemLoad(t *testing.T) map[string]any {
	t.Helper()
	return respLoad(t, "gemini-request.json")
}

// gemKeep cuts the request's contents to its first n entries.
func gemKeep(req map[string]any, n int) map[string]any {
	out := map[string]any{}
	for k, v := range req {
		out[k] = v
	}
	out["contents"] = req["contents"].([]any)[:n]
	return out
}

// gemAppend adds a model function call and the user's function response
// to the conversation, as the CLI sends them back.
func gemAppend(req map[string]any, name string) map[string]any {
	out := gemKeep(req, len(req["contents"].([]any)))
	out["contents"] = append(append([]any(nil), out["contents"].([]any)...),
		map[string]any{"role": "model", "parts": []any{map[string]any{
			"functionCall":     map[string]any{"id": name + "_1_0", "name": name, "args": map[string]any{}},
			"thoughtSignature": "skip_thought_signature_validator"}}},
		map[string]any{"role": "user", "parts": []any{map[string]any{
			"functionResponse": map[string]any{"id": name + "_1_0", "name": name, "response": map[string]any{"output": "ok"}}}}},
	)
	return out
}

// gemPost sends req to path and returns the status and the answers: one
// per server-sent event for a stream, else the JSON body.
func gemPost(t *testing.T, s *Server, path string, req map[string]any) (int, []map[string]any) {
	t.Helper()
	ts := httptest.NewServer(s)
	defer ts.Close()
	body, _ := json.Marshal(req)
	url := ts.URL + path
	if strings.HasSuffix(path, ":streamGenerateContent") {
		url += "?alt=sse"
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []map[string]any
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatalf("decoding the JSON answer: %v", err)
		}
		return resp.StatusCode, append(out, m)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("bad event %q: %v", data, err)
			}
			out = append(out, m)
		}
	}
	return resp.StatusCode, out
}

// gemPart returns the one part of an answer, checking the candidate's
// shape and the usage metadata.
func gemPart(t *testing.T, answer map[string]any) map[string]any {
	t.Helper()
	cands, _ := answer["candidates"].([]any)
	if len(cands) != 1 {
		t.Fatalf("want 1 candidate, got %v", answer)
	}
	c := cands[0].(map[string]any)
	if c["finishReason"] != "STOP" {
		t.Errorf("finishReason = %v, want STOP", c["finishReason"])
	}
	content := c["content"].(map[string]any)
	if content["role"] != "model" {
		t.Errorf("role = %v, want model", content["role"])
	}
	parts := content["parts"].([]any)
	if len(parts) != 1 {
		t.Fatalf("want 1 part, got %v", parts)
	}
	u, _ := answer["usageMetadata"].(map[string]any)
	for _, k := range []string{"promptTokenCount", "candidatesTokenCount", "totalTokenCount", "cachedContentTokenCount"} {
		if _, ok := u[k].(float64); !ok {
			t.Errorf("usageMetadata.%s missing: %v", k, u)
		}
	}
	if u["totalTokenCount"].(float64) != u["promptTokenCount"].(float64)+u["candidatesTokenCount"].(float64) {
		t.Errorf("totalTokenCount is not prompt + candidates: %v", u)
	}
	if u["cachedContentTokenCount"].(float64) > u["promptTokenCount"].(float64) {
		t.Errorf("more cached than prompt tokens: %v", u)
	}
	return parts[0].(map[string]any)
}

// gemStep posts req as a stream and returns the function call (name,
// args) or the text of the one event answered.
func gemStep(t *testing.T, s *Server, req map[string]any) (name string, args map[string]any, text string) {
	t.Helper()
	status, events := gemPost(t, s, gemStream, req)
	if status != http.StatusOK {
		t.Fatalf("status %d: %v", status, events)
	}
	if len(events) != 1 {
		t.Fatalf("want one event (the CLI's AfterAgent hook repeats chunks), got %d: %v", len(events), events)
	}
	p := gemPart(t, events[0])
	if fc, ok := p["functionCall"].(map[string]any); ok {
		a, _ := fc["args"].(map[string]any)
		return fc["name"].(string), a, ""
	}
	return "", nil, p["text"].(string)
}

func TestGeminiDoneScript(t *testing.T) {
	s := New(nil)
	full := gemLoad(t)

	name, args, _ := gemStep(t, s, gemKeep(full, 1))
	if name != "run_shell_command" || args["command"] != "/work/orch-notify started p1" {
		t.Fatalf("step 0: %s %v", name, args)
	}
	if d, _ := args["description"].(string); d == "" {
		t.Errorf("run_shell_command without a description: %v", args)
	}

	name, args, _ = gemStep(t, s, full)
	if name != "write_file" {
		t.Fatalf("step 1: want write_file, got %s %v", name, args)
	}
	if args["file_path"] != "/work/repo/.orch/worktrees/w1/plans/p1/RESULT.md" {
		t.Errorf("file_path = %v, want the absolute path in the CLI's workspace", args["file_path"])
	}
	if c, _ := args["content"].(string); !strings.Contains(c, "Result of p1") {
		t.Errorf("content = %q", c)
	}

	req := gemAppend(full, "write_file")
	name, args, _ = gemStep(t, s, req)
	if name != "run_shell_command" || args["command"] != `/work/orch-notify done p1 "ok: p1 done"` {
		t.Fatalf("step 2: %s %v", name, args)
	}

	req = gemAppend(req, "run_shell_command")
	name, _, text := gemStep(t, s, req)
	if name != "" || text != "Finished p1." {
		t.Fatalf("step 3: want the final text, got %q %q", name, text)
	}

	recs := s.Requests()
	if len(recs) != 4 {
		t.Fatalf("recorded %d requests, want 4: %v", len(recs), recs)
	}
	for i, r := range recs {
		if r.API != "gemini" || r.Plan != "p1" || r.Results != i || r.Side || r.Path != gemStream {
			t.Errorf("record %d: %+v", i, r)
		}
	}
}

func TestGeminiWriteWithoutWriteFile(t *testing.T) {
	s := New(nil)
	req := gemLoad(t)
	// Headless without an approval mode that allows edits, the CLI does
	// not offer write_file.
	var kept []any
	for _, fd := range req["tools"].([]any)[0].(map[string]any)["functionDeclarations"].([]any) {
		if fd.(map[string]any)["name"] != "write_file" {
			kept = append(kept, fd)
		}
	}
	req["tools"] = []any{map[string]any{"functionDeclarations": kept}}
	name, args, _ := gemStep(t, s, req)
	cmd, _ := args["command"].(string)
	if name != "run_shell_command" || !strings.Contains(cmd, "cat > 'plans/p1/RESULT.md' <<") || !strings.Contains(cmd, "Result of p1") {
		t.Fatalf("want a heredoc through the shell, got %s %v", name, args)
	}
}

func TestGeminiPermission(t *testing.T) {
	s := New(map[string]Scenario{"p1": Permission})
	name, args, _ := gemStep(t, s, gemLoad(t))
	if name != "run_shell_command" || args["command"] != PermissionCommand {
		t.Fatalf("got %s %v", name, args)
	}
}

func TestGeminiAPIError(t *testing.T) {
	s := New(map[string]Scenario{"p1": APIError})
	status, out := gemPost(t, s, gemStream, gemKeep(gemLoad(t), 1))
	if status != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", status)
	}
	e, _ := out[0]["error"].(map[string]any)
	if e["code"] != float64(400) || e["message"] != APIErrorMessage || e["status"] != "INVALID_ARGUMENT" {
		t.Fatalf("error = %v", out[0])
	}
	if r := s.Requests(); len(r) != 1 || r[0].Plan != "p1" || !strings.HasPrefix(r[0].Action, "error 400") {
		t.Fatalf("record: %+v", r)
	}
}

// TestGeminiSideRequests: the CLI's router, next-speaker and loop checks
// go to :generateContent with a JSON schema and may quote the whole
// conversation, dispatch line included; they get JSON of the schema's
// shape, never a step of the script.
func TestGeminiSideRequests(t *testing.T) {
	full := gemLoad(t)
	cases := []struct {
		name   string
		config map[string]any
		check  func(t *testing.T, v map[string]any)
	}{
		{"router", map[string]any{
			"responseMimeType": "application/json",
			"responseJsonSchema": map[string]any{"type": "object", "properties": map[string]any{
				"complexity_reasoning": map[string]any{"type": "string"},
				"complexity_score":     map[string]any{"type": "integer"},
			}, "required": []any{"complexity_reasoning", "complexity_score"}},
		}, func(t *testing.T, v map[string]any) {
			// The router rejects a score below 1.
			if n, _ := v["complexity_score"].(float64); n < 1 || n > 100 {
				t.Errorf("complexity_score = %v", v["complexity_score"])
			}
			if _, ok := v["complexity_reasoning"].(string); !ok {
				t.Errorf("complexity_reasoning = %v", v["complexity_reasoning"])
			}
		}},
		{"next speaker", map[string]any{
			"responseMimeType": "application/json",
			"responseJsonSchema": map[string]any{"type": "object", "properties": map[string]any{
				"reasoning":    map[string]any{"type": "string"},
				"next_speaker": map[string]any{"type": "string", "enum": []any{"user", "model"}},
			}},
		}, func(t *testing.T, v map[string]any) {
			if v["next_speaker"] != "user" {
				t.Errorf("next_speaker = %v, want user", v["next_speaker"])
			}
		}},
		{"loop check", map[string]any{
			"responseMimeType": "application/json",
			"responseJsonSchema": map[string]any{"type": "object", "properties": map[string]any{
				"unproductive_state_analysis":   map[string]any{"type": "string"},
				"unproductive_state_confidence": map[string]any{"type": "number"},
			}},
		}, func(t *testing.T, v map[string]any) {
			if v["unproductive_state_confidence"] != float64(0) {
				t.Errorf("unproductive_state_confidence = %v, want 0 (no loop)", v["unproductive_state_confidence"])
			}
		}},
		{"openapi schema", map[string]any{
			"responseSchema": map[string]any{"type": "OBJECT", "properties": map[string]any{
				"ok": map[string]any{"type": "BOOLEAN"},
			}},
		}, func(t *testing.T, v map[string]any) {
			if v["ok"] != false {
				t.Errorf("ok = %v", v["ok"])
			}
		}},
		{"json only", map[string]any{"responseMimeType": "application/json"}, func(t *testing.T, v map[string]any) {}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(nil)
			req := map[string]any{"contents": full["contents"], "generationConfig": c.config}
			status, out := gemPost(t, s, "/v1beta/models/gemini-3.5-flash-lite:generateContent", req)
			if status != http.StatusOK {
				t.Fatalf("status %d: %v", status, out)
			}
			text, _ := gemPart(t, out[0])["text"].(string)
			var v map[string]any
			if err := json.Unmarshal([]byte(text), &v); err != nil {
				t.Fatalf("answer %q is not a JSON object: %v", text, err)
			}
			c.check(t, v)
			if r := s.Requests(); len(r) != 1 || !r[0].Side || r[0].Plan != "" {
				t.Errorf("record: %+v", r)
			}
		})
	}

	// A request without a dispatch line gets a short text.
	s := New(nil)
	req := map[string]any{"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "hello"}}}},
		"tools": full["tools"]}
	name, _, text := gemStep(t, s, req)
	if name != "" || text == "" {
		t.Fatalf("want a text, got %q %q", name, text)
	}
	if r := s.Requests(); len(r) != 1 || !r[0].Side {
		t.Errorf("record: %+v", r)
	}
}

func TestGeminiCountTokensAndErrors(t *testing.T) {
	s := New(nil)
	status, out := gemPost(t, s, "/v1beta/models/gemini-3.8-flash:countTokens", gemLoad(t))
	if status != http.StatusOK || out[0]["totalTokens"].(float64) < 1 {
		t.Fatalf("countTokens: %d %v", status, out)
	}

	ts := httptest.NewServer(s)
	defer ts.Close()
	resp, err := http.Post(ts.URL+gemStream+"?alt=sse", "application/json", strings.NewReader("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Error struct {
			Code   int    `json:"code"`
			Status string `json:"status"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 400 || e.Error.Code != 400 || e.Error.Status != "INVALID_ARGUMENT" {
		t.Fatalf("bad JSON: %d %+v", resp.StatusCode, e)
	}
}
