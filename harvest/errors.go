package harvest

import "errors"

// ErrNoHarvest means a RESULT.md could not be tied to a commit: it is
// unchanged, and no commit within reach has it.
var ErrNoHarvest = errors.New("nothing to harvest")

// ErrBranchMoved means the repo is no longer on the branch orch serve
// started on: the lead commits nothing until it is.
var ErrBranchMoved = errors.New("branch changed under orch serve")
