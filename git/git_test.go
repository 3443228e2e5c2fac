package git

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/internal/runner"
	"github.com/orch-dev/orch/internal/runner/fake"
)

// Unit tests: the arguments git receives, checked by the strict fake.

func exit(code int, stderr string) error {
	return &runner.Error{ExitCode: code, Stderr: stderr, Err: errors.New("exit")}
}

func TestOpenWith(t *testing.T) {
	rp := []string{"-C", "/w/sub", "rev-parse", "--path-format=absolute", "--git-common-dir"}
	top := []string{"-C", "/w/sub", "rev-parse", "--show-toplevel"}
	tests := []struct {
		name    string
		setup   func(f *fake.Runner)
		want    string
		wantErr error
	}{
		{"main repo", func(f *fake.Runner) { f.Expect("git", rp, "/w/.git\n", nil) }, "/w", nil},
		{"separate git dir", func(f *fake.Runner) {
			f.Expect("git", rp, "/elsewhere/w.git\n", nil).Expect("git", top, "/w\n", nil)
		}, "/w", nil},
		{"bare", func(f *fake.Runner) {
			f.Expect("git", rp, "/srv/w.git\n", nil).
				Expect("git", top, "", exit(128, "fatal: this operation must be run in a work tree"))
		}, "", ErrNotRepo},
		{"not a repo", func(f *fake.Runner) {
			f.Expect("git", rp, "", exit(128, "fatal: not a git repository"))
		}, "", ErrNotRepo},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fake.New(t)
			tt.setup(f)
			r, err := OpenWith(context.Background(), "/w/sub", f)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "/w/sub") {
					t.Errorf("error %q does not name the directory", err)
				}
				return
			}
			if r.Root != tt.want {
				t.Errorf("Root = %q, want %q", r.Root, tt.want)
			}
		})
	}
}

func TestCommitArgs(t *testing.T) {
	const msg = "harvest x\n\nOrch-Event: e1"
	tests := []struct {
		name     string
		config   string
		configEr error
		ident    []string
	}{
		{"no identity", "", exit(1, ""), []string{"-c", "user.name=orch", "-c", "user.email=orch@localhost"}},
		{"full identity", "user.name Ann\nuser.email ann@x\n", nil, nil},
		{"name only", "user.name Ann\n", nil, []string{"-c", "user.email=orch@localhost"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fake.New(t).In("/w")
			f.Expect("git", []string{"add", "--", "a", "b/c"}, "", nil).
				Expect("git", []string{"diff", "--cached", "--quiet", "--", "a", "b/c"}, "", exit(1, "")).
				Expect("git", []string{"config", "--get-regexp", `^user\.(name|email)$`}, tt.config, tt.configEr).
				Expect("git", append(tt.ident, "commit", "-q", "--only", "-m", msg, "--", "a", "b/c"), "", nil).
				Expect("git", []string{"rev-parse", "--verify", "-q", "HEAD"}, "abc123\n", nil)
			r := &Repo{Root: "/w", Runner: f}
			got, err := r.Commit(context.Background(), msg, "a", "b/c")
			if err != nil {
				t.Fatal(err)
			}
			if got != "abc123" {
				t.Errorf("sha = %q, want abc123", got)
			}
		})
	}
}

func TestCommitNothing(t *testing.T) {
	f := fake.New(t).In("/w")
	f.Expect("git", []string{"add", "--", "a"}, "", nil).
		Expect("git", []string{"diff", "--cached", "--quiet", "--", "a"}, "", nil)
	r := &Repo{Root: "/w", Runner: f}
	if _, err := r.Commit(context.Background(), "m", "a"); !errors.Is(err, ErrNothingToCommit) {
		t.Errorf("err = %v, want ErrNothingToCommit", err)
	}
}

func TestHeadArgs(t *testing.T) {
	f := fake.New(t).In("/w")
	f.Expect("git", []string{"rev-parse", "--verify", "-q", "HEAD"}, "", exit(1, ""))
	r := &Repo{Root: "/w", Runner: f}
	if _, err := r.Head(context.Background()); !errors.Is(err, ErrNoCommits) {
		t.Errorf("err = %v, want ErrNoCommits", err)
	}
}

func TestFindTrailerArgs(t *testing.T) {
	f := fake.New(t).In("/w")
	// The newest grep hit only mentions the text; the older one has the trailer.
	out := "new\x00e10\n\x1e\nold\x00e1\n\x1e\n"
	f.Expect("git", []string{"log", "--ignore-missing", "-F", "--grep=Orch-Event: e1",
		"--format=%H%x00%(trailers:key=Orch-Event,valueonly,unfold)%x1e", "HEAD", "--"}, out, nil)
	r := &Repo{Root: "/w", Runner: f}
	got, err := r.FindTrailer(context.Background(), "Orch-Event", "e1")
	if err != nil {
		t.Fatal(err)
	}
	if got != "old" {
		t.Errorf("sha = %q, want old", got)
	}
	if _, err := r.FindTrailer(context.Background(), "Bad,Key", "e1"); err == nil {
		t.Errorf("a key with a comma was accepted")
	}
}

func TestLogArgs(t *testing.T) {
	f := fake.New(t).In("/w")
	f.Expect("git", []string{"log", "--ignore-missing", "--format=%H%x00%ct%x00%s%x1e", "-n", "2", "HEAD", "--", "LEDGER.jsonl"},
		"s2\x001700000100\x00second\x1e\ns1\x001700000000\x00first: a subject\x1e\n", nil)
	r := &Repo{Root: "/w", Runner: f}
	got, err := r.Log(context.Background(), 2, "LEDGER.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want := []Commit{
		{SHA: "s2", Subject: "second", Time: time.Unix(1700000100, 0)},
		{SHA: "s1", Subject: "first: a subject", Time: time.Unix(1700000000, 0)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d commits, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("commit %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestIsIgnoredArgs(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		want    bool
		wantErr bool
	}{
		{"ignored", nil, true, false},
		{"not ignored", exit(1, ""), false, false},
		{"failure", exit(128, "fatal"), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fake.New(t).In("/w")
			f.Expect("git", []string{"check-ignore", "-q", "--", ".orch/x"}, "", tt.err)
			r := &Repo{Root: "/w", Runner: f}
			got, err := r.IsIgnored(context.Background(), ".orch/x")
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ignored = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestInitArgs(t *testing.T) {
	f := fake.New(t)
	f.Expect("git", []string{"init", "-q", "-b", "main", "/w"}, "", nil)
	if err := InitWith(context.Background(), "/w", f); err != nil {
		t.Fatal(err)
	}
}

// Behaviour tests: the real git, with no identity configured anywhere.

func noIdentity(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
}

// newRepo makes a fresh repository and returns it opened.
func newRepo(t *testing.T) *Repo {
	t.Helper()
	noIdentity(t)
	dir := t.TempDir()
	ctx := context.Background()
	if err := Init(ctx, dir); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func write(t *testing.T, r *Repo, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(r.Root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func gitOut(t *testing.T, r *Repo, args ...string) string {
	t.Helper()
	out, err := r.git(context.Background(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func TestCommitOnlyGivenPaths(t *testing.T) {
	r := newRepo(t)
	ctx := context.Background()
	if _, err := r.Head(ctx); !errors.Is(err, ErrNoCommits) {
		t.Fatalf("Head on empty repo: err = %v, want ErrNoCommits", err)
	}
	if log, err := r.Log(ctx, 5); err != nil || len(log) != 0 {
		t.Fatalf("Log on empty repo = %v, %v; want empty", log, err)
	}
	write(t, r, map[string]string{"plans/x/RESULT.md": "done\n", "LEDGER.jsonl": "{}\n", "mine.txt": "user's\n"})
	gitOut(t, r, "add", "mine.txt")

	sha, err := r.Commit(ctx, "harvest x\n\nOrch-Event: ev-1", "plans/x/RESULT.md", "LEDGER.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if head, _ := r.Head(ctx); head != sha || len(sha) != 40 {
		t.Errorf("Commit returned %q, HEAD is %q", sha, head)
	}
	if got, want := gitOut(t, r, "show", "--name-only", "--format=", sha), "LEDGER.jsonl\nplans/x/RESULT.md"; got != want {
		t.Errorf("committed files:\n%s\nwant:\n%s", got, want)
	}
	if got, want := gitOut(t, r, "diff", "--cached", "--name-only"), "mine.txt"; got != want {
		t.Errorf("still staged = %q, want %q", got, want)
	}
	if got, want := gitOut(t, r, "log", "-1", "--format=%an <%ae>"), "orch <orch@localhost>"; got != want {
		t.Errorf("author = %q, want %q", got, want)
	}

	if _, err := r.Commit(ctx, "again", "plans/x/RESULT.md", "LEDGER.jsonl"); !errors.Is(err, ErrNothingToCommit) {
		t.Errorf("second commit: err = %v, want ErrNothingToCommit", err)
	}

	// A configured identity is used as is.
	gitOut(t, r, "config", "user.name", "Ann")
	gitOut(t, r, "config", "user.email", "ann@example.com")
	write(t, r, map[string]string{"LEDGER.jsonl": "{}\n{}\n"})
	if _, err := r.Commit(ctx, "ledger", "LEDGER.jsonl"); err != nil {
		t.Fatal(err)
	}
	if got, want := gitOut(t, r, "log", "-1", "--format=%an <%ae>"), "Ann <ann@example.com>"; got != want {
		t.Errorf("author = %q, want %q", got, want)
	}

	log, err := r.Log(ctx, 10, "plans/x/RESULT.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].SHA != sha || log[0].Subject != "harvest x" || time.Since(log[0].Time) > time.Hour {
		t.Errorf("Log(plans/x/RESULT.md) = %+v, want the one harvest commit %s", log, sha)
	}
}

func TestFindTrailer(t *testing.T) {
	r := newRepo(t)
	ctx := context.Background()
	write(t, r, map[string]string{"a": "1"})
	want, err := r.Commit(ctx, "one\n\nOrch-Event: ev-1", "a")
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, map[string]string{"a": "2"})
	// Mentions the text in the body and has a longer value: neither counts.
	if _, err := r.Commit(ctx, "two\n\nsee Orch-Event: ev-1 above\n\nOrch-Event: ev-12", "a"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key, value, want string
	}{
		{"Orch-Event", "ev-1", want},
		{"Orch-Event", "ev-9", ""},
		{"Orch-Other", "ev-1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			got, err := r.FindTrailer(ctx, tt.key, tt.value)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("FindTrailer = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFindTrailerUnborn(t *testing.T) {
	r := newRepo(t)
	got, err := r.FindTrailer(context.Background(), "Orch-Event", "x")
	if err != nil || got != "" {
		t.Errorf("FindTrailer on empty repo = %q, %v; want \"\", nil", got, err)
	}
}

func TestOpenFromWorktree(t *testing.T) {
	r := newRepo(t)
	ctx := context.Background()
	write(t, r, map[string]string{"a": "1"})
	if _, err := r.Commit(ctx, "one", "a"); err != nil {
		t.Fatal(err)
	}
	wt := filepath.Join(t.TempDir(), "wt")
	gitOut(t, r, "worktree", "add", "-q", "-b", "w1", wt)
	sub := filepath.Join(wt, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{wt, sub} {
		got, err := Open(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		if !sameDir(t, got.Root, r.Root) {
			t.Errorf("Open(%s).Root = %q, want %q", dir, got.Root, r.Root)
		}
	}
}

func sameDir(t *testing.T, a, b string) bool {
	t.Helper()
	ra, err := filepath.EvalSymlinks(a)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := filepath.EvalSymlinks(b)
	if err != nil {
		t.Fatal(err)
	}
	return ra == rb
}

func TestOpenNotRepo(t *testing.T) {
	noIdentity(t)
	dir := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir))
	_, err := Open(context.Background(), dir)
	if !errors.Is(err, ErrNotRepo) {
		t.Fatalf("err = %v, want ErrNotRepo", err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Errorf("error %q does not name %s", err, dir)
	}
}

func TestIsIgnored(t *testing.T) {
	r := newRepo(t)
	write(t, r, map[string]string{".gitignore": ".orch/\n"})
	tests := []struct {
		path string
		want bool
	}{
		{".orch/lock", true},
		{"plans/x/PLAN.md", false},
	}
	for _, tt := range tests {
		got, err := r.IsIgnored(context.Background(), tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("IsIgnored(%s) = %v, want %v", tt.path, got, tt.want)
		}
	}
}
