package fleet

import "errors"

// ErrNoFleet means the fleet cannot come up as asked: a worker addressed
// that is not there, or one still held by an earlier fleet.
var ErrNoFleet = errors.New("no such worker in the fleet")

// ErrInclude is an unusable .worktreeinclude.
var ErrInclude = errors.New("bad " + IncludeFile)
