package fleet

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/internal/state"
)

// The commits a stacked base combines: each dependency's branch head, the
// base branch's head for one integrated or without a branch, each once.
func TestStarts(t *testing.T) {
	tips := map[string]string{"a": "A", "b": "B", "c": "C"}
	for _, tc := range []struct {
		name string
		deps []Dep
		want []string
	}{
		{"one dependency: its branch", []Dep{{Plan: "a"}}, []string{"A"}},
		{"two: both branches", []Dep{{Plan: "b"}, {Plan: "c"}}, []string{"B", "C"}},
		{"integrated: the base branch", []Dep{{Plan: "a", Integrated: true}}, []string{"H"}},
		{"one in, one not", []Dep{{Plan: "a", Integrated: true}, {Plan: "b"}}, []string{"H", "B"}},
		{"no branch: the base branch, once", []Dep{{Plan: "x"}, {Plan: "y"}, {Plan: "a", Integrated: true}}, []string{"H"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := starts(tc.deps, tips, "H"); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// stackRepo is a real repo with main at "base" and plan branches:
// orch/a (a.txt), orch/b and orch/c on a (b.txt, c.txt), orch/x on main
// rewriting shared.txt, orch/y on main rewriting it otherwise.
func stackRepo(t *testing.T) (*Fleet, *git.Repo, map[string]string) {
	t.Helper()
	root := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(branch, from, file, text string) {
		t.Helper()
		run("switch", "-q", "-c", branch, from)
		write(file, text)
		run("add", file)
		run("commit", "-qm", branch)
	}
	run("init", "-q", "-b", "main")
	write("shared.txt", "base\n")
	write(".gitignore", ".orch/\n")
	run("add", ".")
	run("commit", "-qm", "base")
	commit("orch/a", "main", "a.txt", "a\n")
	commit("orch/b", "orch/a", "b.txt", "b\n")
	commit("orch/c", "orch/a", "c.txt", "c\n")
	commit("orch/x", "main", "shared.txt", "x\n")
	commit("orch/y", "main", "shared.txt", "y\n")
	run("switch", "-q", "main")
	tips := map[string]string{}
	for _, b := range []string{"main", "orch/a", "orch/b", "orch/c", "orch/x", "orch/y"} {
		tips[b] = run("rev-parse", b)
	}
	repo, err := git.Open(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	f := testFleet(t, Config{Repo: repo, Isolation: config.Worktree})
	f.cfg.Root, f.cfg.OrchDir = root, filepath.Join(root, ".orch")
	return f, repo, tips
}

func TestStackBase(t *testing.T) {
	f, repo, tips := stackRepo(t)
	ctx := context.Background()

	t.Run("one dependency: its branch head", func(t *testing.T) {
		base, stack, err := f.stackBase(ctx, "p", []Dep{{Plan: "a", Attempt: 1}})
		if err != nil || base != tips["orch/a"] {
			t.Fatalf("base %s, %v; want orch/a %s", base, err, tips["orch/a"])
		}
		if want := []state.StackDep{{Plan: "a", Attempt: 1, Commit: tips["orch/a"]}}; !slices.Equal(stack, want) {
			t.Errorf("stack %+v, want %+v", stack, want)
		}
	})
	t.Run("a dependency's dependency is held: no merge", func(t *testing.T) {
		base, _, err := f.stackBase(ctx, "p", []Dep{{Plan: "a"}, {Plan: "b"}})
		if err != nil || base != tips["orch/b"] {
			t.Fatalf("base %s, %v; want orch/b %s", base, err, tips["orch/b"])
		}
	})
	t.Run("integrated: the base branch's head", func(t *testing.T) {
		base, stack, err := f.stackBase(ctx, "p", []Dep{{Plan: "x", Attempt: 2, Integrated: true}})
		if err != nil || base != tips["main"] || stack[0].Commit != tips["main"] {
			t.Fatalf("base %s %+v, %v; want main %s", base, stack, err, tips["main"])
		}
	})
	t.Run("two branches: a merge of both, in a scratch worktree that goes", func(t *testing.T) {
		base, stack, err := f.stackBase(ctx, "d", []Dep{{Plan: "b", Attempt: 1}, {Plan: "c", Attempt: 3}})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []string{"orch/b", "orch/c"} {
			if in, err := repo.IsAncestor(ctx, tips[b], base); err != nil || !in {
				t.Errorf("%s not in the base %s (%v)", b, base, err)
			}
		}
		if base == tips["orch/b"] || base == tips["orch/c"] {
			t.Errorf("base %s is not a merge", base)
		}
		if len(stack) != 2 || stack[1] != (state.StackDep{Plan: "c", Attempt: 3, Commit: tips["orch/c"]}) {
			t.Errorf("stack %+v", stack)
		}
		if _, err := os.Stat(filepath.Join(f.cfg.OrchDir, "stack", "d")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("scratch worktree left: %v", err)
		}
		if head, _ := repo.Head(ctx); head != tips["main"] {
			t.Errorf("the repo's checkout moved to %s", head)
		}
	})
	t.Run("conflicting branches: the files, nothing made", func(t *testing.T) {
		_, _, err := f.stackBase(ctx, "z", []Dep{{Plan: "x"}, {Plan: "y"}})
		var ce *git.ConflictError
		if !errors.Is(err, ErrStackConflict) || !errors.As(err, &ce) || !slices.Equal(ce.Files, []string{"shared.txt"}) {
			t.Fatalf("got %v, want a conflict in shared.txt", err)
		}
		if _, err := os.Stat(filepath.Join(f.cfg.OrchDir, "stack", "z")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("scratch worktree left: %v", err)
		}
	})
}
