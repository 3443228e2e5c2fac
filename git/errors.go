package git

import "errors"

// ErrNotRepo means a directory is not inside a git repository with a work
// tree (or does not exist).
var ErrNotRepo = errors.New("not a git repository")

// ErrNoCommits means the current branch is unborn: the repository has no
// commit yet.
var ErrNoCommits = errors.New("no commits yet")

// ErrNothingToCommit means Commit found no change in the given paths.
var ErrNothingToCommit = errors.New("nothing to commit")

// ErrNoRef means a name does not resolve to a commit.
var ErrNoRef = errors.New("no such commit")

// ErrConflict is a merge or rebase that stopped on conflicting files.
var ErrConflict = errors.New("conflict")
