package modelsim

// The Gemini API half of the server, as the Gemini CLI calls it with
// GOOGLE_GEMINI_BASE_URL pointing here: POST
// <base>/v1beta/models/<model>:streamGenerateContent?alt=sse for the
// agent's turns, :generateContent for its side requests (model routing,
// next-speaker and loop checks, which ask for JSON through
// generationConfig.responseJsonSchema / responseMimeType), :countTokens
// now and then. Each request carries the whole conversation in
// `contents`, so the server needs no memory.
//
// A stream is server-sent events, each `data: <GenerateContentResponse>`;
// every answer here is one event holding the whole answer (a function call
// or the final text) with finishReason STOP and usageMetadata. One event
// is on purpose: the CLI's AfterAgent hook repeats the last chunk of a
// text streamed in several chunks in its prompt_response.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"regexp"
	"strings"
)

// geminiRequest is the part of a generateContent request body the server
// reads.
type geminiRequest struct {
	Contents []geminiContent `json:"contents"`
	Tools    []struct {
		FunctionDeclarations []geminiFunction `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	} `json:"generationConfig"`
}

// geminiContent is one turn of the conversation: role "user" or "model".
type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

// geminiPart is one part of a content, as far as read here.
type geminiPart struct {
	Text             string          `json:"text"`
	Thought          bool            `json:"thought"`
	FunctionCall     json.RawMessage `json:"functionCall"`
	FunctionResponse json.RawMessage `json:"functionResponse"`
}

// geminiFunction is one function declaration the CLI offers. 0.61 sends
// the arguments schema as parametersJsonSchema (JSON Schema); the older
// `parameters` (OpenAPI subset, upper-case types) is read too.
type geminiFunction struct {
	Name                 string        `json:"name"`
	Parameters           *geminiSchema `json:"parameters"`
	ParametersJSONSchema *geminiSchema `json:"parametersJsonSchema"`
}

// geminiSchema is the properties of an arguments schema.
type geminiSchema struct {
	Properties map[string]json.RawMessage `json:"properties"`
}

// has reports whether the function takes argument p.
func (f geminiFunction) has(p string) bool {
	for _, s := range []*geminiSchema{f.ParametersJSONSchema, f.Parameters} {
		if s != nil {
			if _, ok := s.Properties[p]; ok {
				return true
			}
		}
	}
	return false
}

// text is the user-visible text of a content: its text parts (not
// thoughts) joined.
func (c geminiContent) text() string {
	var b strings.Builder
	for _, p := range c.Parts {
		if p.Text != "" && !p.Thought {
			b.WriteString(p.Text)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// function returns the declaration of the function offered under name.
func (r *geminiRequest) function(name string) (geminiFunction, bool) {
	for _, t := range r.Tools {
		for _, f := range t.FunctionDeclarations {
			if f.Name == name {
				return f, true
			}
		}
	}
	return geminiFunction{}, false
}

// offersFunctions reports whether the request offers any function.
func (r *geminiRequest) offersFunctions() bool {
	for _, t := range r.Tools {
		if len(t.FunctionDeclarations) > 0 {
			return true
		}
	}
	return false
}

// wantsJSON reports whether the request asks for a JSON answer.
func (r *geminiRequest) wantsJSON() bool {
	g := r.GenerationConfig
	return g.ResponseMimeType == "application/json" || len(g.ResponseSchema) > 0 || len(g.ResponseJSONSchema) > 0
}

// conversation finds the last user content whose text holds a dispatch
// line and counts the functionResponse parts after it (the steps of the
// script already done). ok is false when no user content holds one.
func (r *geminiRequest) conversation() (plan, notify string, results int, ok bool) {
	at := -1
	for i, c := range r.Contents {
		if c.Role != "user" && c.Role != "" {
			continue
		}
		if p, n, found := ParseDispatch(c.text()); found {
			plan, notify, at = p, n, i
		}
	}
	if at < 0 {
		return "", "", 0, false
	}
	for _, c := range r.Contents[at:] {
		for _, p := range c.Parts {
			if len(p.FunctionResponse) > 0 && string(p.FunctionResponse) != "null" {
				results++
			}
		}
	}
	return plan, notify, results, true
}

// geminiWorkdirRE finds the first workspace directory in the CLI's
// session context (the first part of the first user content):
//
//   - **Workspace Directories:**
//   - /abs/path
var geminiWorkdirRE = regexp.MustCompile(`Workspace Directories:\**\s*\n\s*-\s*(/[^\n]*?)\s*\n`)

// workdir returns the CLI's working directory as its session context
// states it, or "".
func (r *geminiRequest) workdir() string {
	for _, c := range r.Contents {
		for _, p := range c.Parts {
			if strings.Contains(p.Text, "<session_context>") {
				if m := geminiWorkdirRE.FindStringSubmatch(p.Text); m != nil {
					return m[1]
				}
			}
		}
	}
	return ""
}

// serveGemini answers the Gemini API: :streamGenerateContent,
// :generateContent and :countTokens on /v1beta/models/<model>.
func (s *Server) serveGemini(w http.ResponseWriter, r *http.Request) {
	rec := Request{API: "gemini", Path: r.URL.Path}
	model, method, _ := strings.Cut(path.Base(r.URL.Path), ":")
	if r.Method != http.MethodPost {
		rec.Action = "error 405: " + r.Method
		s.record(rec)
		geminiError(w, http.StatusMethodNotAllowed, "modelsim: POST only")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		rec.Action = "error 400: reading body"
		s.record(rec)
		geminiError(w, http.StatusBadRequest, "modelsim: reading the body: "+err.Error())
		return
	}
	var req geminiRequest
	if err := json.Unmarshal(respDecompress(r, body), &req); err != nil {
		rec.Action = "error 400: bad JSON"
		s.record(rec)
		geminiError(w, http.StatusBadRequest, "modelsim: the body is not a Gemini API request: "+err.Error())
		return
	}

	switch method {
	case "countTokens":
		rec.Side, rec.Action = true, "countTokens"
		s.record(rec)
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": len(body)/4 + 1})
		return
	case "streamGenerateContent", "generateContent":
	default:
		rec.Action = "error 404: " + method
		s.record(rec)
		geminiErrorStatus(w, http.StatusNotFound, "modelsim: no such method "+method, "NOT_FOUND")
		return
	}

	var part map[string]any // the one part of the answer
	plan, notify, results, found := req.conversation()
	if !found || req.wantsJSON() || !req.offersFunctions() {
		// A side request: routing, next-speaker and loop checks, a
		// summary, a person's prompt. Side requests quote the whole
		// history (dispatch line included) and ask for JSON, or offer
		// no tools; answering them from the script would run a step
		// twice.
		rec.Side = true
		text := geminiSideText(&req)
		rec.Action = "side: " + text
		part = map[string]any{"text": text}
	} else {
		rec.Plan, rec.Results = plan, results
		a := Next(s.scenario(plan), plan, notify, results)
		switch a.Kind {
		case Fail:
			rec.Action = fmt.Sprintf("error %d: %s", a.Status, a.Text)
			s.record(rec)
			geminiError(w, a.Status, a.Text)
			return
		case Say:
			rec.Action = "say: " + a.Text
			part = map[string]any{"text": a.Text}
		case RunCommand:
			part, rec.Action = geminiShellCall(a.Command)
		case WriteFile:
			part, rec.Action = geminiWriteCall(&req, a.Path, a.Content)
		}
	}
	s.record(rec)

	resp := map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"role": "model", "parts": []any{part}},
			"finishReason": "STOP",
			"index":        0,
		}},
		"usageMetadata": geminiUsage(body, &req, part),
		"modelVersion":  model,
		"responseId":    respID("gemini"),
	}
	if method == "generateContent" {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	b, _ := json.Marshal(resp)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "data: %s\r\n\r\n", b)
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
}

// geminiShellCall is the run_shell_command call that runs command.
func geminiShellCall(command string) (map[string]any, string) {
	return map[string]any{"functionCall": map[string]any{
		"name": "run_shell_command",
		"args": map[string]any{"command": command, "description": describe(command)},
	}}, "run_shell_command: " + command
}

// geminiWriteCall is the call that writes content to path (relative to
// the CLI's working directory): write_file {file_path, content} when
// offered, with the path made absolute from the session context when it
// names the working directory, otherwise the shell with a heredoc.
// (Headless without an approval mode that allows edits, the CLI leaves
// write_file out of the declarations.)
func geminiWriteCall(req *geminiRequest, p, content string) (map[string]any, string) {
	if f, ok := req.function("write_file"); ok && f.has("file_path") && f.has("content") {
		if dir := req.workdir(); dir != "" && !path.IsAbs(p) {
			p = path.Join(dir, p)
		}
		return map[string]any{"functionCall": map[string]any{
			"name": "write_file",
			"args": map[string]any{"file_path": p, "content": content},
		}}, "write_file: " + p
	}
	part, _ := geminiShellCall(heredoc(p, content))
	return part, "run_shell_command heredoc: " + p
}

// geminiSideText is the answer to a side request: JSON that fits the
// requested schema (responseJsonSchema or the OpenAPI-style
// responseSchema), "{}" when only JSON is asked for, else a short text.
func geminiSideText(req *geminiRequest) string {
	g := req.GenerationConfig
	for _, raw := range []json.RawMessage{g.ResponseJSONSchema, g.ResponseSchema} {
		var schema map[string]any
		if len(raw) > 0 && json.Unmarshal(raw, &schema) == nil {
			b, _ := json.Marshal(geminiFillSchema(schema))
			return string(b)
		}
	}
	if req.wantsJSON() {
		return "{}"
	}
	return "OK."
}

// geminiFillSchema is a small value of the shape a schema describes
// (JSON Schema or the Gemini API's OpenAPI subset with upper-case types):
// every property of an object, strings "modelsim", integers 1 and numbers
// 0 (or the minimum), false, an empty list, the first value of an enum. The first enum value is what
// the CLI's checks expect of a quiet model: next_speaker "user".
func geminiFillSchema(schema map[string]any) any {
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	typ, _ := schema["type"].(string)
	if types, ok := schema["type"].([]any); ok && len(types) > 0 {
		typ, _ = types[0].(string)
	}
	switch strings.ToLower(typ) {
	case "object":
		out := map[string]any{}
		props, _ := schema["properties"].(map[string]any)
		for k, p := range props {
			if ps, ok := p.(map[string]any); ok {
				out[k] = geminiFillSchema(ps)
			}
		}
		return out
	case "array":
		return []any{}
	case "boolean":
		return false
	case "integer":
		// The CLI's router validates complexity_score as 1 to 100.
		if m, ok := schema["minimum"].(float64); ok {
			return m
		}
		return 1
	case "number":
		// 0: the loop check's unproductive_state_confidence, "no loop".
		if m, ok := schema["minimum"].(float64); ok {
			return m
		}
		return 0
	case "null":
		return nil
	}
	return "modelsim"
}

// geminiUsage is a plausible usageMetadata: about four bytes a token, and
// the conversation before its last content counted as cached (as the
// implicit cache of the previous request would hold it).
func geminiUsage(body []byte, req *geminiRequest, part map[string]any) map[string]any {
	out, _ := json.Marshal(part)
	prompt, cand := len(body)/4+1, len(out)/4+1
	cached := 0
	if n := len(req.Contents); n > 1 {
		prev, _ := json.Marshal(req.Contents[:n-1])
		cached = min(len(prev)/4, prompt)
	}
	return map[string]any{
		"promptTokenCount":        prompt,
		"candidatesTokenCount":    cand,
		"totalTokenCount":         prompt + cand,
		"cachedContentTokenCount": cached,
	}
}

// geminiError answers with Google's error JSON, status INVALID_ARGUMENT
// (or the canonical status for other HTTP codes).
func geminiError(w http.ResponseWriter, code int, msg string) {
	status := map[int]string{
		400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
		404: "NOT_FOUND", 405: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED",
		500: "INTERNAL", 503: "UNAVAILABLE",
	}[code]
	if status == "" {
		status = "UNKNOWN"
	}
	geminiErrorStatus(w, code, msg, status)
}

func geminiErrorStatus(w http.ResponseWriter, code int, msg, status string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}
