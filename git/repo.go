// Package git is everything orch says to git: finding the repository (the
// main one, even from inside a linked worktree), committing exactly the files
// the lead loop harvested, and reading history back. Every call goes through
// runner.Runner so unit tests can check the arguments with the strict fake;
// behaviour tests run the real git in a temporary directory.
package git

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/orch-dev/orch/internal/runner"
)

// Repo is one repository's work tree, addressed by its top-level directory.
type Repo struct {
	identMu sync.Mutex
	ident   []string // -c user.name/-c user.email fallbacks, read once
	Root    string
	Runner  runner.Runner
	refs    refFiles // where HEAD and branches are read without git, if anywhere
}

// Open finds the repository that dir belongs to. When dir is inside a linked
// worktree, Root is the main repository's top level, not the worktree's,
// because .orch/ and the ledger live there.
func Open(ctx context.Context, dir string) (*Repo, error) {
	return OpenWith(ctx, dir, runner.OS{})
}

// OpenWith is Open with an explicit runner.
func OpenWith(ctx context.Context, dir string, run runner.Runner) (*Repo, error) {
	out, err := run.Run(ctx, runner.Cmd{Name: "git", Args: []string{
		"-C", dir, "rev-parse", "--path-format=absolute", "--git-common-dir"}})
	if err != nil {
		return nil, openErr(dir, err)
	}
	common := filepath.Clean(strings.TrimSpace(string(out)))
	if filepath.Base(common) == ".git" {
		return &Repo{Root: filepath.Dir(common), Runner: run, refs: refsAt(common)}, nil
	}
	// The git directory lives elsewhere (--separate-git-dir, a submodule, a
	// bare repository): only git knows where the work tree is, if any.
	out, err = run.Run(ctx, runner.Cmd{Name: "git", Args: []string{
		"-C", dir, "rev-parse", "--show-toplevel"}})
	if err != nil {
		return nil, openErr(dir, err)
	}
	top := strings.TrimSpace(string(out))
	if top == "" {
		return nil, fmt.Errorf("open %s: no work tree: %w", dir, ErrNotRepo)
	}
	return &Repo{Root: top, Runner: run}, nil
}

func openErr(dir string, err error) error {
	var re *runner.Error
	if errors.As(err, &re) && re.ExitCode == 128 {
		return fmt.Errorf("open %s: %w (%s)", dir, ErrNotRepo, strings.TrimSpace(re.Stderr))
	}
	return fmt.Errorf("open %s: %w", dir, err)
}

// Init makes dir a new repository whose first branch is main.
func Init(ctx context.Context, dir string) error {
	return InitWith(ctx, dir, runner.OS{})
}

// InitWith is Init with an explicit runner.
func InitWith(ctx context.Context, dir string, run runner.Runner) error {
	if _, err := run.Run(ctx, runner.Cmd{Name: "git", Args: []string{"init", "-q", "-b", "main", dir}}); err != nil {
		return fmt.Errorf("init %s: %w", dir, err)
	}
	return nil
}

// git runs one git command in the work tree.
func (r *Repo) git(ctx context.Context, args ...string) ([]byte, error) {
	return r.Runner.Run(ctx, runner.Cmd{Name: "git", Args: args, Dir: r.Root})
}

// exitCode is the exit status carried by a runner error, or -1.
func exitCode(err error) int {
	var re *runner.Error
	if errors.As(err, &re) {
		return re.ExitCode
	}
	return -1
}

// IsIgnored reports whether git ignores path (relative to Root).
func (r *Repo) IsIgnored(ctx context.Context, path string) (bool, error) {
	_, err := r.git(ctx, "check-ignore", "-q", "--", path)
	switch {
	case err == nil:
		return true, nil
	case exitCode(err) == 1:
		return false, nil
	default:
		return false, fmt.Errorf("check-ignore %s: %w", path, err)
	}
}

// Short is a commit id cut to 10 characters, as orch's logs and
// callbacks show it.
func Short(sha string) string {
	if len(sha) > 10 {
		return sha[:10]
	}
	return sha
}
