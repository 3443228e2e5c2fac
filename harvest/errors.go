package harvest

import "errors"

// ErrNoHarvest means a RESULT.md could not be tied to a commit: it is
// unchanged, and no commit within reach has it.
var ErrNoHarvest = errors.New("nothing to harvest")
