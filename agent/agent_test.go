package agent

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orch-dev/orch/config"
)

func TestPackageDoc(t *testing.T) {
	n := 0
	for _, name := range []string{"agent.go", "hooks.go"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(b), "// Package agent ")
	}
	if n != 1 {
		t.Errorf("want exactly one // Package agent doc comment, got %d", n)
	}
}

func TestResolve(t *testing.T) {
	cfg, err := config.Parse([]byte(`agents:
  claude:
    interactive: claude --model opus
  mine:
    interactive: my-agent --tui
    headless: my-agent run --prompt {prompt} --quiet
    version: my-agent version
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in                          string
		name, interactive, headless string
		hooks                       string
	}{
		{"codex", "codex", "codex", "codex exec {prompt}", HooksCodex},
		{"gemini", "gemini", "gemini", "gemini -p {prompt}", ""},
		{"aider", "aider", "aider", "aider --yes-always --message {prompt}", ""},
		// orch.yaml overrides one field; the others stay the built-in's.
		{"claude", "claude", "claude --model opus", "claude -p {prompt}", HooksClaude},
		{"  mine ", "mine", "my-agent --tui", "my-agent run --prompt {prompt} --quiet", ""},
		// A profile name with more words keeps the profile and its hooks.
		{"codex --model o3", "codex", "codex --model o3", "codex exec {prompt} --model o3", HooksCodex},
		// Anything else is a plain command.
		{"orch agent", "", "orch agent", "orch agent {prompt}", ""},
		{"cat", "", "cat", "cat {prompt}", ""},
		{"claudette", "", "claudette", "claudette {prompt}", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := Resolve(tt.in, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != tt.name || p.Interactive != tt.interactive || p.Headless != tt.headless || p.Hooks != tt.hooks {
				t.Errorf("Resolve(%q) = %+v; want name %q interactive %q headless %q hooks %q", tt.in, p, tt.name, tt.interactive, tt.headless, tt.hooks)
			}
		})
	}
	if _, err := Resolve("  ", cfg); !errors.Is(err, ErrNoAgent) || !strings.Contains(err.Error(), "claude, codex") {
		t.Errorf("empty agent: %v; want ErrNoAgent naming the profiles", err)
	}
	// Without orch.yaml the built-in stands.
	p, err := Resolve("claude", nil)
	if err != nil || p.Interactive != "claude" || !p.Builtin {
		t.Errorf("Resolve(claude, nil) = %+v, %v", p, err)
	}
	if got := Names(cfg); strings.Join(got, ",") != "aider,claude,codex,gemini,mine" {
		t.Errorf("Names = %v", got)
	}
}

func TestHeadlessCommandQuotesThePrompt(t *testing.T) {
	prompt := `Read plans/x/PLAN.md. Last step: run orch-notify done x "<one-line status>" (it's $HOME; rm -rf / ` + "`id`)"
	tests := []struct {
		profile string
		want    string
	}{
		{"claude", "claude -p " + Quote(prompt)},
		{"aider", "aider --yes-always --message " + Quote(prompt)},
		{"my-agent --flag", "my-agent --flag " + Quote(prompt)},
	}
	for _, tt := range tests {
		p, err := Resolve(tt.profile, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := p.HeadlessCommand(prompt, "")
		if got != tt.want {
			t.Errorf("%s: HeadlessCommand = %s; want %s", tt.profile, got, tt.want)
		}
		// The shell must hand the prompt over as one argument, unchanged.
		sh := strings.Replace(got, strings.Fields(tt.want)[0], "printf '%s\\n'", 1)
		out, err := exec.Command("sh", "-c", sh).Output()
		if err != nil {
			t.Fatalf("sh -c %s: %v", sh, err)
		}
		if last := strings.Split(strings.TrimRight(string(out), "\n"), "\n"); last[len(last)-1] != prompt {
			t.Errorf("%s: the shell gave %q; want the prompt %q", tt.profile, last[len(last)-1], prompt)
		}
	}
	// A headless command without {prompt} gets the prompt last; hook args follow.
	p := Profile{Name: "x"}
	p.Headless = "x run"
	if got := p.HeadlessCommand("a b", "--settings '/s'"); got != "x run 'a b' --settings '/s'" {
		t.Errorf("HeadlessCommand = %q", got)
	}
}

func TestProgram(t *testing.T) {
	for in, want := range map[string]string{
		"claude":                    "claude",
		"FOO=1 BAR='x' claude -c":   "claude",
		"exec /opt/bin/aider --yes": "/opt/bin/aider",
		"env A=b codex":             "codex",
	} {
		if got := program(in); got != want {
			t.Errorf("program(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestCheckNamesTheMissingProgram(t *testing.T) {
	p, _ := Resolve("no-such-agent-xyz --flag", nil)
	_, err := p.Check()
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), `"no-such-agent-xyz" is not on PATH`) {
		t.Errorf("Check = %v; want ErrNotInstalled naming the program", err)
	}
	p, _ = Resolve("sh", nil)
	if path, err := p.Check(); err != nil || !filepath.IsAbs(path) {
		t.Errorf("Check(sh) = %q, %v", path, err)
	}
}

func TestInstallHooksClaude(t *testing.T) {
	orchDir := filepath.Join(t.TempDir(), ".orch")
	p, _ := Resolve("claude", nil)
	notifyBin := "/opt/my tools/orch-notify"
	args, err := p.InstallHooks(orchDir, "w2", notifyBin)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(orchDir, "agents", "w2", "claude-settings.json")
	if args != "--settings "+Quote(path) {
		t.Errorf("args = %q; want --settings %s", args, Quote(path))
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("settings mode %o; want 600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Errorf("settings directory mode %o; want 700", di.Mode().Perm())
	}
	var s struct {
		Hooks map[string][]struct {
			Matcher *string `json:"matcher"`
			Hooks   []struct {
				Type    string `json:"type"`
				Command string `json:"command"`
				Timeout int    `json:"timeout"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("settings are not JSON: %v\n%s", err, data)
	}
	if len(s.Hooks) != len(ClaudeHookEvents) {
		t.Errorf("hooks for %d events; want %v", len(s.Hooks), ClaudeHookEvents)
	}
	for _, ev := range ClaudeHookEvents {
		m := s.Hooks[ev]
		if len(m) != 1 || len(m[0].Hooks) != 1 {
			t.Fatalf("%s: %+v; want one command hook", ev, m)
		}
		h := m[0].Hooks[0]
		if h.Type != "command" || h.Command != "'/opt/my tools/orch-notify' hook claude" || h.Timeout <= 0 {
			t.Errorf("%s: hook %+v", ev, h)
		}
	}
	// Nothing secret: no credentials, no broker URL, no token.
	for _, secret := range []string{"SU", "nats://", "ORCH_TOKEN", "creds"} {
		if strings.Contains(string(data), secret) {
			t.Errorf("settings file holds %q:\n%s", secret, data)
		}
	}
	// Installing again (a pane restarted) rewrites the same file.
	if again, err := p.InstallHooks(orchDir, "w2", notifyBin); err != nil || again != args {
		t.Errorf("second install = %q, %v", again, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("agents/w2 holds %d files; want 1 (no temporary files left)", len(entries))
	}
}

func TestInstallHooksCodexAndNone(t *testing.T) {
	orchDir := filepath.Join(t.TempDir(), ".orch")
	p, _ := Resolve("codex", nil)
	args, err := p.InstallHooks(orchDir, "w1", `/bin/orch "x"/orch-notify`)
	if err != nil {
		t.Fatal(err)
	}
	want := `-c 'notify=["/bin/orch \"x\"/orch-notify", "hook", "codex"]'`
	if args != want {
		t.Errorf("codex hook args = %s; want %s", args, want)
	}
	if _, err := os.Stat(orchDir); !os.IsNotExist(err) {
		t.Errorf("codex hooks wrote into %s", orchDir)
	}
	for _, name := range []string{"gemini", "aider", "some-command"} {
		p, _ := Resolve(name, nil)
		if args, err := p.InstallHooks(orchDir, "w1", "orch-notify"); args != "" || err != nil {
			t.Errorf("%s: InstallHooks = %q, %v; want nothing", name, args, err)
		}
	}
	if got := p.InteractiveCommand(args); got != "codex "+want {
		t.Errorf("InteractiveCommand = %s", got)
	}
}
