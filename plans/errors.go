package plans

import (
	"errors"

	"github.com/orch-dev/orch/event"
)

var (
	// ErrBadName means a plan name breaks the naming rule (see NamePattern).
	// It is returned before anything touches the disk. Its text is a
	// predicate: the wrapping error reads `plan name "x" is invalid: ...`.
	ErrBadName = event.ErrBadPlanName

	// ErrNoPlan means plans/<name>/PLAN.md does not exist.
	ErrNoPlan = errors.New("no such plan")

	// ErrNoResult means plans/<name>/RESULT.md does not exist: the worker
	// has not written it (yet).
	ErrNoResult = errors.New("no result written yet")

	// ErrTooLarge means a plan or result file is larger than the bound the
	// caller accepts.
	ErrTooLarge = errors.New("file too large")

	// ErrSymlink means a path component under plans/ is a symbolic link.
	// Plan folders come from workers and branches, so orch never follows a
	// link out of the repository.
	ErrSymlink = errors.New("is a symlink, which orch refuses to follow")

	// ErrFrontMatter means the YAML front matter of a PLAN.md is malformed or
	// holds an invalid value. The message names the file and line.
	ErrFrontMatter = errors.New("invalid front matter")

	// ErrUnknownDep means a plan's depends_on names a plan that does not
	// exist. The wrapping error reads `plan "b" depends on unknown plan "zz"`.
	ErrUnknownDep = errors.New("unknown plan")

	// ErrCycle means the depends_on graph has a cycle, so no order of the
	// plans satisfies it.
	ErrCycle = errors.New("dependency cycle")

	// ErrPlanExists means Write was asked to create a PLAN.md that is
	// already there; Write never overwrites. The wrapping error reads
	// `plans/x/PLAN.md already exists`.
	ErrPlanExists = errors.New("already exists")
)

// ErrNoClaims means a RESULT.md has no usable "## Claims" list.
var ErrNoClaims = errors.New("no claims to verify")

// ErrVerdicts means a verifier's "## Verdicts" could not be read strictly.
var ErrVerdicts = errors.New("unreadable verdicts")

// ErrUnknownAgent means a plan names an agent profile that neither orch
// nor orch.yaml defines.
var ErrUnknownAgent = errors.New("unknown agent")
