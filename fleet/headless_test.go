package fleet

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/orch-dev/orch/internal/state"
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

// UpHeadless keeps what it found gone for the loop: a recorded process
// that no longer runs is an exit of unknown status, and a plan whose
// process was never recorded (the lead stopped before its go) is lost.
func TestUpHeadlessFindsGone(t *testing.T) {
	fl := testFleet(t, Config{Agent: "true"})
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	st := state.New()
	st.Plans["p"] = &state.Run{Name: "p", State: state.PlanRunning, Worker: "w2", Attempts: 2}
	st.Plans["q"] = &state.Run{Name: "q", State: state.PlanDispatched, Worker: "w1", Attempts: 1}
	st.Workers = []*state.Worker{
		{ID: "w2", State: state.WorkerBusy, Plan: "p", PID: gone.Process.Pid, Headless: true},
		{ID: "w1", State: state.WorkerBusy, Plan: "q", Headless: true},
	}
	if err := fl.UpHeadless(st, 2); err != nil {
		t.Fatal(err)
	}
	if st.Workers[0].ID != "w1" {
		t.Fatalf("workers not in order: %s first", st.Workers[0].ID)
	}
	want := Exit{Worker: "w2", Plan: "p", Attempt: 2, PID: gone.Process.Pid, How: "ended while orch serve was down (" + UnknownStatus + ")"}
	if exits := fl.TakeExits(); len(exits) != 1 || exits[0] != want {
		t.Fatalf("exits %+v; want %+v", exits, want)
	}
	if lost := fl.TakeLost(); len(lost) != 1 || lost[0] != (Lost{Worker: "w1", Plan: "q", Attempt: 1}) {
		t.Fatalf("lost %+v", lost)
	}
	if len(fl.TakeExits())+len(fl.TakeLost()) != 0 {
		t.Fatal("taken twice")
	}
}
