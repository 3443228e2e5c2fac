package fleet

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLastLogLine(t *testing.T) {
	dir := t.TempDir()
	for name, tt := range map[string]struct{ log, want string }{
		"gemini": {`Ripgrep is not available.
Error when talking to Gemini API Full report available at: /tmp/x.json _ApiError: {"error":{"code":400,"message":"bad plan","status":"INVALID_ARGUMENT"}}
    at throwErrorIfNotOK (file:///x.js:1:2)
    at async Turn.run (file:///x.js:3:4) {
  status: 400
}
An unexpected critical error occurred:[object Object]
`, "INVALID_ARGUMENT: bad plan"},
		"codex": {"ERROR: unexpected status 400 Bad Request: {\"error\":{\"code\":null,\"message\":\"no\",\"type\":\"invalid_request_error\"}}\n", "invalid_request_error: no"},
		"plain": {"working\nsomething broke: disk full\n\n", "something broke: disk full"},
		"empty": {"", ""},
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(tt.log), 0o600)
		if got := LastLogLine(p); got != tt.want {
			t.Errorf("%s: %q; want %q", name, got, tt.want)
		}
	}
}

func TestCapLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p-1.log")
	big := make([]byte, MaxLog+1000)
	for i := range big {
		big[i] = 'a'
	}
	copy(big[len(big)-4:], "tail")
	if err := os.WriteFile(path, big, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := capLog(path); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if len(got) > MaxLog+100 || string(got[len(got)-4:]) != "tail" {
		t.Fatalf("cut log: %d bytes, ends %q", len(got), got[len(got)-4:])
	}
	small := filepath.Join(t.TempDir(), "s.log")
	os.WriteFile(small, []byte("short\n"), 0o600)
	if err := capLog(small); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(small); string(got) != "short\n" {
		t.Fatalf("a short log changed: %q", got)
	}
}
