package integrate

import "errors"

// ErrNotApproved is a named plan that is not done or verified.
var ErrNotApproved = errors.New("not approved")

// ErrShared means there are no plan branches: shared isolation.
var ErrShared = errors.New("shared isolation: plans are committed on the checked-out branch already, nothing to integrate")
