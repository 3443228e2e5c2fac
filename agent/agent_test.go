package agent

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
		{"gemini", "gemini", "gemini", "gemini -p {prompt}", HooksGemini},
		{"aider", "aider", "aider", "aider --yes-always --message {prompt}", ""},
		// orch.yaml overrides one field; the others stay the built-in's.
		{"claude", "claude", "claude --model opus", "claude -p --output-format json {prompt}", HooksClaude},
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
		{"claude", "claude -p --output-format json " + Quote(prompt)},
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

func TestPrepareClaude(t *testing.T) {
	dir := t.TempDir()
	orchDir := filepath.Join(dir, "repo", ".orch")
	home := filepath.Join(dir, "home")
	os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
	// The user's own files: their state (with another project's history),
	// their login and settings.
	userState := `{"userID":"u1","theme":"light","oauthAccount":{"emailAddress":"me@example.com"},"projects":{"/elsewhere":{"history":["secret prompt"]}},"numStartups":40}`
	os.WriteFile(filepath.Join(home, ".claude.json"), []byte(userState), 0o600)
	os.WriteFile(filepath.Join(home, ".claude", ".credentials.json"), []byte(`{"token":"t"}`), 0o600)
	os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(`{"model":"opus"}`), 0o644)
	env := map[string]string{"HOME": home, "ANTHROPIC_API_KEY": "sk-ant-0123456789-ABCDEFGHIJKLMNOPQRST"}
	w := WorkerSpec{OrchDir: orchDir, Root: filepath.Join(dir, "repo"), Dir: filepath.Join(orchDir, "worktrees", "w2"), ID: "w2",
		NotifyBin: "/opt/my tools/orch-notify", Getenv: func(k string) string { return env[k] }}
	p, _ := Resolve("claude", nil)
	s, err := p.Prepare(w)
	if err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(orchDir, "agents", "w2", "claude-settings.json")
	cfgDir := filepath.Join(orchDir, "agents", "w2", "claude")
	if s.Args != "--settings "+Quote(settings) {
		t.Errorf("args = %q", s.Args)
	}
	if s.Env["CLAUDE_CONFIG_DIR"] != cfgDir || s.Env["DISABLE_AUTOUPDATER"] != "1" {
		t.Errorf("env = %v", s.Env)
	}
	if target, err := os.Readlink(filepath.Join(cfgDir, ".credentials.json")); err != nil || target != filepath.Join(home, ".claude", ".credentials.json") {
		t.Errorf("credentials: %q, %v; want a link to the user's (one refresh token for all)", target, err)
	}
	for _, f := range []string{settings, filepath.Join(cfgDir, ".claude.json"), filepath.Join(cfgDir, "settings.json")} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %o; want 600", f, fi.Mode().Perm())
		}
	}
	if di, _ := os.Stat(cfgDir); di.Mode().Perm() != 0o700 {
		t.Errorf("config dir mode %o; want 700", di.Mode().Perm())
	}
	var st map[string]any
	data, _ := os.ReadFile(filepath.Join(cfgDir, ".claude.json"))
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	projects := st["projects"].(map[string]any)
	for _, d := range []string{w.Root, w.Dir} {
		if pr, _ := projects[d].(map[string]any); pr["hasTrustDialogAccepted"] != true {
			t.Errorf("%s not trusted: %v", d, projects)
		}
	}
	if _, ok := projects["/elsewhere"]; ok || strings.Contains(string(data), "secret prompt") {
		t.Errorf("the user's other projects were copied:\n%s", data)
	}
	approved := st["customApiKeyResponses"].(map[string]any)["approved"].([]any)
	if len(approved) != 1 || approved[0] != "ABCDEFGHIJKLMNOPQRST" {
		t.Errorf("approved keys %v; want the key's last 20 characters", approved)
	}
	if st["hasCompletedOnboarding"] != true || st["userID"] != "u1" || st["theme"] != "light" || st["fullscreenUpsellSeenCount"] != 3.0 || st["autoUpdates"] != false {
		t.Errorf("state %v", st)
	}
	if _, ok := st["numStartups"]; ok {
		t.Error("numStartups copied: only who the user is and what they answered are")
	}
	// The user's files are as they were.
	if got, _ := os.ReadFile(filepath.Join(home, ".claude.json")); string(got) != userState {
		t.Errorf("user's .claude.json changed: %s", got)
	}
	// The settings: hooks, acceptEdits, orch-notify allowed by path and name.
	var set struct {
		Permissions struct {
			DefaultMode string   `json:"defaultMode"`
			Allow       []string `json:"allow"`
			Deny        []string `json:"deny"`
		} `json:"permissions"`
		Hooks map[string][]struct {
			Hooks []struct {
				Type    string `json:"type"`
				Command string `json:"command"`
				Timeout int    `json:"timeout"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	data, _ = os.ReadFile(settings)
	if err := json.Unmarshal(data, &set); err != nil {
		t.Fatal(err)
	}
	if set.Permissions.DefaultMode != "acceptEdits" || strings.Join(set.Permissions.Allow, ",") != "Bash(/opt/my tools/orch-notify:*),Bash(orch-notify:*)" ||
		!slices.Contains(set.Permissions.Deny, "Edit(/"+orchDir+"/state.json)") || !slices.Contains(set.Permissions.Deny, "Edit(/"+orchDir+"/agents/**)") ||
		slices.ContainsFunc(set.Permissions.Deny, func(r string) bool {
			return strings.Contains(r, "worktrees") || strings.HasSuffix(r, ".orch/**)") || strings.HasSuffix(r, "/*)")
		}) {
		t.Errorf("permissions %+v", set.Permissions)
	}
	if len(set.Hooks) != len(ClaudeHookEvents) {
		t.Errorf("hooks for %d events; want %v", len(set.Hooks), ClaudeHookEvents)
	}
	for _, ev := range ClaudeHookEvents {
		m := set.Hooks[ev]
		if len(m) != 1 || len(m[0].Hooks) != 1 || m[0].Hooks[0].Command != "'/opt/my tools/orch-notify' hook claude" || m[0].Hooks[0].Timeout <= 0 {
			t.Errorf("%s: %+v; want one orch-notify hook", ev, m)
		}
	}
	for _, secret := range []string{"SU", "nats://", "ORCH_TOKEN", ".seed", ".creds", ".nk", "sk-ant"} {
		if strings.Contains(string(data), secret) {
			t.Errorf("settings file holds %q:\n%s", secret, data)
		}
	}
	// A second start keeps what Claude Code wrote, and approves the key once.
	st["numStartups"] = 7.0
	data, _ = json.Marshal(st)
	os.WriteFile(filepath.Join(cfgDir, ".claude.json"), data, 0o600)
	if _, err := p.Prepare(w); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(filepath.Join(cfgDir, ".claude.json"))
	json.Unmarshal(data, &st)
	if st["numStartups"] != 7.0 || len(st["customApiKeyResponses"].(map[string]any)["approved"].([]any)) != 1 {
		t.Errorf("second start: %s", data)
	}
	// permissions: agent adds none; skip adds the flag and accepts its warning.
	w.Permissions = config.PermAgent
	p.Prepare(w)
	data, _ = os.ReadFile(settings)
	if strings.Contains(string(data), "allow") || strings.Contains(string(data), "defaultMode") {
		t.Errorf("permissions: agent allowed something:\n%s", data)
	}
	w.Permissions = config.PermSkip
	if s, _ := p.Prepare(w); !strings.HasSuffix(s.Args, " --dangerously-skip-permissions") {
		t.Errorf("skip: args %q", s.Args)
	}
}

func TestPrepareCodex(t *testing.T) {
	dir := t.TempDir()
	orchDir := filepath.Join(dir, `re"po`, ".orch")
	home := filepath.Join(dir, "home")
	os.MkdirAll(filepath.Join(home, ".codex"), 0o755)
	os.WriteFile(filepath.Join(home, ".codex", "auth.json"), []byte(`{"k":1}`), 0o600)
	os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte("model = \"gpt-5.5\"\n"), 0o644)
	w := WorkerSpec{OrchDir: orchDir, Root: filepath.Dir(orchDir), Dir: filepath.Join(orchDir, "worktrees", "w1"), ID: "w1",
		NotifyBin: "/bin/orch-notify", Getenv: func(k string) string { return map[string]string{"HOME": home}[k] }}
	p, _ := Resolve("codex", nil)
	s, err := p.Prepare(w)
	if err != nil {
		t.Fatal(err)
	}
	codexHome := filepath.Join(orchDir, "agents", "w1", "codex")
	if s.Env["CODEX_HOME"] != codexHome {
		t.Errorf("env %v", s.Env)
	}
	root := filepath.Dir(orchDir)
	rootTOML := strings.ReplaceAll(root, `"`, `\"`)
	for _, want := range []string{
		`-c 'notify=["/bin/orch-notify", "hook", "codex"]'`,
		`-c 'projects={"` + rootTOML + `"={trust_level="trusted"},"` + rootTOML + `/.orch/worktrees/w1"={trust_level="trusted"}}'`,
		`-c 'sandbox_mode="workspace-write"'`,
		`-c 'sandbox_workspace_write.network_access=true'`,
		`-c 'sandbox_workspace_write.writable_roots=["` + rootTOML + `/.orch/spool"]'`,
		`-c 'features.daemon_auto_start=false'`,
		`-c 'check_for_update_on_startup=false'`,
		`-c 'disable_paste_burst=true'`,
	} {
		if !strings.Contains(s.Args, want) {
			t.Errorf("args lack %s:\n%s", want, s.Args)
		}
	}
	if fi, err := os.Stat(filepath.Join(codexHome, "config.toml")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("config.toml not copied with mode 600: %v", err)
	}
	if target, err := os.Readlink(filepath.Join(codexHome, "auth.json")); err != nil || target != filepath.Join(home, ".codex", "auth.json") {
		t.Errorf("auth.json: %q, %v; want a link to the user's", target, err)
	}
	w.Permissions = config.PermSkip
	s, _ = p.Prepare(w)
	if strings.Contains(s.Args, "sandbox_mode") || !strings.Contains(s.Args, "--dangerously-bypass-approvals-and-sandbox") {
		t.Errorf("skip: %s", s.Args)
	}
	for _, name := range []string{"aider", "some-command"} {
		p, _ := Resolve(name, nil)
		if s, err := p.Prepare(w); s.Args != "" || len(s.Env) != 0 || err != nil {
			t.Errorf("%s: Prepare = %+v, %v; want nothing", name, s, err)
		}
	}
}

func TestTOMLString(t *testing.T) {
	for in, want := range map[string]string{
		`/a b/"x"\y`: `"/a b/\"x\"\\y"`,
		"tab\there":  `"tab\u0009here"`,
		"nl\n\x1b":   `"nl\u000A\u001B"`,
		"ünï":        `"ünï"`,
	} {
		if got := tomlString(in); got != want {
			t.Errorf("tomlString(%q) = %s; want %s", in, got, want)
		}
	}
}

func TestPrepareGemini(t *testing.T) {
	dir := t.TempDir()
	orchDir := filepath.Join(dir, "repo", ".orch")
	home := filepath.Join(dir, "home")
	os.MkdirAll(filepath.Join(home, ".gemini"), 0o755)
	userSettings := `{"ui":{"theme":"Dracula"},"hooks":{"AfterAgent":[{"hooks":[{"type":"command","command":"mine"}]}]}}`
	os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(userSettings), 0o600)
	os.WriteFile(filepath.Join(home, ".gemini", "oauth_creds.json"), []byte(`{}`), 0o600)
	env := map[string]string{"HOME": home, "GEMINI_API_KEY": "k"}
	w := WorkerSpec{OrchDir: orchDir, Root: filepath.Dir(orchDir), Dir: filepath.Join(orchDir, "worktrees", "w1"), ID: "w1",
		NotifyBin: "/bin/orch-notify", Getenv: func(k string) string { return env[k] }}
	p, _ := Resolve("gemini", nil)
	s, err := p.Prepare(w)
	if err != nil {
		t.Fatal(err)
	}
	ghome := filepath.Join(orchDir, "agents", "w1", "gemini")
	if s.Args != "--approval-mode auto_edit" || s.Env["GEMINI_CLI_HOME"] != ghome || s.Env["GEMINI_CLI_TRUST_WORKSPACE"] != "true" || s.Env["GEMINI_CLI_NO_RELAUNCH"] != "true" {
		t.Errorf("setup %+v", s)
	}
	var set struct {
		UI       map[string]any `json:"ui"`
		General  map[string]any `json:"general"`
		Security struct {
			Auth map[string]any `json:"auth"`
		} `json:"security"`
		Hooks map[string][]struct {
			Hooks []struct {
				Command string `json:"command"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	data, _ := os.ReadFile(filepath.Join(ghome, ".gemini", "settings.json"))
	if err := json.Unmarshal(data, &set); err != nil {
		t.Fatal(err)
	}
	if set.UI["theme"] != "Dracula" || set.General["enableAutoUpdate"] != false || set.Security.Auth["selectedType"] != "gemini-api-key" {
		t.Errorf("settings %s", data)
	}
	after := set.Hooks["AfterAgent"]
	if len(after) != 2 || after[0].Hooks[0].Command != "mine" || after[1].Hooks[0].Command != "'/bin/orch-notify' hook gemini" {
		t.Errorf("AfterAgent hooks %+v; want the user's, then orch's", after)
	}
	for _, ev := range GeminiHookEvents {
		if len(set.Hooks[ev]) == 0 {
			t.Errorf("no %s hook", ev)
		}
	}
	policy, _ := os.ReadFile(filepath.Join(ghome, ".gemini", "policies", "orch.toml"))
	if !strings.Contains(string(policy), `commandPrefix = "/bin/orch-notify"`) || !strings.Contains(string(policy), `decision = "allow"`) {
		t.Errorf("policy %s", policy)
	}
	if target, _ := os.Readlink(filepath.Join(ghome, ".gemini", "oauth_creds.json")); target != filepath.Join(home, ".gemini", "oauth_creds.json") {
		t.Errorf("login not linked: %q", target)
	}
	if got, _ := os.ReadFile(filepath.Join(home, ".gemini", "settings.json")); string(got) != userSettings {
		t.Errorf("user's settings changed: %s", got)
	}
	w.Permissions = config.PermSkip
	if s, _ := p.Prepare(w); s.Args != "--approval-mode yolo" {
		t.Errorf("skip: %q", s.Args)
	}
	if _, err := os.Stat(filepath.Join(ghome, ".gemini", "policies", "orch.toml")); !os.IsNotExist(err) {
		t.Error("skip kept the worktree policy file")
	}
}
