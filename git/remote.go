package git

import (
	"context"
	"fmt"
	"strings"
)

// Work moves between a lead's repository and a host's clone in two ways:
// the host fetches the lead's commits from its clone's remote (the one it
// was cloned from), and the lead takes a host's plan branch from a bundle
// the host made (package hostd), into a ref of its own.

// Fetch fetches remote's branches (and their objects) into the clone.
func (r *Repo) Fetch(ctx context.Context, remote string) error {
	if _, err := r.git(ctx, "fetch", "-q", "--no-tags", remote); err != nil {
		return fmt.Errorf("fetch %s: %w", remote, err)
	}
	return nil
}

// HasCommit says whether sha names a commit the repository holds.
func (r *Repo) HasCommit(ctx context.Context, sha string) bool {
	_, err := r.git(ctx, "cat-file", "-e", sha+"^{commit}")
	return err == nil
}

// Bundle writes to path a bundle of branch's commits that base does not
// have, and returns branch's head. Nothing to bundle (the head is base) is
// ok false and no file.
func (r *Repo) Bundle(ctx context.Context, path, base, branch string) (head string, ok bool, err error) {
	head, err = r.RevParse(ctx, "refs/heads/"+branch)
	if err != nil {
		return "", false, err
	}
	if head == base {
		return head, false, nil
	}
	if _, err := r.git(ctx, "bundle", "create", "-q", path, base+".."+"refs/heads/"+branch); err != nil {
		return "", false, fmt.Errorf("bundle %s: %w", branch, err)
	}
	return head, true, nil
}

// FetchBundle takes branch out of the bundle at path into ref, and checks
// it is the commit want.
func (r *Repo) FetchBundle(ctx context.Context, path, branch, ref, want string) error {
	if _, err := r.git(ctx, "bundle", "verify", "-q", path); err != nil {
		return fmt.Errorf("bundle of %s: %w", branch, err)
	}
	if _, err := r.git(ctx, "fetch", "-q", "--no-tags", "--force", path, "refs/heads/"+branch+":"+ref); err != nil {
		return fmt.Errorf("fetch bundle of %s: %w", branch, err)
	}
	got, err := r.RevParse(ctx, ref)
	if err != nil {
		return err
	}
	if !strings.EqualFold(got, want) {
		return fmt.Errorf("bundle of %s: it holds %s, the host said %s", branch, Short(got), Short(want))
	}
	return nil
}

// ResetHard moves the checked-out branch and the work tree to rev,
// dropping local changes (for a work tree only orch writes).
func (r *Repo) ResetHard(ctx context.Context, rev string) error {
	if _, err := r.git(ctx, "reset", "-q", "--hard", rev); err != nil {
		return fmt.Errorf("reset to %s: %w", Short(rev), err)
	}
	return nil
}
