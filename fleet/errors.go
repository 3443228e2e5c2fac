package fleet

import "errors"

// ErrNoFleet means the fleet cannot come up as asked: a worker addressed
// that is not there, or one still held by an earlier fleet.
var ErrNoFleet = errors.New("no such worker in the fleet")

// ErrInclude is an unusable .worktreeinclude.
var ErrInclude = errors.New("bad " + IncludeFile)

// ErrBranchHeld is a plan branch checked out outside orch's worktrees.
var ErrBranchHeld = errors.New("plan branch in use")

// ErrWorkerTree is git refusing in the worker's own worktree.
var ErrWorkerTree = errors.New("worktree refused")

// ErrPlanContent is a plan whose branch cannot take its plan folder (a
// symlink where plans/<name> should be).
var ErrPlanContent = errors.New("plan folder cannot be brought over")

// ErrStackConflict is a plan whose dependencies' branches conflict: it
// cannot start from their work.
var ErrStackConflict = errors.New("dependencies' branches conflict")

// ErrRemote means a worker runs on another host: its pane is not this
// machine's to read or type into.
var ErrRemote = errors.New("worker on another host")
