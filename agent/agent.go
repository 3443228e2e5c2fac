// Package agent knows how to run each coding agent a worker can be: how to
// start it interactively in a pane, how to run it headless with a prompt,
// how to ask its version, and how to install its hooks so that the agent
// itself tells the lead loop (through orch-notify hook) when it waits for a
// person, ends a turn, or fails.
//
// Built-in profiles cover Claude Code, Codex CLI, Gemini CLI and aider;
// orch.yaml's agents: map adds profiles or overrides fields of built-in ones
// by name. Anything that is not a profile name is a plain command.
package agent

import (
	"fmt"
	"os/exec"
	"sort"
	"strings"

	"github.com/orch-dev/orch/config"
)

// PromptVar stands for the dispatch line, shell-quoted, in a headless command.
const PromptVar = "{prompt}"

// Hook styles a profile can install.
const (
	HooksClaude = "claude"
	HooksCodex  = "codex"
	HooksGemini = "gemini"
)

// Profile is one way to run an agent.
type Profile struct {
	// Name is the profile's name; empty for a plain command.
	Name string `json:"name"`
	config.Profile
	// Builtin is set for the profiles orch ships (possibly with fields
	// overridden by orch.yaml).
	Builtin bool `json:"builtin,omitempty"`
}

// builtins are the profiles orch knows without an orch.yaml.
var builtins = map[string]config.Profile{
	"claude": {Interactive: "claude", Headless: "claude -p --output-format json {prompt}", Version: "claude --version", Hooks: HooksClaude},
	"codex":  {Interactive: "codex", Headless: "codex exec {prompt}", Version: "codex --version", Hooks: HooksCodex},
	"gemini": {Interactive: "gemini", Headless: "gemini -p {prompt}", Version: "gemini --version", Hooks: HooksGemini},
	"aider":  {Interactive: "aider", Headless: "aider --yes-always --message {prompt}", Version: "aider --version"},
}

// notInstalled is an ErrNotInstalled whose text is only the explanation.
type notInstalled string

func (e notInstalled) Error() string        { return string(e) }
func (e notInstalled) Is(target error) bool { return target == ErrNotInstalled }

// Profiles returns every named profile: the built-ins with orch.yaml's
// fields laid over them, and orch.yaml's own, sorted by name. cfg may be nil.
func Profiles(cfg *config.Config) []Profile {
	byName := map[string]Profile{}
	for n, p := range builtins {
		byName[n] = Profile{Name: n, Profile: p, Builtin: true}
	}
	if cfg != nil {
		for n, o := range cfg.Agents {
			p := byName[n]
			p.Name = n
			p.Profile = overlay(p.Profile, o)
			byName[n] = p
		}
	}
	out := make([]Profile, 0, len(byName))
	for _, p := range byName {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// overlay lays the fields orch.yaml gives over a built-in profile: a field
// left out keeps the built-in's value.
func overlay(base, o config.Profile) config.Profile {
	if o.Interactive != "" {
		base.Interactive = o.Interactive
	}
	if o.Headless != "" {
		base.Headless = o.Headless
	}
	if o.Version != "" {
		base.Version = o.Version
	}
	if o.Hooks != "" {
		base.Hooks = o.Hooks
	}
	return base
}

// Resolve turns what --agent was given into a profile. A profile name
// (built-in or from orch.yaml) gives that profile. A command whose first
// word is a profile name gives that profile with the remaining words added
// to its interactive and headless commands ("claude --model opus" keeps
// Claude Code's hooks). Anything else is a plain command: interactive is
// the command itself, headless is the command with the prompt as its last
// argument, and no hooks.
func Resolve(nameOrCommand string, cfg *config.Config) (Profile, error) {
	s := strings.TrimSpace(nameOrCommand)
	if s == "" {
		return Profile{}, fmt.Errorf("%w: give --agent a profile name (%s) or a command", ErrNoAgent, strings.Join(Names(cfg), ", "))
	}
	if strings.ContainsAny(s, "\n\r") {
		return Profile{}, fmt.Errorf("%w: --agent %q spans several lines: give one command line", ErrNoAgent, s)
	}
	first, rest, _ := strings.Cut(s, " ")
	rest = strings.TrimSpace(rest)
	for _, p := range Profiles(cfg) {
		if p.Name != first {
			continue
		}
		if p.Interactive == "" {
			return Profile{}, fmt.Errorf("%w: profile %s in %s has no interactive command: add interactive: \"<command>\"", ErrNoAgent, p.Name, config.File)
		}
		if rest != "" {
			p.Interactive += " " + rest
			if p.Headless != "" {
				p.Headless += " " + rest
			}
		}
		return p, nil
	}
	return Profile{Profile: config.Profile{Interactive: s, Headless: s + " " + PromptVar}}, nil
}

// Names lists the profile names, sorted.
func Names(cfg *config.Config) []string {
	var out []string
	for _, p := range Profiles(cfg) {
		out = append(out, p.Name)
	}
	return out
}

// Label names the profile for messages: its name, or the plain command.
func (p Profile) Label() string {
	if p.Name != "" {
		return "profile " + p.Name
	}
	return "command " + Quote(p.Interactive)
}

// Program is the program the interactive command runs: its first word that
// is not an environment assignment (VAR=value).
func (p Profile) Program() string {
	return program(p.Interactive)
}

func program(cmd string) string {
	for _, f := range strings.Fields(cmd) {
		if i := strings.IndexByte(f, '='); i > 0 && !strings.ContainsAny(f[:i], "/'\"") {
			continue
		}
		if f == "exec" || f == "env" {
			continue
		}
		return strings.Trim(f, `'"`)
	}
	return ""
}

// Check says whether the profile's program can be started: an error
// naming the program and the fix when it is not on PATH. It runs nothing.
func (p Profile) Check() (string, error) {
	prog := p.Program()
	if prog == "" {
		return "", fmt.Errorf("%w: %s has an empty interactive command", ErrNoAgent, p.Label())
	}
	path, err := exec.LookPath(prog)
	if err != nil {
		return "", notInstalled(fmt.Sprintf("%q is not on PATH: %s", prog, p.InstallHint()))
	}
	return path, nil
}

// InstallHint says how to get the profile's program.
func (p Profile) InstallHint() string {
	if p.Builtin {
		switch p.Name {
		case "claude":
			return "install Claude Code (npm install -g @anthropic-ai/claude-code), or give --agent the full path"
		case "codex":
			return "install Codex CLI (npm install -g @openai/codex), or give --agent the full path"
		case "gemini":
			return "install Gemini CLI (npm install -g @google/gemini-cli), or give --agent the full path"
		case "aider":
			return "install aider (python -m pip install aider-install && aider-install), or give --agent the full path"
		}
	}
	if p.Name != "" {
		return fmt.Sprintf("install it, or set agents.%s.interactive in %s to its full path", p.Name, config.File)
	}
	return "install it or give --agent its full path"
}

// InteractiveCommand is the shell command a worker pane runs: the
// interactive command and the arguments Prepare returned.
func (p Profile) InteractiveCommand(hookArgs string) string {
	return join(p.Interactive, hookArgs)
}

// HeadlessCommand is the shell command that runs the agent on one prompt
// without a terminal: {prompt} in the headless command is replaced by the
// prompt, shell-quoted (a headless command without {prompt} gets it as
// its last argument), followed by the hook arguments.
func (p Profile) HeadlessCommand(prompt, hookArgs string) string {
	h := p.Headless
	if h == "" {
		h = p.Interactive + " " + PromptVar
	}
	q := Quote(prompt)
	if strings.Contains(h, PromptVar) {
		h = strings.ReplaceAll(h, PromptVar, q)
	} else {
		h += " " + q
	}
	return join(h, hookArgs)
}

func join(cmd, extra string) string {
	if extra == "" {
		return cmd
	}
	return cmd + " " + extra
}

// Quote quotes s as one word for a POSIX shell.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
