package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/spf13/cobra"
)

// repoRoot finds the repo the command is about, from the working directory.
func repoRoot(ctx context.Context) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, err := orchctl.FindRoot(ctx, wd)
	if err != nil {
		return "", fmt.Errorf("%w (run orch inside a git repository, after orch init)", err)
	}
	return root, nil
}

// tmuxSocket is the tmux server orch talks to: ORCH_TMUX_SOCKET (tmux -L),
// or the user's default server.
func tmuxSocket() string { return os.Getenv("ORCH_TMUX_SOCKET") }

// binDir is the directory holding orch-notify, put first on the workers'
// PATH: the one on our PATH, else the one next to the running orch.
func binDir() string {
	if p, err := exec.LookPath("orch-notify"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return filepath.Dir(abs)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return filepath.Dir(exe)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("want %s, got %d argument(s)", what, len(args))
		}
		return nil
	}
}
