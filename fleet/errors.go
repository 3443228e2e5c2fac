package fleet

import "errors"

// ErrInclude is an unusable .worktreeinclude.
var ErrInclude = errors.New("bad " + IncludeFile)
