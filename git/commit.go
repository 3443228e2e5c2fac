package git

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
)

// fallbackIdent is who commits when the repository has no identity of its
// own, so orch works on a fresh machine or CI runner.
var fallbackIdent = [][2]string{{"user.name", "orch"}, {"user.email", "orch@localhost"}}

// Commit stages exactly paths (relative to Root) and commits only them, with
// msg as the message (trailers included). Whatever else the user has staged
// stays staged and out of the commit. It returns the new commit's sha, or
// ErrNothingToCommit when the paths hold no change.
func (r *Repo) Commit(ctx context.Context, msg string, paths ...string) (string, error) {
	if len(paths) == 0 {
		return "", errors.New("commit: no paths given")
	}
	if _, err := r.git(ctx, append([]string{"add", "--"}, paths...)...); err != nil {
		return "", fmt.Errorf("commit %s: %w", strings.Join(paths, " "), err)
	}
	_, err := r.git(ctx, append([]string{"diff", "--cached", "--quiet", "--"}, paths...)...)
	switch {
	case err == nil:
		return "", fmt.Errorf("commit %s: %w", strings.Join(paths, " "), ErrNothingToCommit)
	case exitCode(err) != 1:
		return "", fmt.Errorf("commit %s: %w", strings.Join(paths, " "), err)
	}
	args, err := r.identityArgs(ctx)
	if err != nil {
		return "", fmt.Errorf("commit %s: %w", strings.Join(paths, " "), err)
	}
	args = append(args, "commit", "-q", "--only", "-m", msg, "--")
	if _, err := r.git(ctx, append(args, paths...)...); err != nil {
		return "", fmt.Errorf("commit %s: %w", strings.Join(paths, " "), err)
	}
	return r.Head(ctx)
}

// identityArgs returns "-c user.name=orch" and "-c user.email=orch@localhost"
// for whichever of the two the repository's configuration (any level) lacks,
// so a configured identity is always used as is.
func (r *Repo) identityArgs(ctx context.Context) ([]string, error) {
	r.identMu.Lock()
	defer r.identMu.Unlock()
	if r.ident != nil {
		return r.ident, nil
	}
	out, err := r.git(ctx, "config", "--get-regexp", `^user\.(name|email)$`)
	if err != nil && exitCode(err) != 1 { // 1: none of the keys is set
		return nil, err
	}
	have := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		key, _, _ := strings.Cut(sc.Text(), " ")
		have[key] = true
	}
	args := []string{}
	for _, kv := range fallbackIdent {
		if !have[kv[0]] {
			args = append(args, "-c", kv[0]+"="+kv[1])
		}
	}
	if len(args) == 0 {
		// The user's identity is configured: remember it, one git process
		// less per commit. Without one, look again next time: the user may
		// configure it while orch runs, and theirs must win.
		r.ident = args
	}
	return append([]string(nil), args...), nil
}
